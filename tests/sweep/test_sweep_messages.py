"""What a sweep says: every problem of a plan, advice a plan can follow, estimates shown."""

from __future__ import annotations

from pathlib import Path

from sweep_helpers import run_cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_four_problems_are_four_lines(write_plan, tmp_path):
    plan = write_plan(
        models=["preset:tiny-dense", "preset:no-such-model"],
        precisions=["float33"],
        devices=["cuda"],
        prompts="no-such-file.txt",
    )
    data = tmp_path / "data"
    rc, out, err = run_cli("sweep", str(plan), "--data-dir", str(data), "--dry-run")
    assert rc == 2, (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[0].startswith("error: ") and "4 problems" in lines[0], err
    problems = lines[1:]
    assert len(problems) == 4, err
    for needle in ("precisions[0]", "devices[0]", "prompts", "models[1]"):
        assert sum(needle in line for line in problems) == 1, (needle, err)
    assert not data.exists()


def test_pydantic_problems_are_all_listed(write_plan):
    plan = write_plan(batch_sizes=[0, 2], output_tokens=[-2], repeats=0)
    rc, _, err = run_cli("sweep", str(plan), "--dry-run")
    assert rc == 2
    assert "3 problems" in err and err.count("\n  - ") == 3, err


def test_one_problem_stays_one_line(write_plan):
    rc, _, err = run_cli("sweep", str(write_plan(precisions=["float33"])), "--dry-run")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "precisions[0]" in err


def test_cuda_advice_fits_a_plan_not_bench(write_plan, tmp_path):
    rc, _, err = run_cli("sweep", str(write_plan(devices=["cuda"])), "--dry-run")
    assert rc == 2
    assert "--device " not in err, err  # sweep has no --device option
    assert "devices: [cpu]" in err


def test_estimate_sweep_prints_what_it_stored(tmp_path):
    data = tmp_path / "data"
    argv = ["sweep", str(EXAMPLES / "sweep-estimate.yaml"), "--data-dir", str(data), "--quiet"]
    rc, out, err = run_cli(*argv)
    assert rc == 0, err
    rows = [line for line in out.splitlines() if line.startswith("meta-llama/")]
    assert len(rows) == 4, out
    assert all("estimated:mlenergy-" in row for row in rows)
    assert "J/token" in out
    # Already stored: the second sweep still shows them.
    rc, out, _ = run_cli(*argv)
    assert rc == 0 and "4 already stored" in out
    assert len([line for line in out.splitlines() if line.startswith("meta-llama/")]) == 4


def test_dry_run_checks_presets_by_name_and_says_so(write_plan):
    rc, _, err = run_cli("sweep", str(write_plan(input_tokens=[4000])), "--dry-run")
    assert rc == 0 and "note: a dry run checks presets by name" in err
    rc, _, err = run_cli("sweep", str(write_plan(input_tokens=[4000])))
    assert rc == 2 and "context" in err  # the sweep itself refuses it before any run
