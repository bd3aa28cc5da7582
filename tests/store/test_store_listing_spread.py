"""``mlenergy runs list`` and ``runs show`` say what a run's interval comes from, and its mark."""

from __future__ import annotations

import json

from mlenergy.cli import main
from mlenergy.records import HostBound, IntervalBasis, MeasuredScope
from mlenergy.store import RunStore
from mlenergy.testing.synthetic import synthetic_model, synthetic_run

MODEL = synthetic_model("org/listed-8b", 8.0, False)
VERDICT = HostBound(
    marked=True,
    near_idle_share=0.93,
    window_power_w={"request": 130.0},
    near_idle=("request",),
    idle_power_w=120.0,
    power_limit_w=700.0,
    rule="the rule",
    time_share_threshold=0.5,
)


def _runs():
    marked = synthetic_run(MODEL, index=1).model_copy(
        update={
            "host_bound": VERDICT,
            "scope": MeasuredScope(gpu_indices=(0,)),
            "interval": IntervalBasis(kind="between-runs", n=3, fresh="launch", kept_run=2),
        }
    )
    plain = synthetic_run(MODEL, batch_size=8, index=2)
    return marked, plain


def test_runs_list_shows_the_interval_and_the_mark(tmp_path, capsys):
    marked, plain = _runs()
    RunStore(tmp_path).append([marked, plain])
    assert main(["runs", "list", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if marked.run_id in line)
    assert "between-runs, 3 launches" in row and "host-bound" in row
    other = next(line for line in out.splitlines() if plain.run_id in line)
    assert "host-bound" not in other and "between-runs" not in other
    assert "interval" in out and "marks" in out


def test_runs_show_prints_the_record_and_says_both(tmp_path, capsys):
    marked, plain = _runs()
    RunStore(tmp_path).append([marked, plain])
    assert main(["runs", "show", marked.run_id, "--data-dir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["interval"]["kept_run"] == 2  # stdout stays one JSON document
    assert "interval: between-runs, 3 launches" in err
    assert "host-bound: the GPUs were near idle for 93% of the measured time" in err
    assert main(["runs", "show", plain.run_id, "--data-dir", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "interval: none" in err
    assert "host-bound: does not apply (no GPU in scope" in err
