"""Identities a serving record (``workload.method == "serving-steady-state"``) must meet.

A serving record's ``request`` phase is the steady-state window; its figures are tied together
and to :class:`~mlenergy.records.ServingStats`:

* energy per output token x window tokens = window energy (within :data:`IDENTITY_REL_TOL`);
* output throughput x window duration = window tokens (same tolerance);
* the window's tokens are those of ``serving.window_output_tokens``, its duration that of
  ``serving.window_end_s - serving.window_start_s`` (the Zeus window, within 5 ms or 1 %);
* achieved concurrency <= the level (``workload.batch_size``); the batch
  ``workload.avg_batch_size`` is the server's mean running requests (``serving.engine_metrics``)
  when ``serving.batch_source`` is ``server``, else the achieved concurrency;
* the window spans at least ten update periods of the energy counter (``scope.counter_period_s``;
  ``serving.window_counter_periods`` agrees): a shorter window's energy does not resolve;
* per-request energies come with the split's power samples over the window
  (``serving.split_window_energy_j``), within 2% of the window's counter energy;
* the requests' energies add up to ``serving.split_energy_j``, and the whole run's energy is
  at least the window's;
* the requests' energies (and ``split_energy_j``) add up to at most the whole run's energy
  ``serving.run_energy_j``: no request used energy the run did not (check
  ``request-energies-fit``).

Records without serving stats (the reference rows, static batches) are not checked here.
"""

from __future__ import annotations

import math

from mlenergy.records import RunRecord, ServingStats
from mlenergy.records.serving import MIN_COUNTER_PERIODS as MIN_PERIODS
from mlenergy.records.serving import SPLIT_WINDOW_AGREEMENT as SPLIT_AGREEMENT
from mlenergy.store.checks import tag

IDENTITY_REL_TOL = 0.005
"""Relative tolerance of the identities (figures are stored as floats, rounded by submitters)."""

_WINDOW_ABS_TOL_S = 0.005


def _close(a: float, b: float, rel: float = IDENTITY_REL_TOL, abs_tol: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_tol)


def serving_problems(run: RunRecord, where: str) -> list[str]:
    """The identities ``run`` breaks, one line each naming the field; ``[]`` when none."""
    if run.workload.method != "serving-steady-state" or run.status != "ok":
        return []
    s = run.serving
    if s is None:
        return []  # reference rows and imports carry no serving stats
    problems: list[str] = []
    phase = run.phase("request")
    if phase is None:
        return [f"{where}.phases: a serving record needs the request phase (the steady state)"]
    ept, energy = phase.energy_per_token_j, phase.energy_j
    if ept is not None and energy is not None and not _close(ept * phase.tokens, energy):
        problems.append(
            f"{where}.phases[request].energy_per_token_j: x {phase.tokens} tokens = "
            f"{ept * phase.tokens:.6g} J, not the window's {energy:.6g} J"
        )
    tput = phase.throughput_tokens_per_s
    if tput is not None and not _close(tput * phase.duration_s, phase.tokens):
        problems.append(
            f"{where}.phases[request].throughput_tokens_per_s: x {phase.duration_s:.6g} s "
            f"= {tput * phase.duration_s:.6g} tokens, not the "
            f"window's {phase.tokens}"
        )
    if s.window_output_tokens != phase.tokens:
        problems.append(
            f"{where}.serving.window_output_tokens: {s.window_output_tokens}, but the request "
            f"phase counts {phase.tokens}"
        )
    span = s.window_end_s - s.window_start_s
    if not math.isclose(span, phase.duration_s, rel_tol=0.01, abs_tol=_WINDOW_ABS_TOL_S):
        problems.append(
            f"{where}.serving.window_end_s: the window spans {span:.6g} s, the request phase "
            f"{phase.duration_s:.6g} s"
        )
    if s.achieved_concurrency > run.workload.batch_size * (1 + IDENTITY_REL_TOL):
        problems.append(
            f"{where}.serving.achieved_concurrency: {s.achieved_concurrency:.4g} exceeds the "
            f"level {run.workload.batch_size}"
        )
    problems += _batch_problems(run, where)
    problems += _window_problems(run, where)
    if s.split_energy_j is not None and s.request_energies_j:
        total = sum(s.request_energies_j)
        if not _close(total, s.split_energy_j):
            problems.append(
                f"{where}.serving.request_energies_j: add up to {total:.6g} J, not "
                f"split_energy_j {s.split_energy_j:.6g} J"
            )
    problems.extend(_request_energy_problems(s, where))
    run_j = s.run_energy_j
    if run_j is not None and energy is not None and run_j < energy * (1 - IDENTITY_REL_TOL):
        problems.append(
            f"{where}.serving.run_energy_j: {s.run_energy_j:.6g} J is less than the "
            f"steady-state window's {phase.energy_j:.6g} J inside it"
        )
    return problems


