"""Fresh runs of one point combined: the interval comes from the spread between the runs."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from mlenergy.errors import UserError
from mlenergy.measure.window_result import WindowResult
from mlenergy.records import (
    Hardware,
    IdleBaseline,
    MeasuredScope,
    Phase,
    PhaseResult,
    RunRecord,
    Software,
    Workload,
    interval_basis,
)
from mlenergy.testing.synthetic import synthetic_model
from mlenergy.workloads.phases import RepeatWindows, summarise_phases
from mlenergy.workloads.run_spread import combine_serving, combine_static, mark_one_run

MODEL = synthetic_model("org/tiny-1b", 1.1, False)
GPU = "emulated:zeus-gpu"


def _window(name: str, energy: float, seconds: float = 1.0) -> WindowResult:
    return WindowResult(name, seconds, energy, {"gpu:0": energy}, GPU)


def static_run(request_j: list[float], idle_w: float = 100.0, seconds: float = 1.0) -> RunRecord:
    """One run's record of batch 2, 4+3 tokens: repeats whose prefill and decode share energy."""
    repeats = [
        RepeatWindows(_window("p", e / 4, seconds), _window("d", 3 * e / 4, seconds), [0.1])
        for e in request_j
    ]
    record = RunRecord(
        model=MODEL,
        workload=Workload(kind="inference", batch_size=2, input_tokens=4, output_tokens=3,
                          num_requests=2, method="static-batch"),
        hardware=Hardware(accelerator_model="Emulated GPU", accelerator_count=1,
                          accelerator_tdp_w=700.0),
        software=Software(python="3.12", mlenergy="0"),
        energy_source=GPU,
        scope=MeasuredScope(gpu_indices=(0,)),
        repeats=len(request_j),
        phases=summarise_phases(repeats, 2, 4, 3),
        idle=IdleBaseline(avg_power_w=idle_w, duration_s=1.0, energy_source=GPU),
    )  # fmt: skip
    return mark_one_run(record)


def test_one_run_carries_its_within_run_interval():
    run = static_run([10.0, 10.5, 9.5])
    assert run.interval.kind == "within-run" and run.interval.n == 3
    assert interval_basis(run).label() == "within-run, 3 repeats"
    assert mark_one_run(static_run([10.0])).interval is None  # one repeat: no interval


def test_records_made_before_the_field_read_as_within_run():
    old = static_run([10.0, 10.5, 9.5]).model_copy(update={"interval": None})
    assert interval_basis(old).label() == "within-run, 3 repeats"


def test_static_runs_combine_into_the_mean_run_with_the_spread_between_them():
    runs = [static_run([e, e * 1.01, e * 0.99]) for e in (10.0, 12.0, 14.0)]
    combined = combine_static(runs)
    means = [r.phase("request").energy_j for r in runs]
    request = combined.phase("request")
    assert request.energy_j == pytest.approx(sum(means) / 3)
    assert request.energy_per_token_j == pytest.approx(sum(means) / 3 / 6)  # 2 x 3 tokens
    half = stats.t.ppf(0.975, 2) * stats.tstd(means) / math.sqrt(3) / 6
    ci = request.energy_per_token_j_ci95
    assert ci.low == pytest.approx(request.energy_per_token_j - half)
    assert ci.high == pytest.approx(request.energy_per_token_j + half)
    # the within-run intervals were each about +-1%: the runs' spread is far wider
    one = runs[0].phase("request").energy_per_token_j_ci95
    assert (ci.high - ci.low) > 5 * (one.high - one.low)
    assert request.wide_interval is True
    basis = combined.interval
    assert (basis.kind, basis.n, basis.fresh, basis.repeats_per_run) == (
        "between-runs",
        3,
        "process",
        3,
    )
    assert basis.run_energy_per_token_j == pytest.approx([m / 6 for m in means])
    assert basis.label() == "between-runs, 3 processes"
    assert combined.repeats == 9 and combined.run_id not in {r.run_id for r in runs}
    assert [p.phase for p in combined.phases] == [Phase.PREFILL, Phase.DECODE, Phase.REQUEST]
    assert RunRecord.model_validate_json(combined.model_dump_json()) == combined


