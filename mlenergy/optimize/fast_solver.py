"""lowtime's Phillips-Dessouky solver, run on arrays with compiled kernels.

Each step of :class:`lowtime.solver.PhillipsDessouky` (1) finds the critical edges of the
activity-on-arc DAG, (2) annotates their flow bounds, (3) finds a minimum cut (lowtime's Rust
``find_min_cut``) and (4) shortens the cut by one time unit. lowtime does (1) and (4) on a
networkx graph with attrs-validated attribute writes and (3) on hash maps rebuilt every step;
on pipelines of thousands of instructions that takes minutes. :class:`FastPhillipsDessouky` runs
the same four operations on arrays (:mod:`mlenergy.optimize.pd_kernels`):

* the flow bounds of an edge depend only on its operation and duration, so they are lowtime's
  own ``annotate_capacities`` result (the same float operations, :func:`flow_bounds`), tabulated
  once per operation spec and duration, with the knob lowtime assigns at that duration;
* the minimum cut is lowtime's Rust algorithm ported operation for operation (the same two
  Edmonds-Karp maximum flows on the same float capacities, in the same search order), so it
  returns the cut lowtime's code returns; where the port meets a case it does not reproduce
  (lowtime would panic, or its final search reaches the sink) the step asks lowtime's Rust code;
* each Edmonds-Karp search continues the previous one instead of starting over
  (:mod:`mlenergy.optimize.edmonds_karp`), and a cut's feasible-flow pass repeats the previous
  cut's augmentations up to the first one its changed capacities can affect (consecutive cuts
  differ in a few edges; on the benchmark profile 51-60% of the augmentations repeat);
* where a step's cut input (the critical edges with their bounds) equals the previous step's,
  the previous cut is reused: the cut is a deterministic function of that input.

``benchmarks/pipeline_planner.py`` compares every step's plan with the unmodified lowtime solver,
and ``check_cuts=True`` also asks lowtime's Rust code at every step and counts disagreements
(useful on instances where the unmodified solver takes too long to compare against).
"""

from __future__ import annotations

from collections.abc import Iterator

import networkx as nx
import numpy as np
from lowtime import _lowtime_rs
from lowtime.exceptions import LowtimeFlowError
from lowtime.graph_utils import aon_dag_to_aoa_dag
from lowtime.operation import Operation
from lowtime.solver import FP_ERROR, PhillipsDessouky

from mlenergy.optimize import pd_kernels as kern

LOWTIME_INF = 10000.0
"""The flow bound lowtime's ``annotate_capacities`` uses for an unbounded side."""


def knobs_for(options: list, lo: int, hi: int) -> np.ndarray:
    """The knob lowtime's ``get_knob_for`` gives at every duration ``lo..hi`` (the slowest fitting).

    Args:
        options: The spec's candidate options (``CandidateExecutionOptions.options``).
        lo: Shortest duration.
        hi: Longest duration.
    """
    ascending = list(reversed(options))  # lowtime keeps them by descending quantised time
    quant = np.array([o.quant_time for o in ascending])
    knob = np.array([o.knob for o in ascending], dtype=np.int64)
    index = np.searchsorted(quant, np.arange(lo, hi + 1), side="right")
    return knob[np.maximum(index, 1) - 1]


def flow_bounds(costs: list[float], i: int, last: int) -> tuple[float, float]:
    """The flow bounds lowtime's ``annotate_capacities`` gives one operation at one duration.

    Args:
        costs: The operation's cost at each duration from its shortest, ``costs[0]``, to its
            longest, ``costs[last]``.
        i: The duration, as an index into ``costs``.
        last: The index of the longest duration.

    Returns:
        ``(lb, ub)``, with the same float operations as lowtime (checked against it by the
        tests).
    """
    if i == 0 and last == 0:
        lb, ub = 0.0, LOWTIME_INF
    elif i - 1 < 0:
        lb, ub = abs(costs[i] - costs[i + 1]), LOWTIME_INF
    elif i + 1 > last:
        lb, ub = 0.0, abs(costs[i - 1] - costs[i])
    else:
        lb = abs(costs[i] - costs[i + 1])
        ub = abs(costs[i - 1] - costs[i]) + FP_ERROR
    return lb // FP_ERROR * FP_ERROR, ub // FP_ERROR * FP_ERROR


