"""The leaderboard shows a run's own host-bound verdict and what its interval comes from."""

from __future__ import annotations

import html

import pytest

from mlenergy.records import HostBound, IntervalBasis, RepeatStats
from mlenergy.store import RunStore
from mlenergy.testing.synthetic import synthetic_model, synthetic_run

MODEL = synthetic_model("org/spread-8b", 8.0, False)
MEASURED = "measured:zeus-nvml"
VERDICT = HostBound(
    marked=True,
    near_idle_share=0.99,
    window_power_w={"prefill": 219.5, "decode": 139.9},
    near_idle=("decode",),
    idle_power_w=120.0,
    power_limit_w=700.0,
    rule="the rule",
    time_share_threshold=0.5,
)


def spread_runs() -> list:
    """A marked between-runs run, an older within-run one, and one with no interval."""
    marked = synthetic_run(MODEL, task="gpqa", energy_source=MEASURED, index=1)
    marked = marked.model_copy(
        update={
            "host_bound": VERDICT,
            "interval": IntervalBasis(kind="between-runs", n=3, fresh="process"),
        }
    )
    older = synthetic_run(MODEL, task="gpqa", energy_source=MEASURED, batch_size=32, index=2)
    request = older.phases[0]
    repeats = RepeatStats.from_values([request.energy_j * f for f in (0.98, 1.0, 1.02)])
    older = older.model_copy(
        update={
            "repeats": 3,
            "phases": (request.model_copy(update={"energy_j_repeats": repeats}),),
        }
    )
    plain = synthetic_run(MODEL, task="gpqa", energy_source=MEASURED, batch_size=16, index=3)
    return [marked, older, plain]


@pytest.fixture(scope="module")
def spread_ctx(tmp_path_factory):
    from mlenergy.leaderboard.context import AppContext

    data_dir = tmp_path_factory.mktemp("spread-store")
    RunStore(data_dir).append(spread_runs())
    return AppContext.load(data_dir, reference=False)


def test_the_records_verdict_marks_the_row_and_says_why(spread_ctx):
    marked, older, plain = spread_runs()
    rows = spread_ctx.frame(None).set_index("run_id")
    assert bool(rows.loc[marked.run_id, "host_bound"])
    assert rows.loc[marked.run_id, "marks"] == "host-bound"
    why = rows.loc[marked.run_id, "marks_why"]
    assert why.startswith("Host-bound, measured: host-bound: the GPUs were near idle for 99%")
    assert "decode 139.9 W" in why and "idle 120 W" in why
    for run in (older, plain):
        assert not rows.loc[run.run_id, "host_bound"] and rows.loc[run.run_id, "marks"] == ""


def test_each_row_says_what_its_interval_comes_from(spread_ctx):
    marked, older, plain = spread_runs()
    rows = spread_ctx.frame(None).set_index("run_id")
    assert rows.loc[marked.run_id, "interval"] == "between-runs, 3 processes"
    assert rows.loc[older.run_id, "interval"] == "within-run, 3 repeats"  # made before the field
    assert rows.loc[plain.run_id, "interval"] == ""


def test_model_detail_shows_the_interval_and_the_mark(spread_ctx):
    from mlenergy.leaderboard import answers

    page = html.unescape(answers.model_detail_html(spread_ctx, MODEL.model_id, None))
    assert "Interval from" in page and "between-runs, 3 processes" in page
    assert ">host-bound</td>" in page and 'title="Host-bound, measured: host-bound' in page
