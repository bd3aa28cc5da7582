"""Run lowtime's Phillips-Dessouky solver on a pipeline DAG and keep every plan it visits.

The solver starts from every instruction at its least-cost (slowest useful) clock and shortens
the iteration by one time unit per step, on rounded times. :func:`solve_frontier` snapshots the
clocks after each step as a compact diff, with the solver's own cost of the plan.

Two frontiers are read from the plans, one per accounting:

* :func:`build_frontier` (``real``) evaluates every plan on the profile's real durations and
  energies (not the rounded times, not the solver's cost model), adds the shortest schedule the
  profile allows, and keeps the plans no other beats on both real time and energy; its first
  point is the shortest iteration the profile allows. Plans of other searches on the same
  profile (a finer search near the shortest time) join the same set.
* :func:`model_frontier` (``perseus``) reports each plan as the solver models it: its rounded
  iteration time and its fitted cost plus blocking power over that time, as the Perseus paper
  published its frontiers.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from lowtime.solver import PhillipsDessouky

from mlenergy.optimize.pipeline_dag import PipelineDag, current_quant_time
from mlenergy.optimize.pipeline_paths import LongestPaths, shortest_schedule

FRONTIER_COLUMNS = ("iteration_time_s", "energy_j")
MODEL_FRONTIER_COLUMNS = ("model_iteration_time_s", "model_energy_j")
"""The frontier CSV's columns with ``perseus`` accounting: the solver's model, not the profile."""
Solver = Literal["lowtime", "fast"]


@dataclass
class PlanTrace:
    """Every plan the solver visited, longest first.

    Attributes:
        pdag: The DAG solved.
        quant_time: Quantised iteration time the solver sees for plan ``i`` (``real``
            accounting rounds up: the plan runs no longer).
        energy_j: Summed instruction energy of plan ``i`` (J).
        busy_s: Summed instruction time of plan ``i`` over all stages (s).
        model_cost: The solver's summed cost-model value of plan ``i`` at its rounded
            durations (J); NaN for the fast solver's steps with ``real`` accounting, which
            never reports it.
        solve_s: Wall time of the solver (s).
        solver: The solver that ran (its counters), for the ``fast`` solver.
    """

    pdag: PipelineDag
    quant_time: list[int] = field(default_factory=list)
    energy_j: list[float] = field(default_factory=list)
    busy_s: list[float] = field(default_factory=list)
    model_cost: list[float] = field(default_factory=list)
    solve_s: float = 0.0
    solver: Any = None
    _first: np.ndarray | None = None
    _diffs: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    _last: np.ndarray | None = None

    def record(self, quant_time: int, knobs: np.ndarray, model_cost: float) -> None:
        """Append one plan (the knob of every op) and the solver's cost of it."""
        table = self.pdag.table
        if self._last is None:
            self._first = knobs.copy()
        else:
            changed = np.nonzero(knobs != self._last)[0]
            self._diffs.append((changed, knobs[changed]))
        self._last = knobs.copy()
        self.quant_time.append(int(quant_time))
        self.energy_j.append(float(table.energy_j[knobs].sum()))
        self.busy_s.append(float(table.time_s[knobs].sum()))
        self.model_cost.append(float(model_cost))

    def knobs(self, index: int) -> np.ndarray:
        """The knob of every op in plan ``index`` (replayed from the diffs)."""
        assert self._first is not None
        knobs = self._first.copy()
        for changed, values in self._diffs[:index]:
            knobs[changed] = values
        return knobs

    def __len__(self) -> int:
        return len(self.quant_time)


def _lowtime_steps(pdag: PipelineDag) -> Iterator[tuple[int, float, np.ndarray]]:
    for result in PhillipsDessouky(pdag.dag).run():
        yield result.quant_time, result.cost, pdag.knobs()


def _fast_steps(solver: Any, pdag: PipelineDag) -> Iterator[tuple[int, float, np.ndarray]]:
    model = pdag.accounting == "perseus"  # the only accounting that reports the model's cost
    for quant_time in solver.steps(sync_ops=False):
        cost = solver.model_cost() if model else float("nan")
        yield quant_time, cost, solver.knobs_of(pdag.ops)