class ArcTable:
    """Paired arcs of the flow network, in the Rust code's visiting order.

    Nodes ``0..n-1`` are the DAG's (their lowtime ids), ``n`` and ``n+1`` the super source and
    sink of the feasible-flow pass. Each DAG edge, each super-source and super-sink link and the
    sink-to-source link is a pair of arcs; the arcs leaving a node are sorted by head.

    Args:
        num_nodes: Nodes of the DAG.
        tail: Tail of each DAG edge.
        head: Head of each DAG edge.
        source: Source node.
        sink: Sink node.
    """

    def __init__(
        self, num_nodes: int, tail: np.ndarray, head: np.ndarray, source: int, sink: int
    ) -> None:
        n, m = num_nodes, len(tail)
        nodes = np.arange(n, dtype=np.int64)
        # Pairs: DAG edges, super source -> u, u -> super sink, sink -> source.
        pair_from = np.concatenate([tail, np.full(n, n), nodes, [sink]]).astype(np.int64)
        pair_to = np.concatenate([head, nodes, np.full(n, n + 1), [source]]).astype(np.int64)
        arc_from = np.concatenate([pair_from, pair_to])
        arc_to = np.concatenate([pair_to, pair_from])
        order = np.lexsort((arc_to, arc_from))
        position = np.empty_like(order)
        position[order] = np.arange(len(order))
        pairs = len(pair_from)
        self.arc_head = arc_to[order]
        self.rev = np.concatenate([position[pairs:], position[:pairs]])[order]
        self.row_start = np.searchsorted(arc_from[order], np.arange(n + 3)).astype(np.int64)
        self.edge_arc = position[:m]
        self.src_arc = position[m : m + n]
        self.snk_arc = position[m + n : m + 2 * n]
        self.back_arc = int(position[m + 2 * n])


class PassRecord:
    """The augmentations of one Edmonds-Karp pass, for the next cut to repeat.

    Args:
        num_nodes: Nodes of the flow network (with the super source and sink).
        num_arcs: Arcs of the arc table.
        max_augmentations: Augmentations it keeps; a longer pass is not kept.
    """

    def __init__(self, num_nodes: int, num_arcs: int, max_augmentations: int) -> None:
        never = np.iinfo(np.int64).max
        self.first_expanded = np.full(num_nodes, never, dtype=np.int64)
        self.first_used = np.full(num_arcs, never, dtype=np.int64)
        self.offsets = np.zeros(max_augmentations + 1, dtype=np.int64)
        self.path_arcs = np.zeros(16 * max_augmentations, dtype=np.int64)
        # Augmentations kept (-1 once full), numbered; in all passes so far: repeated, searched.
        self.counts = np.zeros(4, dtype=np.int64)

    @property
    def repeated(self) -> int:
        """Augmentations repeated from the previous pass's record, over all passes."""
        return int(self.counts[2])

    @property
    def searched(self) -> int:
        """Augmentations found by searching, over all passes."""
        return int(self.counts[3])

    @property
    def arrays(self) -> tuple[np.ndarray, ...]:
        """The arrays in the order the kernels take them."""
        return (self.first_expanded, self.first_used, self.offsets, self.path_arcs, self.counts)


