"""Serving ``--runs N``: rounds over the levels, fresh each time; one record per level stored."""

from __future__ import annotations

import pytest

from mlenergy.errors import Interrupted
from mlenergy.records import (
    Hardware,
    IdleBaseline,
    MeasuredScope,
    Phase,
    PhaseResult,
    RunRecord,
    Software,
    Workload,
)
from mlenergy.store import RunStore
from mlenergy.testing.synthetic import synthetic_model
from mlenergy.workloads.serving import runs as serving_runs
from mlenergy.workloads.serving.spec import ServingSpec

GPU = "emulated:zeus-gpu"


def level_record(level: int, energy_j: float, *, failed: bool = False) -> RunRecord:
    common = dict(
        model=synthetic_model("org/served-1b", 1.0, False),
        workload=Workload(kind="inference", batch_size=level, input_tokens=8, output_tokens=16,
                          num_requests=64, method="serving-steady-state"),
        hardware=Hardware(accelerator_model="Emulated GPU", accelerator_count=1,
                          accelerator_tdp_w=700.0),
        software=Software(python="3.12", mlenergy="0"),
        energy_source=GPU,
        scope=MeasuredScope(gpu_indices=(0,)),
        idle=IdleBaseline(avg_power_w=100.0, duration_s=1.0, energy_source=GPU),
    )  # fmt: skip
    if failed:
        return RunRecord(status="failed", error=f"level {level}: the server died", **common)
    request = PhaseResult.from_totals(Phase.REQUEST, 10.0, energy_j, 1000)
    return RunRecord(phases=(request,), **common)


class FakeRunner:
    """Stands in for ``run_serving_bench``: records what it was asked, answers per round."""

    def __init__(self, energies: dict[int, list[float]], fail: set[tuple[int, int]] = frozenset()):
        self.energies, self.fail, self.calls = energies, fail, []

    def __call__(self, spec, *, data_dir=None, keep_going=False, on_record=None, log_dir=None):
        round_no = len(self.calls)
        self.calls.append((data_dir, keep_going))
        self.log_dir = log_dir
        out = []
        for level in spec.levels:
            rec = level_record(level, self.energies[level][round_no],
                               failed=(round_no, level) in self.fail)  # fmt: skip
            out.append(rec)
            on_record(rec)
        return out


def _spec(**kw) -> ServingSpec:
    return ServingSpec(model="tiny", levels=(8, 64), num_requests=64, endpoint="http://x/v1", **kw)


def test_every_round_measures_every_level_and_one_record_per_level_is_stored(monkeypatch, tmp_path):
    fake = FakeRunner({8: [3000.0, 3300.0, 4400.0], 64: [900.0, 1000.0, 950.0]})
    monkeypatch.setattr(serving_runs, "run_serving_bench", fake)
    order: list[tuple[int, int]] = []
    records = serving_runs.run_serving_runs(
        _spec(),
        3,
        data_dir=tmp_path,
        on_run=lambda r, rec: order.append((r, rec.workload.batch_size)),
    )
    # interleaved across levels: 8 64, 8 64, 8 64; nothing stored by a round itself
    assert order == [(1, 8), (1, 64), (2, 8), (2, 64), (3, 8), (3, 64)]
    assert fake.calls == [(None, True)] * 3
    assert [r.workload.batch_size for r in records] == [8, 64]
    eight = records[0]
    assert eight.interval.label() == "between-runs, 3 attaches"
    assert eight.interval.kept_run == 2 and eight.phase("request").energy_j == 3300.0
    assert eight.interval.run_energy_per_token_j == pytest.approx([3.0, 3.3, 4.4])
    stored = {r.run_id: r for r in RunStore(tmp_path).runs()}
    assert set(stored) == {r.run_id for r in records}


def test_a_launched_server_per_run_is_said_and_logs_in_the_store(monkeypatch, tmp_path):
    fake = FakeRunner({8: [3000.0, 3100.0], 64: [900.0, 910.0]})
    monkeypatch.setattr(serving_runs, "run_serving_bench", fake)
    spec = ServingSpec(model="tiny", levels=(8, 64), num_requests=64, launch="serve {model}")
    records = serving_runs.run_serving_runs(spec, 2, data_dir=tmp_path)
    assert {r.interval.label() for r in records} == {"between-runs, 2 launches"}
    assert fake.log_dir == tmp_path / "server-logs"


def test_a_level_that_failed_in_one_run_is_stored_failed(monkeypatch, tmp_path):
    fake = FakeRunner({8: [3000.0, 3100.0], 64: [900.0, 910.0]}, fail={(1, 64)})
    monkeypatch.setattr(serving_runs, "run_serving_bench", fake)
    eight, sixty_four = serving_runs.run_serving_runs(_spec(), 2, data_dir=tmp_path)
    assert eight.status == "ok"
    assert sixty_four.status == "failed"
    assert sixty_four.error.startswith("failed in 1 of 2 fresh runs (attach): level 64")


def test_one_run_is_the_plain_runner(monkeypatch, tmp_path):
    seen = {}

    def plain(spec, *, data_dir=None, on_record=None, keep_going=False):
        seen.update(data_dir=data_dir, keep_going=keep_going)
        return []

    monkeypatch.setattr(serving_runs, "run_serving_bench", plain)
    assert serving_runs.run_serving_runs(_spec(), 1, data_dir=tmp_path) == []
    assert seen == {"data_dir": tmp_path, "keep_going": False}


def test_ctrl_c_says_what_was_stored(monkeypatch, tmp_path):
    def interrupted(spec, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(serving_runs, "run_serving_bench", interrupted)
    with pytest.raises(Interrupted, match="0 level"):
        serving_runs.run_serving_runs(_spec(), 2, data_dir=tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_cli_attach_runs_twice_per_level_against_a_real_server(dense_server, tmp_path, capsys):
    """``--runs 2`` on ``transformers serve``, emulated GPUs at a constant 200 W: the GPUs draw
    their idle power through every window, so each level is marked host-bound too."""
    from mlenergy.cli import main
    from mlenergy.measure.emulated import install_emulated_gpus
    from mlenergy.store.serving_checks import serving_problems

    endpoint, _, model = dense_server
    data = tmp_path / "data"
    argv = [
        "bench", "--endpoint", endpoint, "--model", model, "--concurrency", "2,4",
        "--num-requests", "12", "--input-tokens", "8", "--max-output-tokens", "24",
        "--ignore-eos", "--idle-s", "0.1", "--engine", "transformers (test)",
        "--gpu-indices", "0", "--runs", "2", "--data-dir", str(data), "--json",
    ]  # fmt: skip
    with install_emulated_gpus(power_w=200.0, count=1):
        assert main(argv) == 0
    out, err = capsys.readouterr()
    printed = [RunRecord.model_validate_json(x) for x in out.splitlines() if x.startswith("{")]
    assert [r.workload.batch_size for r in printed] == [2, 4]
    assert "run 1 of 2, level 2:" in err and "run 2 of 2, level 4:" in err
    stored = sorted(RunStore(data).runs(), key=lambda r: r.workload.batch_size)
    assert [r.run_id for r in stored] == [r.run_id for r in printed]
    for record in stored:
        assert record.status == "ok", record.error
        assert record.interval.label() == "between-runs, 2 attaches"
        assert len(record.interval.run_energy_per_token_j) == 2
        assert record.phase("request").energy_per_token_j_ci95 is not None
        assert record.host_bound.marked and record.host_bound.window_power_w["request"] == (
            pytest.approx(200.0, rel=1e-3)
        )
        assert serving_problems(record, "run") == []  # the kept run's window is whole