def solve_frontier(pdag: PipelineDag, solver: Solver = "fast") -> PlanTrace:
    """Run Phillips-Dessouky on ``pdag`` and record every plan.

    Args:
        pdag: A freshly built DAG (its ops at their slowest useful options).
        solver: ``lowtime`` (its solver as shipped) or ``fast`` (the same algorithm with
            exact shortcuts, :mod:`mlenergy.optimize.fast_solver`; same answer).

    Returns:
        The plans, from the longest useful iteration time to the shortest.
    """
    from mlenergy.optimize.fast_solver import FastPhillipsDessouky

    trace = PlanTrace(pdag)
    start = time.perf_counter()
    first = pdag.knobs()
    start_cost = sum(op.get_cost() for op in pdag.ops)
    trace.record(current_quant_time(pdag), first, start_cost)
    if solver == "lowtime":
        steps = _lowtime_steps(pdag)
    else:
        trace.solver = FastPhillipsDessouky(pdag.dag)
        steps = _fast_steps(trace.solver, pdag)
    for quant_time, cost, knobs in steps:
        trace.record(quant_time, knobs, cost)
    trace.solve_s = time.perf_counter() - start
    return trace


@dataclass(frozen=True)
class SearchFrontier:
    """The solver's frontier on its grid of whole time units (times rounded up).

    This is what Phillips-Dessouky optimises; it is kept to check the solver against an
    exhaustive search. What a user reads is :class:`Frontier` (real times).

    Attributes:
        quant_time: Grid of iteration times (time units), ascending.
        iteration_time_s: The same grid in seconds.
        energy_j: Least iteration energy finishing by that time, blocking counted to it (J).
        plan_index: The plan of :class:`PlanTrace` achieving it.
    """

    quant_time: np.ndarray
    iteration_time_s: np.ndarray
    energy_j: np.ndarray
    plan_index: np.ndarray


def search_frontier(trace: PlanTrace) -> SearchFrontier:
    """The solver's frontier in whole time units (rounded-up times), shortest to longest."""
    pdag = trace.pdag
    q = np.asarray(trace.quant_time)
    cost = np.asarray(trace.energy_j) - pdag.p_blocking_w * np.asarray(trace.busy_s)
    grid = np.arange(int(q.min()), int(q.max()) + 1)
    order = np.argsort(q, kind="stable")
    best = np.empty(len(grid), dtype=np.int64)
    pos, current = 0, -1
    for i, t in enumerate(grid):
        while pos < len(order) and q[order[pos]] <= t:
            j = order[pos]
            if current < 0 or cost[j] < cost[current]:
                current = int(j)
            pos += 1
        best[i] = current
    seconds = grid * pdag.time_unit_s
    energy = cost[best] + pdag.p_blocking_w * pdag.num_stages * seconds
    return SearchFrontier(grid, seconds, energy, best)


@dataclass(frozen=True)
class Frontier:
    """The iteration time-energy frontier on the profile's real durations and energies.

    Every plan the solver visited, the schedule with every instruction at its highest clock
    and the shortest schedule the profile allows (every instruction on the critical path at
    its fastest option, the others slowed within their slack) are evaluated with the profile's
    real times; the frontier keeps those no other plan beats on both time and energy.

    Attributes:
        iteration_time_s: Real iteration time of each frontier plan (s), ascending; the first is
            the shortest the profile allows.
        energy_j: Its energy over its own iteration time, blocking included (J).
        knobs: The knob of every op of each frontier plan.
    """

    iteration_time_s: np.ndarray
    energy_j: np.ndarray
    knobs: list[np.ndarray]

    def best_within(self, iteration_time_s: float) -> int:
        """Index of the least-energy plan finishing by ``iteration_time_s`` (the last that fits).

        Raises:
            ValueError: No plan finishes by then.
        """
        fits = np.nonzero(self.iteration_time_s <= iteration_time_s * (1 + 1e-12))[0]
        if not len(fits):
            raise ValueError(f"no plan finishes by {iteration_time_s} s")
        return int(fits[-1])


def _pareto_indices(times: np.ndarray, cost: np.ndarray) -> list[int]:
    """Indices of the points no other beats on both time and cost, by ascending time."""
    keep: list[int] = []
    for i in np.lexsort((cost, times)):  # by time, ties by cost
        if not keep or cost[i] < cost[keep[-1]] - 1e-9 * abs(cost[keep[-1]]):
            keep.append(int(i))
    return keep


