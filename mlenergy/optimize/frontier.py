"""Run lowtime's Phillips-Dessouky solver on a pipeline DAG and keep every plan it visits.

The solver starts from every instruction at its least-cost (slowest useful) clock and shortens
the iteration by one time unit per step. :func:`solve_frontier` snapshots the clocks after each
step as a compact diff, re-evaluates each plan's energy from the profile (not from the solver's
cost model) and builds the iteration time-energy frontier from the shortest iteration time to
the longest useful one.
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

from mlenergy.optimize.pipeline_dag import PipelineDag

FRONTIER_COLUMNS = ("iteration_time_s", "energy_j")
Solver = Literal["lowtime", "fast"]


@dataclass
class PlanTrace:
    """Every plan the solver visited, longest first.

    Attributes:
        pdag: The DAG solved.
        quant_time: Quantised iteration time the solver guarantees for plan ``i``.
        energy_j: Summed instruction energy of plan ``i`` (J).
        busy_s: Summed instruction time of plan ``i`` over all stages (s).
        solve_s: Wall time of the solver (s).
        solver: The solver that ran (its counters), for the ``fast`` solver.
    """

    pdag: PipelineDag
    quant_time: list[int] = field(default_factory=list)
    energy_j: list[float] = field(default_factory=list)
    busy_s: list[float] = field(default_factory=list)
    solve_s: float = 0.0
    solver: Any = None
    _first: np.ndarray | None = None
    _diffs: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    _last: np.ndarray | None = None

    def record(self, quant_time: int, knobs: np.ndarray) -> None:
        """Append one plan (the knob of every op)."""
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

    def knobs(self, index: int) -> np.ndarray:
        """The knob of every op in plan ``index`` (replayed from the diffs)."""
        assert self._first is not None
        knobs = self._first.copy()
        for changed, values in self._diffs[:index]:
            knobs[changed] = values
        return knobs

    def __len__(self) -> int:
        return len(self.quant_time)


def _lowtime_steps(pdag: PipelineDag) -> Iterator[int]:
    for result in PhillipsDessouky(pdag.dag).run():
        yield result.quant_time


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
    from mlenergy.optimize.pipeline_dag import makespan_s

    trace = PlanTrace(pdag)
    start = time.perf_counter()
    first = pdag.knobs()
    trace.record(round(makespan_s(pdag, first, quantised=True)), first)
    if solver == "lowtime":
        steps = _lowtime_steps(pdag)
    else:
        trace.solver = FastPhillipsDessouky(pdag.dag)
        steps = trace.solver.steps()
    for quant_time in steps:
        trace.record(quant_time, pdag.knobs())
    trace.solve_s = time.perf_counter() - start
    return trace


@dataclass(frozen=True)
class Frontier:
    """The iteration time-energy frontier on a grid of whole time units.

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


def plan_energy_j(trace: PlanTrace, index: int, iteration_time_s: float) -> float:
    """Energy of plan ``index`` run as an iteration of ``iteration_time_s`` (J)."""
    pdag = trace.pdag
    idle = pdag.num_stages * iteration_time_s - trace.busy_s[index]
    return trace.energy_j[index] + pdag.p_blocking_w * idle


def best_plan_by(trace: PlanTrace, iteration_time_s: float) -> int | None:
    """Index of the least-energy plan guaranteed to finish by ``iteration_time_s``, if any."""
    unit = trace.pdag.time_unit_s
    limit = int(np.floor(round(iteration_time_s / unit, 9)))
    q = np.asarray(trace.quant_time)
    ok = np.nonzero(q <= limit)[0]
    if not len(ok):
        return None
    cost = np.asarray(trace.energy_j)[ok] - trace.pdag.p_blocking_w * np.asarray(trace.busy_s)[ok]
    return int(ok[int(np.argmin(cost))])


def build_frontier(trace: PlanTrace) -> Frontier:
    """The frontier from the shortest iteration time to the longest useful one."""
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
    return Frontier(grid, seconds, energy, best)


def write_frontier_csv(frontier: Frontier, path: str | Path) -> Path:
    """Write the frontier CSV ``iteration_time_s,energy_j`` (temp file, then rename)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(FRONTIER_COLUMNS)
        for t, e in zip(frontier.iteration_time_s, frontier.energy_j, strict=True):
            writer.writerow([f"{t:.6f}", f"{e:.6f}"])
    tmp.replace(p)
    return p
