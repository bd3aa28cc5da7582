"""Notebook plots and record tables say what their intervals come from, and mark host-bound runs."""

from __future__ import annotations

import matplotlib
import pytest

from mlenergy.notebook import plot
from mlenergy.records import (
    Hardware,
    HostBound,
    Interval,
    IntervalBasis,
    Phase,
    PhaseResult,
    RunRecord,
    Software,
    Workload,
)
from mlenergy.testing.synthetic import synthetic_model

matplotlib.use("Agg")

BETWEEN = IntervalBasis(kind="between-runs", n=3, fresh="process", repeats_per_run=3)


def _record(model: str, batch: int, interval: IntervalBasis | None, marked: bool = False):
    phase = PhaseResult.from_totals(
        Phase.REQUEST, 1.0, 3.0 * batch, 16 * batch,
        energy_per_token_j_ci95=Interval(low=0.17, high=0.21), wide_interval=False,
    )  # fmt: skip
    verdict = HostBound(
        marked=True, near_idle_share=1.0, window_power_w={"request": 3.0}, idle_power_w=3.0,
        rule="r", time_share_threshold=0.5,
    ) if marked else None  # fmt: skip
    return RunRecord(
        model=synthetic_model(model, 1.0, False),
        workload=Workload(kind="inference", batch_size=batch, input_tokens=4, output_tokens=16,
                          num_requests=batch),
        hardware=Hardware(cpu_model="cpu"),
        software=Software(python="3", mlenergy="t"),
        energy_source="emulated:zeus-gpu",
        repeats=9 if interval is not None and interval.kind == "between-runs" else 3,
        phases=(phase,),
        interval=interval,
        host_bound=verdict,
    )  # fmt: skip


def test_one_basis_for_every_model_is_in_the_title():
    fig = plot([_record("org/a", 1, BETWEEN), _record("org/a", 2, BETWEEN)])
    assert "bars: 95% interval, between-runs, 3 processes" in fig.axes[0].get_title()


def test_mixed_bases_are_named_per_model():
    within = IntervalBasis(kind="within-run", n=3)
    fig = plot([_record("org/a", 1, BETWEEN), _record("org/b", 1, within)])
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["org/a (between-runs, 3 processes)", "org/b (within-run, 3 repeats)"]
    assert "between-runs" not in ax.get_title()


def test_a_host_bound_run_is_labelled_on_the_plot():
    fig = plot([_record("org/a", 1, BETWEEN, marked=True), _record("org/a", 2, BETWEEN)])
    assert [t.get_text() for t in fig.axes[0].texts] == ["host-bound"]


@pytest.mark.parametrize(
    ("record", "says"),
    [
        (
            _record("org/a", 1, BETWEEN, marked=True),
            "95% intervals between-runs, 3 processes; host-bound",
        ),
        (_record("org/a", 1, None), "status ok; 95% intervals within-run, 3 repeats</caption>"),
    ],
)
def test_the_record_table_caption_says_it(record, says):
    assert says in record._repr_html_()