class FastPhillipsDessouky(PhillipsDessouky):
    """:class:`lowtime.solver.PhillipsDessouky` on arrays, with the same answer.

    Args:
        dag: Activity-on-node DAG, as for lowtime's solver.
        attr_name: Node attribute holding each operation.
        check_cuts: Also ask lowtime's Rust code for every cut and count where it differs
            (slow; the Rust cut is then the one used).
    """

    def __init__(self, dag: nx.DiGraph, attr_name: str = "op", check_cuts: bool = False) -> None:
        super().__init__(dag, attr_name)
        self._edge_of: np.ndarray | None = None  # edge of each op :meth:`knobs_of` was asked
        self.check_cuts = check_cuts
        self.cut_calls = 0  # minimum cuts computed (not reused)
        self.lowtime_calls = 0  # of those, asked of lowtime's Rust code
        self.cut_mismatches = 0  # with check_cuts: port and Rust disagreed

    def _prepare(self) -> None:
        aoa = aon_dag_to_aoa_dag(self.aon_dag, attr_name=self.attr_name)
        self.num_nodes = aoa.number_of_nodes()
        if sorted(aoa.nodes) != list(range(self.num_nodes)):
            raise ValueError("lowtime's activity-on-arc DAG should number its nodes 0..n-1")
        self.source = int(aoa.graph["source_node"])
        self.sink = int(aoa.graph["sink_node"])
        edges = list(aoa.edges(data=True))
        self.ops: list[Operation] = [attrs[self.attr_name] for _, _, attrs in edges]
        self.tail = np.array([u for u, _, _ in edges], dtype=np.int64)
        self.head = np.array([v for _, v, _ in edges], dtype=np.int64)
        by_tail = np.argsort(self.tail, kind="stable")
        self.out_edges = by_tail.astype(np.int64)
        self.out_start = np.searchsorted(self.tail[by_tail], np.arange(self.num_nodes + 1))
        self.topo = np.array(list(nx.topological_sort(aoa)), dtype=np.int64)
        self.arcs = ArcTable(self.num_nodes, self.tail, self.head, self.source, self.sink)
        num_arcs = len(self.arcs.arc_head)
        self.feasible_record = PassRecord(self.num_nodes + 2, num_arcs, 4 * self.num_nodes + 64)
        self.feasible_capacity = np.zeros(num_arcs, dtype=np.float64)
        self.second_record = PassRecord(self.num_nodes + 2, num_arcs, 4 * self.num_nodes + 64)
        self.is_dummy = np.array([op.is_dummy for op in self.ops], dtype=np.bool_)
        self.min_d = np.array([0 if op.is_dummy else op.min_duration for op in self.ops])
        self.max_d = np.array([0 if op.is_dummy else op.max_duration for op in self.ops])
        self._tabulate()

    def _tabulate(self) -> None:
        """Costs, knobs and lowtime's flow bounds of every (operation spec, duration)."""
        rows: dict[int, int] = {}
        specs: list[Operation] = []
        self.cost_row = np.zeros(len(self.ops), dtype=np.int64)
        for e, op in enumerate(self.ops):
            key = -1 if op.is_dummy else id(op.spec)
            if key not in rows:
                rows[key] = len(specs)
                specs.append(op)
            self.cost_row[e] = rows[key]
        width = max(int(self.max_d.max() - self.min_d.min()) + 1, 1)
        self.cost_min = np.zeros(len(specs), dtype=np.int64)
        self.costs = np.zeros((len(specs), width), dtype=np.float64)
        self.knob_table = np.full((len(specs), width), -1, dtype=np.int64)
        self.lb_table = np.zeros((len(specs), width), dtype=np.float64)
        self.ub_table = np.zeros((len(specs), width), dtype=np.float64)
        for r, op in enumerate(specs):
            if op.is_dummy:  # unbounded, as an operation that cannot change
                self.lb_table[r, 0], self.ub_table[r, 0] = flow_bounds([0.0], 0, 0)
                continue
            lo, hi = op.min_duration, op.max_duration
            self.cost_min[r] = lo
            model, options = op.spec.cost_model, op.spec.options
            costs = [model(d) for d in range(lo, hi + 1)]
            self.costs[r, : hi - lo + 1] = costs
            self.knob_table[r, : hi - lo + 1] = knobs_for(options.options, lo, hi)
            for d in range(lo, hi + 1):
                lb, ub = flow_bounds(costs, d - lo, hi - lo)
                self.lb_table[r, d - lo] = lb
                self.ub_table[r, d - lo] = ub

    def knobs_of(self, ops: list[Operation]) -> np.ndarray:
        """The knob each of ``ops`` holds at the current plan (call during :meth:`steps`).

        What lowtime's duration setter assigns (``get_knob_for``), read from a table.
        """
        if self._edge_of is None or len(self._edge_of) != len(ops):
            edge = {id(op): e for e, op in enumerate(self.ops)}
            self._edge_of = np.array([edge[id(op)] for op in ops], dtype=np.int64)
        e = self._edge_of
        rows = self.cost_row[e]
        return self.knob_table[rows, self.durations[e] - self.cost_min[rows]]

    def _bounds(self, durations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        col = np.where(self.is_dummy, 0, durations - self.cost_min[self.cost_row])
        return self.lb_table[self.cost_row, col], self.ub_table[self.cost_row, col]

    def cut_input(self) -> list:
        """The minimum cut's edge input at the current plan, as lowtime's solver formats it."""
        lb, ub = self._bounds(self.durations)
        return self.rust_input(self.critical, lb, ub)

    def rust_input(self, critical: np.ndarray, lb: np.ndarray, ub: np.ndarray) -> list:
        """The Rust min cut's edge input for the critical edges, as lowtime formats it."""
        return [
            ((int(self.tail[e]), int(self.head[e])), (0, 0, float(ub[e]), float(lb[e])))
            for e in np.nonzero(critical)[0]
        ]

    def _rust_cut(self, critical: np.ndarray, lb: np.ndarray, ub: np.ndarray) -> np.ndarray:
        runner = _lowtime_rs.PhillipsDessouky(
            FP_ERROR,
            list(range(self.num_nodes)),
            self.source,
            self.sink,
            self.rust_input(critical, lb, ub),
        )
        s_set, _ = runner.find_min_cut()
        mask = np.zeros(self.num_nodes, dtype=np.bool_)
        mask[list(s_set)] = True
        return mask

    def _cut(self, critical: np.ndarray, lb: np.ndarray, ub: np.ndarray) -> np.ndarray:
        """Source side of lowtime's minimum cut (raises LowtimeFlowError like lowtime)."""
        self.cut_calls += 1
        a = self.arcs
        mask = np.zeros(self.num_nodes, dtype=np.bool_)
        status = kern.lowtime_min_cut(
            a.row_start, a.arc_head, a.rev, a.edge_arc, a.src_arc, a.snk_arc, a.back_arc,
            self.tail, self.head, critical, lb, ub, self.source, self.sink, FP_ERROR, mask,
            self.feasible_record.arrays, self.feasible_capacity, self.second_record.arrays,
        )  # fmt: skip
        if status == kern.CUT_ASK_LOWTIME or self.check_cuts:
            self.lowtime_calls += 1
            rust = self._rust_cut(critical, lb, ub)
            if status == kern.CUT_OK and not np.array_equal(rust, mask):
                self.cut_mismatches += 1
            mask = rust
        return mask

    def model_cost(self) -> float:
        """Summed cost-model value of the operations at their current durations.

        lowtime's ``get_total_cost``: the cost the solver minimises (J for pipeline DAGs).
        """
        real = ~self.is_dummy
        rows = self.cost_row[real]
        return float(self.costs[rows, self.durations[real] - self.cost_min[rows]].sum())

    def steps(self, sync_ops: bool = True) -> Iterator[int]:
        """Run the solver; yield the quantised iteration time after each step.

        Args:
            sync_ops: Keep the operations' ``duration`` and ``assigned_knob`` at the step's
                plan at each yield, exactly as with :meth:`PhillipsDessouky.run`. Without it
                the plan is read from ``durations`` and :meth:`knobs_of` only (faster).
        """
        self._prepare()
        durations = self.durations = self.max_d.copy()
        for e, op in enumerate(self.ops):
            if not op.is_dummy:
                op.duration = int(durations[e])
        critical = self.critical = np.zeros(len(self.ops), dtype=np.bool_)
        kern.critical_edges(
            self.topo, self.out_start, self.out_edges, self.head, self.tail, durations,
            self.sink, critical,
        )  # fmt: skip
        key = np.full((3, len(self.ops)), -1.0)  # no previous cut yet
        lb = np.zeros(len(self.ops))
        ub = np.zeros(len(self.ops))
        s_mask = np.zeros(self.num_nodes, dtype=np.bool_)
        before = durations.copy()
        while True:
            same = kern.critical_bounds(
                critical, self.is_dummy, durations, self.cost_row, self.cost_min,
                self.lb_table, self.ub_table, lb, ub, key,
            )  # fmt: skip
            if not same:
                try:
                    s_mask = self._cut(critical, lb, ub)
                except LowtimeFlowError:
                    return
            before[:] = durations
            change = kern.reduce_durations(
                self.tail, self.head, critical, s_mask, self.is_dummy, durations,
                self.min_d, self.max_d, self.cost_row, self.cost_min, self.costs,
            )  # fmt: skip
            if change == float("inf") or abs(change) < FP_ERROR:
                return
            if sync_ops:
                for changed in np.nonzero(durations != before)[0].tolist():
                    self.ops[changed].duration = int(durations[changed])
            total = kern.critical_edges(
                self.topo, self.out_start, self.out_edges, self.head, self.tail, durations,
                self.sink, critical,
            )  # fmt: skip
            yield int(total)
