"""``bench --processes N`` and serving ``--runs N``: bad counts refused in one line, and a
real two-process bench whose interval comes from the spread between the processes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mlenergy.cli import main
from mlenergy.records import RunRecord
from mlenergy.workloads.bench import BenchOptions
from mlenergy.workloads.bench_processes import CHILD_MODULE, _child_env, job_text
from mlenergy.workloads.inference import InferenceSpec

FAST = ["--input-tokens", "8", "--output-tokens", "4", "--repeats", "2", "--idle-s", "0.05"]
TINY = ["bench", "-m", "preset:tiny-dense", "-b", "1", *FAST]


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--processes", "0"], "--processes 0 must be at least 2"),
        (["--processes", "101"], "--processes 101 is above 100"),
        (["--processes", "2", "--interleave"], "already interleaves"),
        (["--runs", "3"], "--runs repeats serving levels"),
        (["--processes", "2", "--endpoint", "http://127.0.0.1:9/v1"], "a serving bench repeats"),
        (["--runs", "0", "--endpoint", "http://127.0.0.1:9/v1"], "--runs 0 must be between"),
    ],
)
def test_bad_repeat_counts_are_refused_in_one_line(extra, says, capsys, tmp_path):
    data = tmp_path / "data"
    assert main([*TINY, *extra, "--data-dir", str(data)]) == 2
    assert says in _one_line_error(capsys)
    assert not data.exists()


def test_a_bad_model_stops_before_any_process_starts(capsys, tmp_path):
    data = tmp_path / "data"
    args = ["bench", "-m", "preset:no-such", "-b", "1", *FAST, "--processes", "2"]
    assert main([*args, "--data-dir", str(data)]) == 2
    assert "no-such" in _one_line_error(capsys)
    assert not data.exists()


def test_a_malformed_job_makes_the_child_exit_2():
    done = subprocess.run(
        [sys.executable, "-m", CHILD_MODULE], input="{}", capture_output=True, text=True,
        env=_child_env(), timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().startswith("error: a malformed bench job")


def test_the_job_a_child_reads_holds_the_sweep():
    spec = InferenceSpec(batch_sizes=(1, 4), repeats=2, tags={"study": "x"})
    job = json.loads(job_text("preset:tiny-dense", spec, BenchOptions(gpu_indices=(0,))))
    assert job["model"] == "preset:tiny-dense"
    assert job["spec"]["batch_sizes"] == [1, 4] and job["spec"]["tags"] == {"study": "x"}
    assert job["options"]["gpu_indices"] == [0] and job["options"]["progress"] is False


@pytest.mark.slow
def test_two_fresh_processes_give_one_record_with_the_spread_between_them(capsys, tmp_path):
    data = tmp_path / "data"
    assert main([*TINY, "--processes", "2", "--json", "--data-dir", str(data)]) == 0
    out, err = capsys.readouterr()
    (line,) = [x for x in out.splitlines() if x.strip()]
    record = RunRecord.model_validate_json(line)
    assert record.interval.kind == "between-runs" and record.interval.n == 2
    assert record.interval.fresh == "process" and record.interval.repeats_per_run == 2
    assert record.repeats == 4 and len(record.interval.run_energy_per_token_j) == 2
    request = record.phase("request")
    assert request.energy_per_token_j == pytest.approx(
        sum(record.interval.run_energy_per_token_j) / 2
    )
    assert request.energy_per_token_j_ci95 is not None
    assert "run 1 of 2 of preset:tiny-dense: done" in err
    assert "between-runs, 2 processes" in err  # the table
    from mlenergy.store import RunStore

    (stored,) = RunStore(data).runs()
    assert stored == record
