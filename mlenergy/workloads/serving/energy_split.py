"""The energy of each request: the power timeline split across the requests in flight.

The timeline is a sequence of samples ``(t_k, P_k)``: ``P_k`` watts held over ``(t_{k-1}, t_k]``
(the mean power over the sampling period, as Zeus's counters and the samplers give it). In each
period the energy ``P_k x (t_k - t_{k-1})`` is cut into the part during which at least one
request was in flight and the rest (idle gaps, kept apart). The in-flight part goes to the
requests in flight in proportion to the tokens each produced in that period: every output token
counts for the request that received it, and a request's prompt tokens count for it spread
evenly over its prefill (from sending to its first token). In a period where no request produced
a token, the in-flight part is split by the time each request was in flight.

By construction the requests' energies add up to the timeline's energy over the time at least one
request was in flight (:attr:`SplitResult.attributed_j`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mlenergy.workloads.serving.timing import RequestTiming


@dataclass(frozen=True)
class SplitResult:
    """Per-request energies and what they add up to.

    Attributes:
        energy_j: Energy of each request in joules, in the order given.
        attributed_j: Their sum: the timeline's energy over the in-flight time, joules.
        unattributed_j: Timeline energy while no request was in flight, joules.
        in_flight_s: Seconds during which at least one request was in flight.
    """

    energy_j: list[float]
    attributed_j: float
    unattributed_j: float
    in_flight_s: float


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, cur_a, cur_b = 0.0, None, None
    for a, b in sorted(intervals):
        if cur_b is None or a > cur_b:
            if cur_b is not None:
                total += cur_b - cur_a
            cur_a, cur_b = a, b
        else:
            cur_b = max(cur_b, b)
    if cur_b is not None:
        total += cur_b - cur_a
    return total


def split_energy(
    requests: Sequence[RequestTiming],
    samples: Sequence[tuple[float, float]],
    start_s: float | None = None,
) -> SplitResult:
    """Split the energy of a power timeline across requests by the tokens they produced.

    Args:
        requests: The requests (failed ones get their share of the time they were in flight).
        samples: ``(unix_time_s, watts)`` samples, each the mean power since the previous one.
        start_s: Unix time at which the first sample's period begins; default: the first
            sample only opens the timeline (its own period is unknown and not counted).

    Returns:
        The split.
    """
    pts = sorted(samples)
    if start_s is not None:
        pts = [(start_s, pts[0][1] if pts else 0.0), *[p for p in pts if p[0] > start_s]]
    n = len(requests)
    spans = [(r.sent_s, r.end_s if r.end_s is not None else r.sent_s) for r in requests]
    starts = np.array([s for s, _ in spans], dtype=float)
    ends = np.array([e for _, e in spans], dtype=float)
    token_times = [np.asarray(r.token_times_s(), dtype=float) for r in requests]
    prefill = [
        (r.sent_s, r.first_token_s, float(r.prompt_tokens)) if r.first_token_s is not None else None
        for r in requests
    ]
    energy = np.zeros(n)
    attributed = unattributed = in_flight = 0.0
    for (a, _), (b, watts) in itertools.pairwise(pts):
        if b <= a:
            continue
        period_j = watts * (b - a)
        overlap = np.clip(np.minimum(ends, b) - np.maximum(starts, a), 0.0, None)
        live = np.nonzero(overlap > 0)[0]
        if live.size == 0:
            unattributed += period_j
            continue
        covered = _union_length([(max(starts[i], a), min(ends[i], b)) for i in live.tolist()])
        share_j = period_j * covered / (b - a)
        weights = np.zeros(n)
        for i in live.tolist():
            tt = token_times[i]
            weights[i] = np.count_nonzero((tt > a) & (tt <= b))
            if prefill[i] is not None:
                p0, p1, ptok = prefill[i]
                if p1 > p0:
                    weights[i] += ptok * max(0.0, min(p1, b) - max(p0, a)) / (p1 - p0)
                elif a < p1 <= b:
                    weights[i] += ptok
        if weights.sum() <= 0:
            weights = overlap
        energy += share_j * weights / weights.sum()
        attributed += share_j
        unattributed += period_j - share_j
        in_flight += covered
    return SplitResult(
        energy_j=energy.tolist(),
        attributed_j=attributed,
        unattributed_j=unattributed,
        in_flight_s=in_flight,
    )


def timeline_energy_j(
    samples: Sequence[tuple[float, float]], start_s: float, end_s: float
) -> float:
    """Energy in joules of the timeline between two unix times (same convention as above)."""
    pts = sorted(samples)
    total = 0.0
    for (a, _), (b, watts) in itertools.pairwise(pts):
        lo, hi = max(a, start_s), min(b, end_s)
        if hi > lo:
            total += watts * (hi - lo)
    return total
