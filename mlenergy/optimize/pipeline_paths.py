"""Longest paths through a pipeline DAG on the profile's real times (compiled kernels).

Every plan the solver visits is re-timed on the profile's real durations: its iteration time
is the longest path through the 1F1B DAG with each instruction at its clock's real time.
:class:`LongestPaths` does that for many plans at once, gives each instruction's slack, and
:func:`shortest_schedule` builds the shortest schedule the profile allows from them. The
kernels add and compare the same floats in the same order as a plain topological pass.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
from numba import njit

from mlenergy.optimize.pipeline_dag import PipelineDag


@njit(cache=True)
def _finish_times(order, pred_start, preds, durations, finish):
    """Finish time of every op of every plan (rows), in place."""
    for r in range(durations.shape[0]):
        for v in order:
            start = 0.0
            for k in range(pred_start[v], pred_start[v + 1]):
                f = finish[r, preds[k]]
                if f > start:
                    start = f
            finish[r, v] = start + durations[r, v]


@njit(cache=True)
def _slack(order, pred_start, preds, succ_start, succs, durations):
    """(iteration time, total slack of every op) of one plan."""
    n = len(durations)
    finish = np.zeros(n)
    for v in order:
        start = 0.0
        for k in range(pred_start[v], pred_start[v + 1]):
            if finish[preds[k]] > start:
                start = finish[preds[k]]
        finish[v] = start + durations[v]
    span = finish.max()
    latest = np.full(n, span)
    for i in range(len(order) - 1, -1, -1):
        v = order[i]
        if succ_start[v + 1] > succ_start[v]:
            best = np.inf
            for k in range(succ_start[v], succ_start[v + 1]):
                q = succs[k]
                late = latest[q] - durations[q]
                if late < best:
                    best = late
            latest[v] = best
    return span, latest - finish


def _csr(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    start = np.zeros(len(lists) + 1, dtype=np.int64)
    start[1:] = np.cumsum([len(x) for x in lists])
    flat = np.array([v for x in lists for v in x], dtype=np.int64)
    return start, flat


class LongestPaths:
    """Longest paths through a pipeline DAG for many plans at once.

    Args:
        pdag: The pipeline DAG (ops are nodes ``1..n``; the source and sink add nothing).
    """

    def __init__(self, pdag: PipelineDag) -> None:
        n = len(pdag.ops)
        self.pdag = pdag
        dag = pdag.dag
        self.order = np.array(
            [v - 1 for v in nx.topological_sort(dag) if 0 < v <= n], dtype=np.int64
        )
        preds = [[p - 1 for p in dag.predecessors(v + 1) if 0 < p <= n] for v in range(n)]
        succs = [[q - 1 for q in dag.successors(v + 1) if 0 < q <= n] for v in range(n)]
        self.pred_start, self.preds = _csr(preds)
        self.succ_start, self.succs = _csr(succs)

    def makespans_s(self, knobs: np.ndarray) -> np.ndarray:
        """Iteration time of each plan (one row of knobs per plan, s)."""
        return self.longest(self.pdag.table.time_s[knobs])

    def longest(self, durations: np.ndarray) -> np.ndarray:
        """Longest path of each row of op durations (any unit)."""
        durations = np.ascontiguousarray(durations, dtype=np.float64)
        finish = np.zeros_like(durations)
        _finish_times(self.order, self.pred_start, self.preds, durations, finish)
        return finish.max(axis=1)

    def slack_s(self, knobs: np.ndarray) -> tuple[float, np.ndarray]:
        """(iteration time, total slack of every op) of one plan (s)."""
        durations = np.ascontiguousarray(self.pdag.table.time_s[knobs], dtype=np.float64)
        span, slack = _slack(
            self.order, self.pred_start, self.preds, self.succ_start, self.succs, durations
        )
        return float(span), slack


def ops_per_path(pdag: PipelineDag) -> int:
    """The most instructions on one path through the DAG."""
    return round(float(LongestPaths(pdag).longest(np.ones((1, len(pdag.ops))))[0]))


def shortest_schedule(pdag: PipelineDag) -> np.ndarray:
    """The shortest iteration the profile allows, at the least energy this greedy finds.

    Every op starts at its fastest option (the longest path is then the shortest possible);
    then, op by op, the cheapest option that fits within the op's slack replaces it, so the
    iteration time never grows. Computed once per DAG.

    Returns:
        The knob of every op.
    """
    if pdag.shortest is not None:
        return pdag.shortest.copy()
    knobs = pdag.fastest_knobs.copy()
    paths = LongestPaths(pdag)
    span, slack = paths.slack_s(knobs)
    table = pdag.table
    saving = [
        pdag.op_costs(knobs[i : i + 1])[0] - pdag.op_costs(opts[-1:])[0]
        for i, opts in enumerate(pdag.real_option_knobs)
    ]
    for i in np.argsort(saving)[::-1]:
        if saving[i] <= 0 or slack[i] <= 1e-12 * span:
            continue
        room = table.time_s[knobs[i]] + slack[i] * (1 - 1e-12)
        for k in pdag.real_option_knobs[i][::-1]:  # cheapest first
            if table.time_s[k] <= room:
                if k != knobs[i]:
                    knobs[i] = k
                    span, slack = paths.slack_s(knobs)
                break
    pdag.shortest = knobs.copy()
    return knobs