def _plans(traces: tuple[PlanTrace, ...], extra: list[np.ndarray]) -> Iterator[np.ndarray]:
    for trace in traces:
        yield from _replay(trace)
    yield from extra


def build_frontier(trace: PlanTrace, *more: PlanTrace, chunk: int = 256) -> Frontier:
    """Evaluate every plan on the profile's real times; keep the time-energy frontier.

    Args:
        trace: The solver's plans.
        more: Plans of other searches on DAGs built from the same profile and pipeline (the
            same ops and option table), evaluated with the same real times.
        chunk: Plans evaluated per vectorised batch.
    """
    pdag = trace.pdag
    traces = (trace, *more)
    for other in more:
        if not np.array_equal(other.pdag.table.time_s, pdag.table.time_s):
            raise ValueError("traces of different profiles cannot share a frontier")
    paths = LongestPaths(pdag)
    extra = [shortest_schedule(pdag), pdag.max_clock_knobs]
    times: list[np.ndarray] = []
    batch: list[np.ndarray] = []
    for knobs in _plans(traces, extra):
        batch.append(knobs)
        if len(batch) == chunk:
            times.append(paths.makespans_s(np.stack(batch)))
            batch = []
    if batch:
        times.append(paths.makespans_s(np.stack(batch)))
    real = np.concatenate(times)
    p = pdag.p_blocking_w
    cost = np.concatenate(
        [np.asarray(t.energy_j) - p * np.asarray(t.busy_s) for t in traces]
        + [[float(pdag.op_costs(k).sum()) for k in extra]]
    )
    keep = _pareto_indices(real, cost)
    wanted = set(keep)
    knobs_of = {i: k for i, k in enumerate(_plans(traces, extra)) if i in wanted}
    t = real[keep]
    energy = cost[keep] + p * pdag.num_stages * t
    return Frontier(t, energy, [knobs_of[i] for i in keep])


def model_frontier(trace: PlanTrace) -> Frontier:
    """Every plan as the solver models it (the ``perseus`` accounting).

    A plan at rounded iteration time ``q`` is reported at ``q * time_unit_s`` with its summed
    fitted cost plus the blocking power of every stage over that time; plans another beats on
    both are left out. These are the solver's figures, not the profile's: see
    :mod:`mlenergy.optimize.pipeline_perseus`.
    """
    pdag = trace.pdag
    q = np.asarray(trace.quant_time)
    cost = np.asarray(trace.model_cost)
    seconds = q * pdag.time_unit_s
    keep = _pareto_indices(seconds, cost)
    wanted = set(keep)
    knobs_of = {i: k for i, k in enumerate(_replay(trace)) if i in wanted}
    t = seconds[keep]
    energy = cost[keep] + pdag.p_blocking_w * pdag.num_stages * t
    return Frontier(t, energy, [knobs_of[i] for i in keep])


def _replay(trace: PlanTrace) -> Iterator[np.ndarray]:
    """The knobs of every plan of ``trace`` in order (one pass over the diffs)."""
    yield from replay_from(trace, 0)


def replay_from(trace: PlanTrace, first: int) -> Iterator[np.ndarray]:
    """The knobs of the plans ``first, first + 1, ...`` of ``trace`` in order."""
    if trace._first is None:
        return
    knobs = trace._first.copy()
    if first == 0:
        yield knobs.copy()
    for i, (changed, values) in enumerate(trace._diffs, start=1):
        knobs[changed] = values
        if i >= first:
            yield knobs.copy()


def write_frontier_csv(frontier: Frontier, path: str | Path, model: bool = False) -> Path:
    """Write the frontier CSV ``iteration_time_s,energy_j`` (temp file, then rename).

    Args:
        frontier: The frontier.
        path: The CSV to write.
        model: The figures are the Perseus solver's model (``perseus`` accounting): the columns
            are then ``model_iteration_time_s,model_energy_j``.
    """
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(MODEL_FRONTIER_COLUMNS if model else FRONTIER_COLUMNS)
        for t, e in zip(frontier.iteration_time_s, frontier.energy_j, strict=True):
            writer.writerow([f"{t:.6f}", f"{e:.6f}"])
    tmp.replace(p)
    return p