def test_the_combined_record_is_judged_host_bound_again():
    # 1 s windows of 2.5-10.5 J: 2.5-10.5 W against a 12 W idle, near idle
    busy = combine_static([static_run([e] * 2, idle_w=12.0) for e in (10.0, 12.0)])
    assert busy.host_bound is not None and busy.host_bound.marked
    assert busy.idle.avg_power_w == pytest.approx(12.0)
    loud = combine_static([static_run([e] * 2, idle_w=1.0, seconds=0.01) for e in (10.0, 12.0)])
    assert loud.host_bound is not None and not loud.host_bound.marked


def test_a_point_that_failed_in_any_run_is_stored_failed():
    ok = static_run([10.0, 10.0])
    failed = ok.model_copy(
        update={"status": "failed", "error": "out of memory at batch size 2", "phases": ()}
    )
    combined = combine_static([ok, failed, ok])
    assert combined.status == "failed"
    assert combined.error.startswith("failed in 1 of 3 fresh runs (process): out of memory")


def test_runs_of_different_points_are_refused():
    other = static_run([10.0, 10.0])
    other = other.model_copy(
        update={"workload": other.workload.model_copy(update={"batch_size": 4})}
    )
    with pytest.raises(UserError, match="not the same point"):
        combine_static([static_run([10.0, 10.0]), other])


def serving_run(energy_j: float, tokens: int, idle_w: float = 100.0) -> RunRecord:
    request = PhaseResult.from_totals(Phase.REQUEST, 10.0, energy_j, tokens)
    return RunRecord(
        model=MODEL,
        workload=Workload(kind="inference", batch_size=8, input_tokens=4, output_tokens=16,
                          num_requests=64, method="serving-steady-state"),
        hardware=Hardware(accelerator_model="Emulated GPU", accelerator_count=1,
                          accelerator_tdp_w=700.0),
        software=Software(python="3.12", mlenergy="0"),
        energy_source=GPU,
        scope=MeasuredScope(gpu_indices=(0,)),
        phases=(request,),
        idle=IdleBaseline(avg_power_w=idle_w, duration_s=1.0, energy_source=GPU),
    )  # fmt: skip


def test_serving_keeps_the_run_nearest_the_mean_whole():
    runs = [serving_run(3000.0, 1000), serving_run(3300.0, 1000), serving_run(4400.0, 1100)]
    epts = [3.0, 3.3, 4.0]
    combined = combine_serving(runs, "launch")
    assert combined.run_id == runs[1].run_id  # 3.3 is nearest the mean 3.433
    request = combined.phase("request")
    assert request.energy_j == 3300.0 and request.tokens == 1000  # the kept window, untouched
    half = stats.t.ppf(0.975, 2) * stats.tstd(epts) / math.sqrt(3)
    assert request.energy_per_token_j_ci95.low == pytest.approx(sum(epts) / 3 - half)
    assert request.energy_per_token_j_ci95.high == pytest.approx(sum(epts) / 3 + half)
    basis = combined.interval
    assert basis.kept_run == 2 and basis.run_energy_per_token_j == pytest.approx(epts)
    assert basis.label() == "between-runs, 3 launches"
    assert combined.host_bound is not None and not combined.host_bound.marked  # 330 W vs 100 W


def test_serving_attach_runs_say_so():
    combined = combine_serving([serving_run(3000.0, 1000), serving_run(3100.0, 1000)], "attach")
    assert combined.interval.label() == "between-runs, 2 attaches"


def test_a_between_runs_interval_names_its_runs():
    from mlenergy.records import IntervalBasis

    with pytest.raises(ValueError, match="fresh"):
        IntervalBasis(kind="between-runs", n=3)
    with pytest.raises(ValueError, match="one value per run"):
        IntervalBasis(kind="between-runs", n=3, fresh="process", run_energy_per_token_j=(1.0,))
    with pytest.raises(ValueError, match="no fresh runs"):
        IntervalBasis(kind="within-run", n=3, fresh="process")
