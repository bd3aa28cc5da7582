"""``pathfinding::edmonds_karp``, the maximum flow lowtime's Rust minimum cut calls, on arrays.

The crate (``src/directed/edmonds_karp.rs``, sparse capacities) augments, one at a time, the
first path its breadth-first search finds from the source to the sink: neighbours in the order
of their index, a node found once, the path's capacity its least residual capacity. The flow,
and with it every float lowtime's cut is read from, depends on that order, so this module keeps
it exactly; what it saves is search work:

* rows hold only the arcs that can carry flow in the pass (:func:`live_rows`);
* the super source's neighbours are read from its row as the search reaches them instead of
  being queued one by one;
* a search is not run from scratch: the previous search is edited where its augmentation
  changed it and continued from the first expansion it changed (:func:`_edit_search`);
* a pass on capacities that differ from a recorded pass's in a few arcs repeats the recorded
  augmentations up to the first one those arcs can affect (:func:`unchanged_prefix`,
  :func:`replay`) and searches only from there.

Arcs come in pairs (``rev[a]`` is ``a``'s reverse) in a CSR table whose rows are sorted by head
index, the order the crate's ``BTreeMap`` visits them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: ``f64::MAX``: the path capacity the crate's search starts from (``Bounded::max_value``).
F64_MAX = 1.7976931348623157e308

# Search state pointers (``st``) and expansion-log columns (``log``).
_STEPS, _NFOUND, _HEAD, _TAIL, _NEXT_SRC, _BREAK, _AUG, _NPTR = 0, 1, 2, 3, 4, 5, 6, 7
_NODE, _SRC, _LHEAD, _LTAIL, _LFOUND, _NLOG = 0, 1, 2, 3, 4, 5


@njit(cache=True, inline="always")
def _push(a, rev, residual, flow, c):
    """Push ``c`` along arc ``a`` and take it back along its reverse.

    The crate's ``add_flow`` on one arc, with its float operations in its order.
    """
    b = rev[a]
    direct = flow[a] + c
    flow[a] = direct
    flow[b] = -direct
    residual[a] = residual[a] + (-c)
    residual[b] = residual[b] + c


@njit(cache=True)
def _augment(rev, arc_head, residual, flow, parent, c, source, sink):
    """Push ``c`` along the parent arcs from ``source`` to ``sink`` (the crate's ``add_flow``)."""
    v = sink
    while v != source:
        a = parent[v]
        _push(a, rev, residual, flow, c)
        v = arc_head[rev[a]]


@njit(cache=True)
def live_rows(row_start, live):
    """Rows of the arcs flagged ``live``, in arc-table order: (row starts, arc indices)."""
    n = len(row_start) - 1
    starts = np.zeros(n + 1, np.int64)
    arcs = np.empty(int(live.sum()), np.int64)
    k = 0
    for u in range(n):
        starts[u] = k
        for a in range(row_start[u], row_start[u + 1]):
            if live[a]:
                arcs[k] = a
                k += 1
    starts[n] = k
    return starts, arcs


@njit(cache=True)
def edmonds_karp(starts, arcs, arc_head, rev, residual, flow, source, sink, first_arc, rec):
    """``pathfinding::edmonds_karp`` (sparse capacities) in place on ``residual`` and ``flow``.

    Each search is the crate's breadth-first search from ``source``: neighbours in row order,
    a node found once, the first path to ``sink`` augmented by its least residual capacity
    (folded from the source, as the crate's ``path_capacity`` is). Rows hold only the arcs that
    can carry flow in this pass (``starts``/``arcs`` from :func:`live_rows`; the others have no
    residual capacity throughout and the crate's search passes over them).

    A search is not run from scratch but continued from the previous one: the expansions of
    the previous search are logged, the augmentation's effect on them is undone where it
    reaches (:func:`_edit_search`), and the search resumes at the first expansion that changed.
    Where ``first_arc`` is given (the super source, whose row holds an arc to every node:
    ``first_arc[v]`` is the arc to ``v``) the source's neighbours are not queued one by one but
    read from its row as the queue reaches them (the crate queues exactly those, in that order,
    first), a node counting as found when its arc from the source has residual capacity.

    Args:
        starts: Row starts of the live rows (:func:`live_rows`).
        arcs: Arcs of the live rows.
        arc_head: Head node of every arc.
        rev: Reverse of every arc.
        residual: Residual capacity of every arc, updated.
        flow: Flow of every arc, updated.
        source: Source node.
        sink: Sink node.
        first_arc: Arc from the super source to each node, or empty.
        rec: A :class:`PassRecord`'s arrays (``PassRecord.arrays``): the augmentations are
            appended to it, numbered on from those it holds.
    """
    n = len(starts) - 1
    st = np.zeros(_NPTR, np.int64)
    parent = np.full(n, -1, np.int64)
    # Undone discoveries leave holes, so the logs get room for two searches; a search that
    # would start past the first half starts from scratch instead (_edit_search).
    queue = np.empty(2 * n + 2, np.int64)
    found = np.empty(2 * n + 2, np.int64)  # nodes in the order found (-1: discovery undone)
    queue_pos = np.full(n, -1, np.int64)
    found_pos = np.full(n, -1, np.int64)
    path = np.empty(n + 1, np.int64)
    log = np.empty((2 * n + 2, _NLOG), np.int64)  # per expansion: node (-1: undone) and state
    step_of = np.full(n, -1, np.int64)
    dele = np.empty(n + 1, np.int64)
    touch, use, off, rec_arcs, count_rec = rec
    st[_AUG] = count_rec[1]
    src_hi = starts[source + 1]
    st[_NEXT_SRC] = starts[source]
    if len(first_arc) == 0:
        queue[0] = source
        queue_pos[source] = 0
        st[_TAIL] = 1
        st[_NEXT_SRC] = src_hi
    while _search(
        st, parent, queue, found, queue_pos, found_pos, log, step_of, touch,
        starts, arcs, arc_head, residual, source, sink, first_arc, src_hi,
    ):  # fmt: skip
        count = 0
        v = sink
        while v != source:
            path[count] = parent[v]
            count += 1
            v = arc_head[rev[parent[v]]]
        c = F64_MAX
        for i in range(count - 1, -1, -1):
            r = residual[path[i]]
            c = c if c < r else r
        _augment(rev, arc_head, residual, flow, parent, c, source, sink)
        _record(st[_AUG], path, count, use, off, rec_arcs, count_rec)
        st[_AUG] += 1
        _edit_search(
            st, parent, queue, found, queue_pos, found_pos, log, step_of, path, count, dele,
            starts, arcs, arc_head, rev, residual, source, sink, len(first_arc) > 0, src_hi,
        )  # fmt: skip


@njit(cache=True)
def _search(
    st, parent, queue, found, queue_pos, found_pos, log, step_of, touch,
    starts, arcs, arc_head, residual, source, sink, first_arc, src_hi,
):  # fmt: skip
    """Continue the breadth-first search from ``st``; True where it reached ``sink``."""
    lazy = len(first_arc) > 0
    aug = st[_AUG]
    steps, n_found, head_q, tail_q, next_src = st[0], st[1], st[2], st[3], st[4]
    while True:
        pos = next_src
        if next_src < src_hi:
            a0 = arcs[next_src]
            next_src += 1
            if not residual[a0] > 0.0:
                continue
            node = arc_head[a0]
            log[steps, _LFOUND] = n_found
            log[steps, _LHEAD] = head_q
            parent[node] = a0
            found[n_found] = node
            found_pos[node] = n_found
            queue_pos[node] = -1
            n_found += 1
        elif head_q < tail_q:
            node = queue[head_q]
            head_q += 1
            if node < 0:
                continue  # a discovery undone
            log[steps, _LFOUND] = n_found
            log[steps, _LHEAD] = head_q - 1
        else:
            st[0], st[1], st[2], st[3], st[4] = steps, n_found, head_q, tail_q, next_src
            return False
        log[steps, _NODE] = node
        log[steps, _SRC] = pos
        log[steps, _LTAIL] = tail_q
        step_of[node] = steps
        steps += 1
        if touch[node] > aug:
            touch[node] = aug
        for k in range(starts[node], starts[node + 1]):
            a = arcs[k]
            if not residual[a] > 0.0:
                continue
            succ = arc_head[a]
            if succ == source or parent[succ] >= 0:
                continue
            if lazy and succ < len(first_arc) and residual[first_arc[succ]] > 0.0:
                continue  # a neighbour of the source: already found
            parent[succ] = a
            found[n_found] = succ
            found_pos[succ] = n_found
            n_found += 1
            if succ == sink:
                st[0], st[1], st[2], st[3], st[4] = steps, n_found, head_q, tail_q, next_src
                st[_BREAK] = k
                return True
            queue[tail_q] = succ
            queue_pos[succ] = tail_q
            tail_q += 1


@njit(cache=True)
def _undo_discovery(node, parent, queue, found, queue_pos, found_pos):
    """Forget that ``node`` was found (its entries become holes)."""
    if parent[node] < 0:
        return
    parent[node] = -1
    if found_pos[node] >= 0 and found[found_pos[node]] == node:
        found[found_pos[node]] = -1
    if queue_pos[node] >= 0 and queue[queue_pos[node]] == node:
        queue[queue_pos[node]] = -1


@njit(cache=True)
def _arcs_in_from_logged(
    node, skip, first, starts, arcs, arc_head, rev, residual, log, step_of, steps
):
    """Earliest logged expansion (other than ``skip``'s) with residual capacity into ``node``."""
    for k in range(starts[node], starts[node + 1]):
        z = arc_head[arcs[k]]
        if z == skip or z >= len(step_of):
            continue
        if residual[rev[arcs[k]]] > 0.0 and _logged(z, step_of, log, steps) and step_of[z] < first:
            first = step_of[z]
    return first


@njit(cache=True)
def _edit_search(
    st, parent, queue, found, queue_pos, found_pos, log, step_of, path, count, dele,
    starts, arcs, arc_head, rev, residual, source, sink, lazy, src_hi,
):  # fmt: skip
    """Undo the last search as far as its augmentation (``path``, sink first) changed it.

    The augmentation emptied some arcs of the path and filled their reverses. Filled arcs run
    back along the path into nodes found before they are scanned: they change nothing. Each
    emptied arc ``u -> v`` changes the search from where ``u`` found ``v``: ``v`` is no longer
    found there, so its own expansion and every expansion with an arc into ``v`` may change.
    Where ``u`` is the super source, ``v`` is no longer its neighbour: ``v``'s slot goes, with
    the nodes that slot found (each with the expansions that could find it instead). Where
    ``v`` is the sink and its arc was the last one ``u`` scans, nothing before the end changed.
    The search is rewound to the first changed expansion, with the discoveries undone.
    """
    steps = st[_STEPS]
    first = steps
    n_del = 0
    for i in range(count):
        a = path[i]
        if residual[a] > 0.0:
            continue
        v = arc_head[a]
        u = arc_head[rev[a]]
        if v == sink:
            if st[_BREAK] != starts[u + 1] - 1 and step_of[u] < first:
                first = step_of[u]  # the sink's arc was not the last one u scans
        elif lazy and u == source:
            slot = step_of[v]
            end = log[slot + 1, _LFOUND] if slot + 1 < steps else st[_NFOUND]
            log[slot, _NODE] = -1
            for j in range(log[slot, _LFOUND], end):
                c = found[j]
                if c < 0 or c == sink:
                    continue
                if c != v and _logged(c, step_of, log, steps) and step_of[c] < first:
                    first = step_of[c]
                first = _arcs_in_from_logged(
                    c, v, first, starts, arcs, arc_head, rev, residual, log, step_of, steps
                )
                dele[n_del] = c
                n_del += 1
        else:
            if _logged(v, step_of, log, steps) and step_of[v] < first:
                first = step_of[v]
            first = _arcs_in_from_logged(
                v, -1, first, starts, arcs, arc_head, rev, residual, log, step_of, steps
            )
            dele[n_del] = v
            n_del += 1
    for i in range(n_del):
        _undo_discovery(dele[i], parent, queue, found, queue_pos, found_pos)
    _undo_discovery(sink, parent, queue, found, queue_pos, found_pos)
    n = len(parent)
    if first < steps:
        room = first <= n and log[first, _LFOUND] <= n and log[first, _LTAIL] <= n
    else:
        room = steps <= n and st[_NFOUND] <= n and st[_TAIL] <= n
    if not room:
        first = 0  # start the next search from scratch
    if first < steps:
        for j in range(log[first, _LFOUND], st[_NFOUND]):
            if found[j] >= 0:
                parent[found[j]] = -1
        st[_STEPS] = first
        st[_NFOUND] = log[first, _LFOUND]
        st[_NEXT_SRC] = log[first, _SRC] if log[first, _SRC] < src_hi else src_hi
        st[_HEAD] = log[first, _LHEAD]
        st[_TAIL] = log[first, _LTAIL]


@njit(cache=True)
def _logged(node, step_of, log, steps):
    """Whether ``node`` was expanded in the first ``steps`` expansions of the log."""
    i = step_of[node]
    return 0 <= i < steps and log[i, 0] == node


@njit(cache=True)
def _record(index, path, count, use, off, rec_arcs, count_rec):
    """Append augmentation ``index`` (its path arcs, sink first) to the pass record."""
    for i in range(count):
        if use[path[i]] > index:
            use[path[i]] = index
    count_rec[1] = index + 1
    count_rec[3] += 1
    if count_rec[0] < 0:
        return
    start = off[index]
    if index + 1 >= len(off) or start + count > len(rec_arcs):
        count_rec[0] = -1  # out of room: the record stops here and is not reused
        return
    rec_arcs[start : start + count] = path[:count]
    off[index + 1] = start + count
    count_rec[0] = index + 1


@njit(cache=True)
def replay(rec, upto, arc_head, rev, residual, flow):
    """Apply the first ``upto`` recorded augmentations, exactly as the search applied them.

    Each path's capacity is folded again from the source over the current residuals (the same
    floats, where the record still holds) and pushed as :func:`_augment` pushes it. The record's
    later entries are dropped, and its first-use and first-expansion marks from ``upto`` on.
    """
    touch, use, off, rec_arcs, count_rec = rec
    for i in range(upto):
        lo = off[i]
        hi = off[i + 1]
        c = F64_MAX
        for k in range(hi - 1, lo - 1, -1):
            r = residual[rec_arcs[k]]
            c = c if c < r else r
        for k in range(lo, hi):
            _push(rec_arcs[k], rev, residual, flow, c)
    never = np.iinfo(np.int64).max
    for v in range(len(touch)):
        if touch[v] >= upto:
            touch[v] = never
    for a in range(len(use)):
        if use[a] >= upto:
            use[a] = never
    count_rec[0] = upto
    count_rec[1] = upto
    count_rec[2] += upto


@njit(cache=True)
def unchanged_prefix(rec, old_cap, new_cap, arc_head, rev, source):
    """How many recorded augmentations the pass on ``new_cap`` repeats (its first searches).

    The two passes differ only in the arcs whose capacity differs. Before an arc is used by a
    path its residual is its capacity, so one whose capacity changed but stays positive changes
    nothing before its first use; one that gained or lost all capacity changes every search
    that expands its tail (each scans it), from the first that did. An arc from the super
    source that gained or lost capacity changes every search (each reads the source's row).
    """
    touch, use, _off, _rec_arcs, count_rec = rec
    upto = count_rec[0]
    if upto < 0:
        return 0
    for a in range(len(old_cap)):
        if old_cap[a] == new_cap[a]:
            continue
        if (old_cap[a] > 0.0) != (new_cap[a] > 0.0):
            tail = arc_head[rev[a]]
            if tail == source:
                return 0
            if touch[tail] < upto:
                upto = touch[tail]
        if use[a] < upto:
            upto = use[a]
        if use[rev[a]] < upto:
            upto = use[rev[a]]
    return upto
