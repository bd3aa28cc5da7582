"""Records of fresh runs of the same point combined into one whose interval is their spread.

``mlenergy bench --processes N`` measures every model's sweep in ``N`` fresh processes and
serving ``--runs N`` every level against ``N`` fresh launches (or attaches); each run yields
its own record of a point. This module turns the ``N`` records of one point into the one that
is stored, its 95% interval from the spread between the runs
(:class:`~mlenergy.records.IntervalBasis`, ``between-runs``):

* **Static batches** (:func:`combine_static`): every run processed the same tokens, so each
  phase is the mean run: durations and energies are the means of the runs' figures (each run's
  figure is already the mean of its repeats), the interval is the Student-t interval over the
  ``N`` run values, latencies are the means of the runs' figures, and ``repeats`` counts every
  measured repeat of every run. Power timelines belong to their process and are not kept.
* **Serving** (:func:`combine_serving`): a steady-state window cannot be averaged with another
  one (its tokens, latencies and per-request energies belong to it, and the serving identities
  tie them together), so the record keeps one run whole: the run whose energy per token is
  nearest the runs' mean. Its request phase carries the Student-t interval of the mean over
  the ``N`` runs' energies per token, and ``interval.run_energy_per_token_j`` lists them all.

A point that failed in any run is stored as failed, naming how many runs failed. The host-bound
rule (:mod:`mlenergy.measure.host_bound`) judges the combined record again.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import fmean
from typing import Any

from mlenergy.errors import UserError
from mlenergy.measure.host_bound import with_host_bound
from mlenergy.measure.repeats import is_wide
from mlenergy.records import (
    IdleBaseline,
    Interval,
    IntervalBasis,
    Phase,
    PhaseResult,
    RepeatStats,
    RunRecord,
    new_run_id,
    utc_now,
)
from mlenergy.records.interval import FreshRun
from mlenergy.records.run import within_run_basis
from mlenergy.workloads.phases import phase_result


def _check_same_point(runs: Sequence[RunRecord]) -> None:
    if not runs:
        raise UserError("no runs to combine", "Measure at least one run")
    first = runs[0]
    for r in runs[1:]:
        same = (
            r.model.config_fingerprint == first.model.config_fingerprint
            and r.workload.batch_size == first.workload.batch_size
            and r.energy_source == first.energy_source
            and r.hardware.accelerator_model == first.hardware.accelerator_model
            and r.hardware.accelerator_count == first.hardware.accelerator_count
        )
        if not same:
            raise UserError(
                f"run {r.run_id} is not the same point as run {first.run_id} (model, batch, "
                "energy source or GPUs differ)",
                "Combine only fresh runs of one point",
            )


def _failed(runs: Sequence[RunRecord], fresh: FreshRun) -> RunRecord | None:
    failed = [r for r in runs if r.status != "ok"]
    if not failed:
        return None
    first = failed[0]
    error = f"failed in {len(failed)} of {len(runs)} fresh runs ({fresh}): {first.error}"
    return first.model_copy(update={"run_id": new_run_id(), "error": error[:1000]})


def _request_ept(run: RunRecord) -> float | None:
    phase = run.phase(Phase.REQUEST)
    return phase.energy_per_token_j if phase is not None else None


def _mean_or_none(values: list[float | None]) -> float | None:
    if not values or any(v is None for v in values):
        return None
    return fmean(v for v in values if v is not None)


def _combined_phase(name: Phase, phases: list[PhaseResult]) -> PhaseResult:
    """The mean run's phase, its interval from the runs' spread."""
    latency: dict[str, Any] = {
        key: _mean_or_none([getattr(p, key) for p in phases])
        for key in ("ttft_s", "itl_p50_s", "itl_p90_s", "itl_p99_s")
    }
    passes = [p.passes_per_window for p in phases if p.passes_per_window is not None]
    if passes:
        latency["passes_per_window"] = max(passes)
    host = [p.host_energy_j for p in phases]
    if all(v is not None for v in host):
        devices = [p.host_energy_by_device_j for p in phases]
        keys = set().union(*devices)
        latency["host_energy_j"] = _mean_or_none(list(host))
        latency["host_energy_by_device_j"] = {
            k: fmean(d.get(k, 0.0) for d in devices) for k in keys
        }
    return phase_result(
        name,
        [p.duration_s for p in phases],
        [p.energy_j for p in phases],
        phases[0].tokens,
        [p.energy_by_device_j for p in phases],
        **latency,
    )


def _idle(runs: Sequence[RunRecord]) -> IdleBaseline | None:
    idles = [r.idle for r in runs if r.idle is not None]
    if not idles or len(idles) < len(runs):
        return None
    return IdleBaseline(
        avg_power_w=_mean_or_none([i.avg_power_w for i in idles]),
        duration_s=fmean(i.duration_s for i in idles),
        energy_source=idles[0].energy_source,
    )


def _utilisation(runs: Sequence[RunRecord]) -> tuple[float, ...] | None:
    shares = [r.expert_utilisation for r in runs]
    if any(s is None for s in shares) or len({len(s) for s in shares if s is not None}) != 1:
        return None
    return tuple(fmean(col) for col in zip(*[s for s in shares if s is not None], strict=True))


def mark_one_run(run: RunRecord) -> RunRecord:
    """A record measured in one run, with its interval basis and host-bound verdict.

    Its intervals, when it has any, come from the repeats of that run (``within-run``).
    """
    basis = within_run_basis(run)
    if basis != run.interval:
        run = run.model_copy(update={"interval": basis})
    return with_host_bound(run)


def combine_static(runs: Sequence[RunRecord], fresh: FreshRun = "process") -> RunRecord:
    """One record of a static-batch point from its fresh runs (see the module's rules).

    Args:
        runs: The point's record from each run, in the order run.
        fresh: What each run started anew (``process`` for ``bench --processes``).

    Returns:
        The combined record (a new run id), ``interval`` between-runs, judged host-bound or
        not; a failed record when the point failed in any run.

    Raises:
        UserError: The records are not of one point.
    """
    _check_same_point(runs)
    failed = _failed(runs, fresh)
    if failed is not None:
        return failed
    first = runs[0]
    names = [p.phase for p in first.phases]
    for r in runs[1:]:
        if [p.phase for p in r.phases] != names:
            raise UserError(f"run {r.run_id} measured other phases", "Combine one point's runs")
    # Every run measured the same phases (checked above).
    phases = tuple(
        _combined_phase(n, [p for r in runs if (p := r.phase(n)) is not None]) for n in names
    )
    epts = [_request_ept(r) for r in runs]
    interval = IntervalBasis(
        kind="between-runs",
        n=len(runs),
        fresh=fresh,
        repeats_per_run=first.repeats,
        run_energy_per_token_j=tuple(e for e in epts if e is not None)
        if all(e is not None for e in epts)
        else (),
    )
    record = RunRecord(
        run_id=new_run_id(),
        created_at=utc_now(),
        started_at=min((r.started_at for r in runs if r.started_at), default=None),
        ended_at=max((r.ended_at for r in runs if r.ended_at), default=None),
        model=first.model,
        workload=first.workload,
        hardware=first.hardware,
        software=first.software,
        energy_source=first.energy_source,
        scope=first.scope,
        repeats=sum(r.repeats for r in runs),
        warmup_runs=first.warmup_runs,
        phases=phases,
        idle=_idle(runs),
        expert_utilisation=_utilisation(runs),
        tags={**first.tags, "repeat_order": f"fresh-{fresh}-runs"},
        interval=interval,
    )
    return with_host_bound(record)


def combine_serving(runs: Sequence[RunRecord], fresh: FreshRun) -> RunRecord:
    """One record of a serving level from its fresh runs: the run nearest the mean, kept whole.

    Args:
        runs: The level's record from each run, in the order run.
        fresh: ``launch`` (a server launched per run) or ``attach`` (the running server).

    Returns:
        The kept run's record with the between-runs interval on its request phase, or a
        failed record when the level failed in any run. Without an energy figure in every run
        (no counter and no model), the first run is returned with no interval.

    Raises:
        UserError: The records are not of one level.
    """
    _check_same_point(runs)
    failed = _failed(runs, fresh)
    if failed is not None:
        return failed
    epts = [_request_ept(r) for r in runs]
    if any(e is None for e in epts):
        return runs[0]
    values = [float(e) for e in epts if e is not None]
    mean = fmean(values)
    kept = min(range(len(runs)), key=lambda i: abs(values[i] - mean))
    stats = RepeatStats.from_values(values, nonnegative=True)
    ci = stats.ci95
    phases = tuple(
        p.model_copy(
            update={
                "energy_per_token_j_ci95": Interval(low=ci.low, high=ci.high) if ci else None,
                "wide_interval": is_wide(stats),
            }
        )
        if p.phase == Phase.REQUEST
        else p
        for p in runs[kept].phases
    )
    interval = IntervalBasis(
        kind="between-runs",
        n=len(runs),
        fresh=fresh,
        run_energy_per_token_j=tuple(values),
        kept_run=kept + 1,
    )
    data = runs[kept].model_dump()
    data.update(phases=[p.model_dump() for p in phases], interval=interval.model_dump())
    return with_host_bound(RunRecord.model_validate(data))
