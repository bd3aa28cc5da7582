"""The energy of each request: the measured power split by what each request made the GPU do.

**Power.** The samples are Zeus's: ``(t_k, P_k)`` with ``P_k`` watts held from ``t_k`` until
the next sample (:func:`timeline_energy_j`); no resampling. Period ``k`` is ``[t_k, t_{k+1})``
and holds ``E_k = P_k (t_{k+1} - t_k)`` joules.

**What each request did, and when** (from the client's timestamps and what the server says):

* it *waited* in the server's queue from sending until it was admitted
  (:mod:`~.server_queue`), which costs nothing;
* it *prefilled* its prompt from admission to its first token (prompt tokens spread evenly);
* it *decoded* each later output token over the gap since its previous token (one token per
  inter-token interval, so a token's work sits in the step that made it, not after it);
* while *in the server* (admitted, not ended) it shared whatever the server spends per unit
  time or per step with the other requests in the server at that moment (``1 / n(t)`` each).

**How much each kind of work costs** is read from the run itself: a non-negative least-squares
fit, over every period, of the period's energy on its busy seconds, its decode steps (decode
tokens over the mean number of decoders), its decode tokens, its prompt tokens and its idle
seconds. No cost is assumed; on a server whose prompt tokens are cheap the fit says so.

**The split.** Each period's energy, less the fitted idle part of its gaps, goes to the requests
in it in proportion to their fitted work: shared seconds and steps by ``1 / n(t)``, decode and
prompt tokens by the tokens each processed in the period. By construction the requests' energies
add up to the timeline's energy over the time at least one request was in the server
(:attr:`SplitResult.attributed_j`). Failed requests are not split (a level with a failure is not
a measurement).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mlenergy.workloads.serving.server_queue import server_spans
from mlenergy.workloads.serving.timing import RequestTiming

POOL_S = 1.0
"""Seconds of samples whose energy is shared out together (see the module docstring)."""

FEATURES = ("step_j", "decode_token_j", "prompt_token_j", "idle_w")
"""Fitted costs: per decode step (J), per decode token (J), per prompt token (J), and the power
drawn at all times (W: the measured idle power when given)."""


@dataclass(frozen=True)
class SplitResult:
    """Per-request energies and what they add up to.

    Attributes:
        energy_j: Energy of each request in joules, in the order given.
        attributed_j: Their sum: the timeline's energy while a request was in the server, J.
        unattributed_j: Timeline energy while no request was in the server, joules.
        in_flight_s: Seconds during which at least one request was in the server.
        queued_s: Seconds each request spent in the server's queue, in the order given.
        costs: The fitted costs, named as :data:`FEATURES` (``{}`` when nothing was fitted).
    """

    energy_j: list[float]
    attributed_j: float
    unattributed_j: float
    in_flight_s: float
    queued_s: list[float]
    costs: dict[str, float]


@dataclass
class _Activity:
    """One request's cumulative work at the period boundaries ``lo .. hi`` (inclusive)."""

    lo: int
    hi: int
    share_s: np.ndarray  # seconds in the server, each divided by the requests in it then
    decode_s: np.ndarray  # seconds between the first token and the end
    decode_tokens: np.ndarray  # output tokens after the first, each over its inter-token gap
    prompt_tokens: np.ndarray  # prompt tokens, spread from admission to the first token


def _end_s(r: RequestTiming) -> float:
    """When a finished request ended (s); the split takes finished requests only."""
    if r.end_s is None:
        raise ValueError("the energy split takes finished requests only")
    return float(r.end_s)


