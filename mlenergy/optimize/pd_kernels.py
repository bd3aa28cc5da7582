"""Compiled kernels of one Phillips-Dessouky step, on arrays (numba).

:class:`mlenergy.optimize.fast_solver.FastPhillipsDessouky` runs lowtime's algorithm with these
three kernels in place of its networkx passes and its Rust minimum cut:

* :func:`critical_edges`: the longest-path pass that marks the critical edges of the
  activity-on-arc DAG and gives the iteration time (lowtime's ``aoa_to_critical_dag``);
* :func:`lowtime_min_cut`: lowtime's ``find_min_cut`` (``src/phillips_dessouky.rs``), operation
  for operation: a feasible flow of the lower-bounded problem through a super source and sink and
  an infinite sink-to-source edge, a maximum flow on the residual graph, then the nodes reached
  from the source through residual capacity above ``fp_error``. Both maximum flows are the
  Edmonds-Karp of the ``pathfinding`` crate that lowtime calls, on the same float capacities with
  the same breadth-first order (neighbours by ascending node index, the super source and sink
  last), so the flows, and with them the cut, are the ones lowtime computes;
* :func:`reduce_durations`: lowtime's ``reduce_durations`` (speed up the edges across the cut,
  slow down the edges back across it) on precomputed cost tables.

Nodes are indexed by the rank of their lowtime node id; the super source and sink are the two
indices after the last node. Arcs come in pairs (``rev[a]`` is ``a``'s reverse) in a CSR table
whose rows are sorted by head index, which is the order the Rust code's ``BTreeMap`` visits them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from mlenergy.optimize.edmonds_karp import edmonds_karp, live_rows, replay, unchanged_prefix

#: lowtime's float tolerance (``lowtime.solver.FP_ERROR``).
FP_ERROR = 1e-6

#: Status codes of :func:`lowtime_min_cut`.
CUT_OK = 0
#: The port cannot vouch for the answer (a case the Rust code handles differently or panics
#: on); the caller asks lowtime's Rust code instead.
CUT_ASK_LOWTIME = 1


@njit(cache=True)
def critical_edges(topo, out_start, out_edges, head, tail, durations, sink, critical):
    """Mark the critical edges under ``durations``; return the iteration time (units).

    Args:
        topo: Node indices in topological order.
        out_start: CSR row starts of each node's out-edges in ``out_edges``.
        out_edges: Edge indices, grouped by tail node.
        head: Head node of each edge.
        tail: Tail node of each edge.
        durations: Duration of each edge (time units; 0 for dummies).
        sink: Sink node index.
        critical: Output, one flag per edge.
    """
    n = len(out_start) - 1
    start = np.zeros(n, np.int64)
    for i in range(len(topo)):
        u = topo[i]
        s = start[u]
        for k in range(out_start[u], out_start[u + 1]):
            e = out_edges[k]
            f = s + durations[e]
            if f > start[head[e]]:
                start[head[e]] = f
    total = start[sink]
    finish = np.full(n, total, np.int64)
    for i in range(len(topo) - 1, -1, -1):
        u = topo[i]
        if out_start[u + 1] == out_start[u]:
            continue
        best = finish[u]
        for k in range(out_start[u], out_start[u + 1]):
            e = out_edges[k]
            late = finish[head[e]] - durations[e]
            if late < best:
                best = late
        finish[u] = best
    for e in range(len(head)):
        critical[e] = start[tail[e]] + durations[e] == finish[head[e]]
    return total


@njit(cache=True)
def lowtime_min_cut(
    row_start,
    arc_head,
    rev,
    edge_arc,
    src_arc,
    snk_arc,
    back_arc,
    tail,
    head,
    critical,
    lb,
    ub,
    source,
    sink,
    fp_error,
    s_mask,
    rec1,
    last_cap,
    rec2,
):
    """The minimum cut lowtime finds on the critical edges with flow bounds ``lb`` and ``ub``.

    Args:
        row_start: Row starts of the arc table (see the module docstring).
        arc_head: Head node of every arc.
        rev: Reverse of every arc.
        edge_arc: Arc of each DAG edge, tail to head (its reverse is ``rev[edge_arc[e]]``).
        src_arc: Arc from the super source to each node.
        snk_arc: Arc from each node to the super sink.
        back_arc: The arc from the sink to the source.
        tail: Tail node of each DAG edge.
        head: Head node of each DAG edge.
        critical: Which DAG edges take part (the others are absent).
        lb: Lower flow bound of each DAG edge (lowtime's ``annotate_capacities``).
        ub: Upper flow bound of each DAG edge.
        source: Source node.
        sink: Sink node.
        fp_error: lowtime's tolerance.
        s_mask: Output: True for the nodes on the source side.
        rec1: Record of the previous cut's feasible-flow pass (``PassRecord.arrays``), updated.
        last_cap: That pass's arc capacities, updated.
        rec2: Scratch record for the maximum flow on the residual graph (not reused).

    Returns:
        :data:`CUT_OK`, or :data:`CUT_ASK_LOWTIME` where the Rust code would do something the
        port does not reproduce (an unsaturated feasible flow, where it panics; a negative
        residual capacity; the sink reached by the final search).
    """
    num_nodes = len(s_mask)
    n = len(row_start) - 1
    m = len(arc_head)
    s_prime = num_nodes
    t_prime = num_nodes + 1
    residual = np.zeros(m, np.float64)
    flow = np.zeros(m, np.float64)
    queue = np.empty(n, np.int64)
    # Feasible flow: capacity ub - lb, lower bounds moved to the super source and sink.
    in_lb = np.zeros(num_nodes, np.float64)
    out_lb = np.zeros(num_nodes, np.float64)
    for e in range(len(tail)):
        if critical[e]:
            residual[edge_arc[e]] = ub[e] - lb[e]
            in_lb[head[e]] = in_lb[head[e]] + lb[e]
            out_lb[tail[e]] = out_lb[tail[e]] + lb[e]
    for u in range(num_nodes):
        residual[src_arc[u]] = in_lb[u]
        residual[snk_arc[u]] = out_lb[u]
    residual[back_arc] = np.inf
    live = np.zeros(m, np.bool_)
    for e in range(len(tail)):
        if critical[e]:
            live[edge_arc[e]] = True
            live[rev[edge_arc[e]]] = True
    for u in range(num_nodes):
        live[src_arc[u]] = in_lb[u] > 0.0
        live[snk_arc[u]] = out_lb[u] > 0.0
    live[back_arc] = True
    live[rev[back_arc]] = True
    starts, arcs = live_rows(row_start, live)
    # The previous cut's feasible-flow pass is repeated up to the first augmentation this
    # pass's capacities can change, and only the rest is searched for.
    upto = unchanged_prefix(rec1, last_cap, residual, arc_head, rev, s_prime)
    last_cap[:] = residual
    replay(rec1, upto, arc_head, rev, residual, flow)
    edmonds_karp(starts, arcs, arc_head, rev, residual, flow, s_prime, t_prime, src_arc, rec1)
    for u in range(num_nodes):
        f_in = flow[src_arc[u]] if flow[src_arc[u]] > 0.0 else 0.0
        f_out = flow[snk_arc[u]] if flow[snk_arc[u]] > 0.0 else 0.0
        if abs(f_in - in_lb[u]) > fp_error or abs(f_out - out_lb[u]) > fp_error:
            return CUT_ASK_LOWTIME
    edge_flow = np.zeros(len(tail), np.float64)
    for e in range(len(tail)):
        if critical[e]:
            f = flow[edge_arc[e]]
            edge_flow[e] = (f if f > 0.0 else 0.0) + lb[e]
    # Maximum flow from the source on the residual graph of the feasible flow.
    for a in range(m):
        residual[a] = 0.0
        flow[a] = 0.0
    for e in range(len(tail)):
        if critical[e]:
            uv = ub[e] - edge_flow[e]
            if abs(uv) < fp_error:
                uv = 0.0
            vu = edge_flow[e] - lb[e]
            if abs(vu) < fp_error:
                vu = 0.0
            if uv < 0.0 or vu < 0.0:
                return CUT_ASK_LOWTIME
            residual[edge_arc[e]] = uv
            residual[rev[edge_arc[e]]] = vu
    live[:] = False
    for e in range(len(tail)):
        if critical[e]:
            live[edge_arc[e]] = True
            live[rev[edge_arc[e]]] = True
    starts, arcs = live_rows(row_start, live)
    replay(rec2, 0, arc_head, rev, residual, flow)
    edmonds_karp(starts, arcs, arc_head, rev, residual, flow, source, sink, src_arc[:0], rec2)
    for e in range(len(tail)):
        if critical[e]:
            a = edge_arc[e]
            fwd = flow[a]
            bwd = flow[rev[a]]
            edge_flow[e] = edge_flow[e] + (fwd if fwd > 0.0 else 0.0)
            edge_flow[e] = edge_flow[e] - (bwd if bwd > 0.0 else 0.0)
    # Source side: nodes reached through residual capacity above fp_error.
    open_arc = np.zeros(m, np.bool_)
    for e in range(len(tail)):
        if critical[e]:
            a = edge_arc[e]
            open_arc[a] = abs(ub[e] - edge_flow[e]) > fp_error
            open_arc[rev[a]] = abs(edge_flow[e] - lb[e]) > fp_error
    for u in range(num_nodes):
        s_mask[u] = False
    top = 0
    queue[top] = source
    top += 1
    s_mask[source] = True
    while top > 0:
        top -= 1
        u = queue[top]
        if u == sink:
            return CUT_ASK_LOWTIME
        for k in range(starts[u], starts[u + 1]):
            a = arcs[k]
            v = arc_head[a]
            if open_arc[a] and v < num_nodes and not s_mask[v]:
                s_mask[v] = True
                queue[top] = v
                top += 1
    return CUT_OK


@njit(cache=True)
def critical_bounds(
    critical, is_dummy, durations, cost_row, cost_min, lb_table, ub_table, lb, ub, key
):
    """The flow bounds of the critical edges (0 elsewhere); whether the cut input is unchanged.

    Args:
        critical: Which edges are in the critical DAG.
        is_dummy: Dummy edges (their bounds are row ``cost_row``'s column 0).
        durations: Duration of each edge (time units).
        cost_row: Row of each edge in the tables.
        cost_min: Duration of column 0 of each row.
        lb_table: Lower flow bound of each (row, duration).
        ub_table: Upper flow bound of each (row, duration).
        lb: Output, lower bound of each edge.
        ub: Output, upper bound of each edge.
        key: The previous cut's input: critical flags, lower and upper bounds (three rows of
            one float array); updated to this step's where it differs.

    Returns:
        True where this step's critical edges and bounds equal the previous step's (its cut is
        then the previous cut).
    """
    same = True
    for e in range(len(critical)):
        if critical[e]:
            col = 0 if is_dummy[e] else durations[e] - cost_min[cost_row[e]]
            lb[e] = lb_table[cost_row[e], col]
            ub[e] = ub_table[cost_row[e], col]
            flag = 1.0
        else:
            lb[e] = 0.0
            ub[e] = 0.0
            flag = 0.0
        if same and (key[0, e] != flag or key[1, e] != lb[e] or key[2, e] != ub[e]):
            same = False
    if not same:
        for e in range(len(critical)):
            key[0, e] = 1.0 if critical[e] else 0.0
            key[1, e] = lb[e]
            key[2, e] = ub[e]
    return same


@njit(cache=True)
def reduce_durations(
    tail, head, critical, s_mask, is_dummy, durations, min_d, max_d, cost_row, cost_min, costs
):
    """Shorten the cut by one time unit, in place (lowtime's ``reduce_durations``).

    Args:
        tail: Tail node of each DAG edge.
        head: Head node of each DAG edge.
        critical: Which edges are in the critical DAG.
        s_mask: Source side of the cut.
        is_dummy: Dummy edges (no operation).
        durations: Duration of each edge (time units), updated.
        min_d: Shortest duration of each edge.
        max_d: Longest duration of each edge.
        cost_row: Row of each edge in ``costs``.
        cost_min: Duration of column 0 of that row.
        costs: Cost of each duration, one row per operation spec.

    Returns:
        lowtime's cost change: ``inf`` where the cut cannot be shortened, 0 where no edge
        crosses it.
    """
    any_speed_up = False
    for e in range(len(tail)):
        if critical[e] and s_mask[tail[e]] and not s_mask[head[e]]:
            any_speed_up = True
            break
    if not any_speed_up:
        return 0.0
    change = 0.0
    for e in range(len(tail)):
        if critical[e] and s_mask[tail[e]] and not s_mask[head[e]]:
            if is_dummy[e] or durations[e] - 1 < min_d[e]:
                return np.inf
            row = cost_row[e]
            d = durations[e] - cost_min[row]
            change += abs(costs[row, d - 1] - costs[row, d])
            durations[e] -= 1
    for e in range(len(tail)):
        if critical[e] and not s_mask[tail[e]] and s_mask[head[e]]:
            if is_dummy[e]:
                continue
            if durations[e] + 1 > max_d[e]:
                return np.inf
            row = cost_row[e]
            d = durations[e] - cost_min[row]
            change -= abs(costs[row, d] - costs[row, d + 1])
            durations[e] += 1
    return change