def _request_energy_problems(s: ServingStats, where: str) -> list[str]:
    """The requests' energies fit in the whole run's energy (check ``request-energies-fit``)."""
    if not s.request_energies_j and s.split_energy_j is None:
        return []
    run_j = s.run_energy_j
    if run_j is None:
        return [
            tag(
                "request-energies-fit",
                f"{where}.serving.run_energy_j: missing, so the per-request energies cannot be "
                "checked against the run's energy (give the whole run's energy)",
            )
        ]
    problems = []
    limit = run_j * (1 + IDENTITY_REL_TOL) + 1e-9
    total = math.fsum(s.request_energies_j)
    if total > limit:
        problems.append(
            tag(
                "request-energies-fit",
                f"{where}.serving.request_energies_j: {len(s.request_energies_j)} request(s) add "
                f"up to {total:.6g} J, more than the whole run's {run_j:.6g} J",
            )
        )
    if s.split_energy_j is not None and s.split_energy_j > limit:
        problems.append(
            tag(
                "request-energies-fit",
                f"{where}.serving.split_energy_j: {s.split_energy_j:.6g} J is more than the "
                f"whole run's {run_j:.6g} J",
            )
        )
    return problems


def _batch_problems(run: RunRecord, where: str) -> list[str]:
    s = run.serving
    assert s is not None
    avg = run.workload.avg_batch_size
    if avg is None:
        return []
    running = s.engine_metrics.running_mean if s.engine_metrics is not None else None
    if s.batch_source == "server":
        if running is None:
            return [f"{where}.serving.batch_source: server, but no engine_metrics.running_mean"]
        expected, name = running, "serving.engine_metrics.running_mean"
    else:
        expected, name = s.achieved_concurrency, "serving.achieved_concurrency"
    if _close(avg, expected):
        return []
    return [f"{where}.workload.avg_batch_size: {avg:.4g}, but {name} is {expected:.4g}"]


def _window_problems(run: RunRecord, where: str) -> list[str]:
    s = run.serving
    phase = run.phase("request")
    assert s is not None and phase is not None
    problems: list[str] = []
    period = run.scope.counter_period_s if run.scope is not None else None
    if period:
        periods = phase.duration_s / period
        if periods < MIN_PERIODS * (1 - IDENTITY_REL_TOL):
            problems.append(
                f"{where}.phases[request].duration_s: the steady-state window spans "
                f"{periods:.3g} periods of the energy counter ({period * 1e3:.3g} ms); at least "
                f"{MIN_PERIODS} are needed for its energy to resolve"
            )
        if s.window_counter_periods is not None and not _close(s.window_counter_periods, periods):
            problems.append(
                f"{where}.serving.window_counter_periods: {s.window_counter_periods:.4g}, but "
                f"the window is {periods:.4g} counter periods"
            )
    if s.request_energies_j and phase.energy_j:
        sampled = s.split_window_energy_j
        if sampled is None:
            problems.append(
                f"{where}.serving.split_window_energy_j: per-request energies need the split's "
                "power samples over the window, to hold them to the counter"
            )
        elif abs(sampled / phase.energy_j - 1) > SPLIT_AGREEMENT:
            problems.append(
                f"{where}.serving.split_window_energy_j: {sampled:.6g} J, "
                f"{sampled / phase.energy_j - 1:+.1%} from the window's {phase.energy_j:.6g} J "
                f"(at most {SPLIT_AGREEMENT:.0%}): the per-request energies do not hold"
            )
    return problems