def _occupancy(spans: Sequence[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Times, cumulative busy seconds and cumulative ``1/n`` seconds at every span edge."""
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    times, busy, share = [edges[0][0]], [0.0], [0.0]
    n = 0
    for t, step in edges:
        dt = t - times[-1]
        busy.append(busy[-1] + (dt if n > 0 else 0.0))
        share.append(share[-1] + (dt / n if n > 0 else 0.0))
        times.append(t)
        n += step
    return np.array(times), np.array(busy), np.array(share)


def _activity(
    r: RequestTiming,
    admitted: float,
    prefill_start: float,
    bounds: np.ndarray,
    occ: tuple[np.ndarray, ...],
) -> _Activity:
    end, first = _end_s(r), r.first_token_s
    if first is None:
        raise ValueError("the energy split takes requests that produced a token")
    lo = max(0, int(np.searchsorted(bounds, admitted, side="right")) - 1)
    hi = min(len(bounds) - 1, int(np.searchsorted(bounds, end, side="left")))
    b = bounds[lo : hi + 1]
    times, _, share = occ
    inside = np.clip(b, admitted, end)
    share_s = np.interp(inside, times, share) - np.interp(admitted, times, share)
    decode_s = np.clip(b, first, end) - first
    tokens = np.asarray(r.token_times_s(), dtype=float)
    decode = (
        np.interp(b, tokens, np.arange(tokens.size, dtype=float), left=0.0, right=tokens.size - 1)
        if tokens.size > 1
        else np.zeros_like(b)
    )
    if first > prefill_start:
        prompt = r.prompt_tokens * np.clip((b - prefill_start) / (first - prefill_start), 0, 1)
    else:
        prompt = r.prompt_tokens * (b >= first).astype(float)
    return _Activity(lo, hi, share_s, decode_s, decode, prompt)


def _fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares of ``y`` on the columns of ``x`` (scaled for conditioning)."""
    # lazy: scipy.optimize costs ~0.5 s at start-up, which `mlenergy bench --help` would pay
    from scipy.optimize import nnls

    scale = np.linalg.norm(x, axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls(x / scale, y)
    return coef / scale


def split_energy(
    requests: Sequence[RequestTiming],
    samples: Sequence[tuple[float, float]],
    *,
    server_cap: int | None = None,
    idle_w: float | None = None,
    pool_s: float = POOL_S,
) -> SplitResult:
    """Split the energy of a power timeline across requests (see the module docstring).

    Args:
        requests: Finished requests (``first_token_s`` and ``end_s`` set).
        samples: ``(unix_time_s, watts)``, each held until the next sample.
        server_cap: The server's cap (:func:`~.server_queue.infer_cap`); ``None``: requests
            run from the moment they are sent.
        idle_w: Power the scope draws at all times, watts: the idle power measured before
            the run; ``None``: the lowest sampled power.
        pool_s: Seconds of periods whose energy is shared out together.

    Returns:
        The split.
    """
    pts = sorted(samples)
    n = len(requests)
    if n == 0 or len(pts) < 2:
        unattributed = timeline_energy_j(pts, -np.inf, np.inf)
        return SplitResult([0.0] * n, 0.0, unattributed, 0.0, [0.0] * n, {})
    bounds = np.array([t for t, _ in pts])
    dt = np.diff(bounds)
    energy = np.array([p for _, p in pts])[:-1] * dt
    spans = server_spans(requests, server_cap)
    occ = _occupancy([(a, _end_s(r)) for a, r in zip(spans.admitted_s, requests, strict=True)])
    busy = np.diff(np.interp(bounds, occ[0], occ[1]))
    acts = [
        _activity(r, a, p, bounds, occ)
        for r, a, p in zip(requests, spans.admitted_s, spans.prefill_start_s, strict=True)
    ]
    periods = len(dt)

    def total(values: list[np.ndarray]) -> np.ndarray:
        out = np.zeros(periods)
        for a, v in zip(acts, values, strict=True):
            np.add.at(out, np.arange(a.lo, a.hi), v)
        return out

    share_s = [np.diff(a.share_s) for a in acts]
    decode = [np.diff(a.decode_tokens) for a in acts]
    prompt = [np.diff(a.prompt_tokens) for a in acts]
    decoders = np.divide(
        total([np.diff(a.decode_s) for a in acts]), dt, out=np.zeros(periods), where=dt > 0
    )
    decode_total = total(decode)
    steps = np.divide(decode_total, decoders, out=np.zeros(periods), where=decoders > 1e-9)
    x = np.column_stack([steps, decode_total, total(prompt), dt])
    if idle_w is None:
        idle_w = float(np.min(energy[dt > 0] / dt[dt > 0])) if np.any(dt > 0) else 0.0
    coef = _fit_costs(x, energy, dt > 0, idle_w)
    idle = coef[3]
    predicted_busy = x[:, :3] @ coef[:3] + idle * busy
    predicted = predicted_busy + idle * np.clip(dt - busy, 0.0, None)
    fallback = np.divide(busy, dt, out=np.zeros(periods), where=dt > 0)
    share = energy * np.divide(predicted_busy, predicted, out=fallback, where=predicted > 0)
    share = np.where(busy > 0, share, 0.0)
    per_share_s = np.divide(
        idle * busy + coef[0] * steps, busy, out=np.zeros(periods), where=busy > 0
    )
    weights = [
        per_share_s[a.lo : a.hi] * u + coef[1] * d + coef[2] * p
        for a, u, d, p in zip(acts, share_s, decode, prompt, strict=True)
    ]
    block = np.floor((bounds[:-1] - bounds[0]) / pool_s).astype(int)
    blocks = int(block[-1]) + 1

    def pooled(values: np.ndarray) -> np.ndarray:
        return np.bincount(block, values, minlength=blocks)[block]

    weight_sum = pooled(total(weights))
    time_sum = pooled(total(share_s))  # a block where the fit gives nobody work: by time
    share_pool = pooled(share)
    per_weight = np.divide(share_pool, weight_sum, out=np.zeros(periods), where=weight_sum > 0)
    per_time = np.where(
        weight_sum > 0,
        0.0,
        np.divide(share_pool, time_sum, out=np.zeros(periods), where=time_sum > 0),
    )
    out = [
        float(per_weight[a.lo : a.hi] @ w + per_time[a.lo : a.hi] @ u)
        for a, w, u in zip(acts, weights, share_s, strict=True)
    ]
    attributed = float(sum(out))
    return SplitResult(
        energy_j=out,
        attributed_j=attributed,
        unattributed_j=float(energy.sum()) - attributed,
        in_flight_s=float(busy.sum()),
        queued_s=[a - r.sent_s for a, r in zip(spans.admitted_s, requests, strict=True)],
        costs={name: float(c) for name, c in zip(FEATURES, coef, strict=True)},
    )


def _fit_costs(x: np.ndarray, energy: np.ndarray, rows: np.ndarray, idle_w: float) -> np.ndarray:
    """Costs per step, decode token and prompt token (J), fitted >= 0, then ``idle_w`` (W)."""
    if rows.sum() < x.shape[1]:
        return np.array([0.0, 0.0, 0.0, idle_w])
    return np.append(_fit(x[rows, :3], energy[rows] - idle_w * x[rows, 3]), idle_w)


def timeline_energy_j(
    samples: Sequence[tuple[float, float]], start_s: float, end_s: float
) -> float:
    """Energy in joules of the timeline between two unix times (each sample held forward)."""
    pts = sorted(samples)
    total = 0.0
    for (a, watts), (b, _) in itertools.pairwise(pts):
        lo, hi = max(a, start_s), min(b, end_s)
        if hi > lo:
            total += watts * (hi - lo)
    return total
