"""lowtime's Phillips-Dessouky solver with its graph bookkeeping done on plain lists.

Each step of :class:`lowtime.solver.PhillipsDessouky` (1) finds the critical edges of the
activity-on-arc DAG, (2) annotates their flow bounds, (3) finds a minimum cut (lowtime's Rust
code) and (4) shortens the cut by one time unit. lowtime does (1) by copying the whole networkx
graph and walking it with attrs-validated attribute writes, which dominates its run time on
pipelines of thousands of instructions. :class:`FastPhillipsDessouky` computes the same critical
edges with an integer longest-path pass over precomputed adjacency lists and hands lowtime's own
``annotate_capacities``, ``format_rust_inputs``, Rust ``find_min_cut`` and ``reduce_durations``
a small graph view holding exactly those edges, with the nodes and edges in the order lowtime's
critical DAG has them, so the Rust code gets exactly the input it gets under lowtime and every
step's answer is the same (``benchmarks/pipeline_planner.py`` checks it against the unmodified
solver). The minimum cut itself, lowtime's Rust code, is then most of the time. Its input is
the list of critical edges with their flow bounds (and the fixed node list, source and sink);
where a step's input equals the previous step's (about half the steps on a measured 8-stage
profile: the cut moves along a piecewise-linear cost segment), the previous cut is reused
instead of calling the Rust code again. The Rust code is a deterministic function of that input
(the same input gives the same cut on every call), so this changes no answer. Shrinking its
graph (contracting dummy edges in series) was tried and rejected: equal-cost cuts are then broken
differently (lowtime's cut depends on 1e-6 residual thresholds), and the frontier moved by up
to 0.1%.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import networkx as nx
from lowtime import _lowtime_rs
from lowtime.exceptions import LowtimeFlowError
from lowtime.graph_utils import aon_dag_to_aoa_dag
from lowtime.solver import FP_ERROR, PhillipsDessouky


class CriticalView:
    """The part of the networkx API lowtime's solver methods use, over the critical edges.

    Args:
        nodes: Every node of the activity-on-arc DAG, in its order.
        edges: Critical edges ``(u, v, attrs)`` in the DAG's edge order.
        source: Source node.
        sink: Sink node.
        indices: Index of each critical edge in the DAG's edge list.
    """

    def __init__(
        self,
        nodes: list[int],
        edges: list[tuple[int, int, dict[str, Any]]],
        source: int,
        sink: int,
        indices: list[int] | None = None,
    ) -> None:
        self.nodes = nodes
        self._edges = edges
        self.indices = indices if indices is not None else []
        self._adj: dict[int, dict[int, dict[str, Any]]] = {}
        for u, v, attrs in edges:
            self._adj.setdefault(u, {})[v] = attrs
        self.graph = {"source_node": source, "sink_node": sink}

    def edges(self, data: bool = False) -> list:
        """Edges ``(u, v, attrs)`` (``data=True``) or ``(u, v)``."""
        return self._edges if data else [(u, v) for u, v, _ in self._edges]

    def successors(self, node: int) -> list[int]:
        """Heads of the critical edges leaving ``node``."""
        return list(self._adj.get(node, ()))

    def __getitem__(self, node: int) -> dict[int, dict[str, Any]]:
        return self._adj.get(node, {})


class FastPhillipsDessouky(PhillipsDessouky):
    """:class:`lowtime.solver.PhillipsDessouky` with a list-based critical-path pass."""

    def _prepare(self) -> None:
        aoa = aon_dag_to_aoa_dag(self.aon_dag, attr_name=self.attr_name)
        self.nodes = list(aoa.nodes)
        self.source = aoa.graph["source_node"]
        self.sink = aoa.graph["sink_node"]
        self.edge_list = [(u, v, attrs[self.attr_name]) for u, v, attrs in aoa.edges(data=True)]
        self.topo = list(nx.topological_sort(aoa))
        index = {n: i for i, n in enumerate(self.topo)}
        self.out_edges: list[list[int]] = [[] for _ in self.topo]
        self.in_edges: list[list[int]] = [[] for _ in self.topo]
        self.tail = [index[u] for u, _, _ in self.edge_list]
        self.head = [index[v] for _, v, _ in self.edge_list]
        for e, (t, h) in enumerate(zip(self.tail, self.head, strict=True)):
            self.out_edges[t].append(e)
            self.in_edges[h].append(e)
        self.ops = [op for _, _, op in self.edge_list]
        self.sink_index = index[self.sink]
        # One attribute dict per edge, reused: annotate_capacities rewrites lb and ub each step.
        self.edge_attrs = [{self.attr_name: op} for op in self.ops]
        # (ub, lb) of each edge by its duration, as lowtime's annotate_capacities computes them.
        self.bounds: list[dict[int, tuple[float, float]]] = [{} for _ in self.ops]

    def _durations(self) -> list[int]:
        return [0 if op.is_dummy else op.duration for op in self.ops]

    def critical(self) -> tuple[CriticalView, int]:
        """The critical edges under the current durations, and the iteration time (units)."""
        d = self._durations()
        n = len(self.topo)
        start = [0] * n  # earliest time each node is reached
        for i in range(n):
            s = start[i]
            for e in self.out_edges[i]:
                f = s + d[e]
                h = self.head[e]
                if f > start[h]:
                    start[h] = f
        total = start[self.sink_index]
        finish = [total] * n  # latest time each node may be reached
        for i in range(n - 1, -1, -1):
            best = finish[i]
            for e in self.out_edges[i]:
                late = finish[self.head[e]] - d[e]
                if late < best:
                    best = late
            if self.out_edges[i]:
                finish[i] = best
        tail, head, attrs, edge_list = self.tail, self.head, self.edge_attrs, self.edge_list
        indices = [e for e in range(len(edge_list)) if start[tail[e]] + d[e] == finish[head[e]]]
        edges = [(edge_list[e][0], edge_list[e][1], attrs[e]) for e in indices]
        return CriticalView(self.nodes, edges, self.source, self.sink, indices), total

    def rust_edges(self, view: CriticalView) -> list:
        """The Rust min cut's edge input, as ``annotate_capacities`` + ``format_rust_inputs``.

        Each edge's bounds are lowtime's own ``annotate_capacities`` result for the edge alone,
        kept per duration (they depend only on the operation and its duration).

        Returns:
            ``((u, v), (capacity, flow, ub, lb))`` per critical edge, in the view's order.
        """
        out = []
        for e, (u, v, attrs) in zip(view.indices, view.edges(data=True), strict=True):
            duration = self.ops[e].duration
            bounds = self.bounds[e].get(duration)
            if bounds is None:
                one = {self.attr_name: self.ops[e]}
                self.annotate_capacities(CriticalView([], [(u, v, one)], u, v))
                bounds = self.bounds[e][duration] = (one["ub"], one["lb"])
            attrs["ub"], attrs["lb"] = bounds
            out.append(((u, v), (0, 0, *bounds)))
        return out

    def steps(self) -> Iterator[int]:
        """Run the solver; yield the quantised iteration time after each step.

        The operations' ``duration`` and ``assigned_knob`` hold the step's plan at each
        yield, exactly as with :meth:`PhillipsDessouky.run`.
        """
        self._prepare()
        for op in self.ops:
            if not op.is_dummy:
                op.duration = op.max_duration
        view, _ = self.critical()
        last_edges: list | None = None
        last_cut: tuple[set[int], set[int]] = (set(), set())
        while True:
            edges = self.rust_edges(view)
            if edges != last_edges:
                try:
                    runner = _lowtime_rs.PhillipsDessouky(
                        FP_ERROR, self.nodes, self.source, self.sink, edges
                    )
                    last_cut = runner.find_min_cut()
                except LowtimeFlowError:
                    return
                last_edges = edges
            s_set, t_set = last_cut
            cost_change = self.reduce_durations(view, s_set, t_set)
            if cost_change == float("inf") or abs(cost_change) < FP_ERROR:
                return
            view, total = self.critical()
            yield total
