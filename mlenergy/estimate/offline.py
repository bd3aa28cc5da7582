"""Offline batch jobs: a fixed set of requests started together, the batch shrinking as they end.

An offline job (an evaluation, a data-generation run) starts ``N`` requests at once (``N`` is
the estimate's ``batch_size``): their prompts are prefilled, then the sequences decode
together and each leaves when it ends, so the batch shrinks over time. The steady-state
serving model (:mod:`~mlenergy.estimate.physics`) is evaluated on the phases of such a job:

* **prefill**: the ``N`` prompts cost what ``N`` prompts cost in steady-state serving at
  batch ``N`` (their compute, and the weight reads they share with decode steps);
* **decode**: the job's decode steps are cut into :data:`SEGMENTS` segments of equal length;
  each is a decode-only step (no prompts arriving) at the number of sequences still alive
  and their mean context (prompt plus tokens generated so far).

Output lengths: with only the mean output length ``O`` given, every sequence generates
``O`` tokens. With a generation cap ``M`` (``max_output_tokens`` >= ``O``), sequences stop at
end-of-sequence with a constant probability per token, and those still running at ``M``
stop there: the stopping rate is the one that makes the mean ``O`` (``M = O``: all run to the
cap). Pipeline parallelism without micro-batching runs one stage at a time: steps take
``pp`` times one stage's time and each GPU idles the rest.

A job of more requests than decode together (the engine's ``max_num_seqs``, or what the KV
cache holds) runs in phases (:func:`_combine`): waves of requests started together when all
lengths are equal, else steady-state serving at the cap followed by the drain of the last
batch.
"""

from __future__ import annotations

import numpy as np

from mlenergy.estimate.coefficients import Coefficients
from mlenergy.estimate.physics import predict

SEGMENTS = 16
"""Decode segments per job (each evaluated at its own batch and context)."""
_NO_PROMPTS = 1e12
"""An output length so long that no prompt arrives during a decode segment."""
BREAKDOWN = ("energy_compute_j", "energy_memory_j", "energy_static_j", "energy_overhead_j")


def stop_rate(output_tokens: np.ndarray, max_output_tokens: np.ndarray) -> np.ndarray:
    """Per-token stopping rate ``lam`` whose capped mean length is ``output_tokens``.

    Lengths are exponential with rate ``lam`` cut at the cap ``M``:
    ``mean = (1 - exp(-lam M)) / lam``. ``M = O`` gives 0 (every sequence runs to the cap).

    Args:
        output_tokens: Mean output length ``O`` (tokens).
        max_output_tokens: Cap ``M`` >= ``O`` (tokens).
    """
    o, m = np.asarray(output_tokens, float), np.asarray(max_output_tokens, float)
    lo, hi = np.zeros_like(o), np.full_like(o, 50.0) / np.maximum(o, 1e-9)
    for _ in range(60):  # the capped mean falls monotonically with the rate
        mid = 0.5 * (lo + hi)
        mean = np.where(mid > 0, -np.expm1(-mid * m) / np.where(mid > 0, mid, 1.0), m)
        lo, hi = np.where(mean > o, mid, lo), np.where(mean > o, hi, mid)
    return np.where(m <= o, 0.0, 0.5 * (lo + hi))


def decode_segments(
    output_tokens: np.ndarray, max_output_tokens: np.ndarray, k: int = SEGMENTS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Alive fraction, steps and mid position of each decode segment (rows x ``k``).

    Args:
        output_tokens: Mean output length per job (tokens).
        max_output_tokens: Generation cap per job (tokens; NaN: every sequence generates
            the mean).
        k: Segments per job.

    Returns:
        ``(alive, steps, position)``: mean share of the job's sequences decoding in the
        segment, its decode steps, and its mid position (tokens generated so far). Summed
        over segments, ``alive * steps`` is the mean output length.
    """
    o = np.asarray(output_tokens, float)
    capped = ~np.isnan(max_output_tokens)
    horizon = np.where(capped, max_output_tokens, o)
    lam = np.where(capped, stop_rate(o, np.where(capped, max_output_tokens, o)), 0.0)
    edges = horizon[:, None] * np.linspace(0.0, 1.0, k + 1)[None, :]
    a, b = edges[:, :-1], edges[:, 1:]
    steps = b - a
    lam_c = lam[:, None]
    # Sequences alive at position t: exp(-lam t); its mean over [a, b).
    safe = np.where(lam_c > 0, lam_c, 1.0)
    mass = np.where(lam_c > 0, (np.exp(-lam_c * a) - np.exp(-lam_c * b)) / safe, steps)
    alive = mass / np.where(steps > 0, steps, 1.0)
    return alive, steps, 0.5 * (a + b)


def predict_offline(
    f: dict[str, np.ndarray],
    c: Coefficients,
    max_output_tokens: np.ndarray,
    requests: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """:func:`~mlenergy.estimate.physics.predict` for offline jobs (see the module docstring).

    Args:
        f: Feature arrays; ``batch`` is the number of requests decoding together (the job's
            requests, or the engine's concurrency cap when the job has more), ``output_tokens``
            their mean output length.
        c: Coefficients.
        max_output_tokens: Generation cap per row (tokens; NaN: none).
        requests: Requests of the job per row (default: ``batch``). More requests than
            ``batch`` run in phases (:func:`_combine`).

    Returns:
        The keys of :func:`~mlenergy.estimate.physics.predict` for the whole job:
        throughput and power are job means, ``step_s`` the mean decode step, ``t_prefill_s``
        the prefill time spread per decode step (as in serving), plus ``job_duration_s`` and
        ``prefill_duration_s`` (wall time of the job and of its prefill, seconds).
    """
    serving = predict(f, c)
    together = _drain(f, c, max_output_tokens, serving)
    if requests is None:
        return together
    jobs, width, out_len = np.asarray(requests, float), f["batch"], f["output_tokens"]
    # Equal lengths (no cap, or the cap is the mean): the batch runs in waves of ``width``
    # requests started together, the last wave holding the rest.
    waves = np.floor(jobs / width + 1e-9)
    rest = jobs - waves * width
    f_rest = {**f, "batch": np.maximum(rest, 1e-6)}
    last = _drain(f_rest, c, max_output_tokens, predict(f_rest, c))
    in_waves = _combine(together, [_job(together, waves), _job(last, (rest > 1e-6) * 1.0)])
    # Varying lengths: a waiting request starts whenever a sequence ends.
    queued = np.maximum(jobs - width, 0.0) * out_len
    in_queue = _combine(together, [_served(serving, queued), _job(together, np.ones_like(jobs))])
    equal = np.isnan(max_output_tokens) | (max_output_tokens <= out_len)
    return {k: np.where(equal, in_waves[k], in_queue[k]) for k in in_queue}


MIXED_KEYS = (
    "energy_per_token_j",
    "energy_prefill_j",
    "energy_decode_j",
    "step_s",
    "t_prefill_s",
    *BREAKDOWN,
)
"""Per-token figures of a job of several phases, mixed by the phases' output tokens."""

Phase = tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]
"""One phase of a job: output tokens, wall time, prefill time (s) and its per-token figures."""


def _job(job: dict[str, np.ndarray], times: np.ndarray) -> Phase:
    """``times`` runs of a job of requests started together (:func:`_drain`)."""
    tokens = job["throughput_tokens_per_s"] * job["job_duration_s"] * times
    return tokens, job["job_duration_s"] * times, job["prefill_duration_s"] * times, job


def _served(serving: dict[str, np.ndarray], tokens: np.ndarray) -> Phase:
    """Steady-state serving (:func:`~mlenergy.estimate.physics.predict`) of ``tokens``."""
    t = tokens / serving["throughput_tokens_per_s"]
    return tokens, t, serving["t_prefill_s"] * t / serving["step_s"], serving


def _combine(base: dict[str, np.ndarray], phases: list[Phase]) -> dict[str, np.ndarray]:
    """One job out of phases run one after the other (keys of :func:`_drain`).

    An offline job of more requests than decode together (beyond ``max_num_seqs`` or the
    KV cache) runs in phases: with equal output lengths, waves of requests started together
    (the last holding the rest); with varying lengths, steady-state serving at the cap (a
    waiting request starts whenever a sequence ends, chunked prefill included) for the
    requests beyond the last ones, which then drain as a job started together (their
    staggered starts are not modelled, so the drain keeps more sequences together than it
    would).
    """
    tokens = sum(p[0] for p in phases)
    t_total = sum(p[1] for p in phases)
    out = dict(base)
    for name in MIXED_KEYS:
        out[name] = sum(p[3][name] * p[0] for p in phases) / tokens
    out["throughput_tokens_per_s"] = tokens / t_total
    out["avg_power_w"] = out["energy_per_token_j"] * tokens / t_total
    out["job_duration_s"] = t_total
    out["prefill_duration_s"] = sum(p[2] for p in phases)
    active = [p for p in phases if p[3] is not base]
    for p in active:
        out["power_limit_infeasible"] = out["power_limit_infeasible"] | (
            p[3]["power_limit_infeasible"] & (p[0] > 0)
        )
        out["min_clock_power_w"] = np.maximum(out["min_clock_power_w"], p[3]["min_clock_power_w"])
    return out


def _drain(
    f: dict[str, np.ndarray],
    c: Coefficients,
    max_output_tokens: np.ndarray,
    serving: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """The offline job of ``batch`` requests started together (the module docstring)."""
    n_rows = len(f["batch"])
    alive, steps, position = decode_segments(f["output_tokens"], max_output_tokens)
    k = alive.shape[1]
    seg = {name: np.repeat(v, k) for name, v in f.items()}
    seg["batch"] = np.maximum(np.repeat(f["batch"], k) * alive.ravel(), 1e-6)
    seg["output_tokens"] = np.full(n_rows * k, _NO_PROMPTS)
    seg["context"] = np.repeat(f["input_tokens"], k) + position.ravel()
    dec = {name: v.reshape(n_rows, k) for name, v in predict(seg, c).items()}
    pp = f["pp"]
    jobs, out_len = f["batch"], f["output_tokens"]
    tokens = jobs * out_len
    # Prefill: the job's prompts cost what they cost in steady-state serving.
    t_pf = serving["t_prefill_s"] * out_len * pp
    share_pf = np.clip(serving["energy_prefill_j"] / serving["energy_per_token_j"], 0.0, 1.0)
    idle_w = serving["energy_static_j"] * serving["throughput_tokens_per_s"]  # all GPUs
    e_pf = serving["energy_prefill_j"] * tokens + idle_w * t_pf * (1.0 - 1.0 / pp)
    # Decode: each segment's steps at its batch; a pipeline without micro-batching runs one
    # stage at a time, so a step takes pp stages and each GPU idles the rest.
    t_seg = steps * dec["step_s"] * pp[:, None]
    idle_seg = dec["energy_static_j"] * dec["throughput_tokens_per_s"]
    e_seg = (dec["avg_power_w"] - idle_seg) * t_seg / pp[:, None] + idle_seg * t_seg
    t_total = t_pf + t_seg.sum(axis=1)
    e_total = e_pf + e_seg.sum(axis=1)
    seg_tokens = jobs[:, None] * alive * steps
    energy = e_total / tokens
    out = {
        "throughput_tokens_per_s": tokens / t_total,
        "avg_power_w": e_total / t_total,
        "energy_per_token_j": energy,
        "step_s": t_seg.sum(axis=1) / np.maximum(steps.sum(axis=1), 1e-12),
        "clock_mhz": dec["clock_mhz"][:, 0],
        "energy_prefill_j": e_pf / tokens,
        "energy_decode_j": e_seg.sum(axis=1) / tokens,
        "t_prefill_s": t_pf / out_len,
        "job_duration_s": t_total,
        "prefill_duration_s": t_pf,
        "power_limit_infeasible": serving["power_limit_infeasible"]
        | dec["power_limit_infeasible"].any(axis=1),
        "min_clock_power_w": np.maximum(
            serving["min_clock_power_w"], dec["min_clock_power_w"].max(axis=1)
        ),
    }
    # Breakdown: the prefill share split as in serving, the decode share as its segments'.
    for name in BREAKDOWN:
        per_tok = (
            serving[name] * share_pf * tokens + (dec[name] * seg_tokens).sum(axis=1)
        ) / tokens
        out[name] = per_tok
    # The idle GPUs of a pipeline without micro-batching: static energy.
    extra_idle = (idle_w * t_pf + (idle_seg * t_seg).sum(axis=1)) * (1.0 - 1.0 / pp) / tokens
    out["energy_static_j"] = out["energy_static_j"] + extra_idle
    return out


def predict_modes(
    f: dict[str, np.ndarray],
    c: Coefficients,
    offline: np.ndarray,
    max_output_tokens: np.ndarray,
    requests: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Serving rows through :func:`predict`, offline rows through :func:`predict_offline`.

    Args:
        f: Feature arrays.
        c: Coefficients.
        offline: Which rows are offline jobs.
        max_output_tokens: Generation cap per row (NaN: none; serving rows ignore it).
        requests: Requests of each offline job (default: ``batch``; more queue).
    """
    out = predict(f, c)
    idx = np.flatnonzero(offline)
    if len(idx):
        jobs = None if requests is None else np.asarray(requests, float)[idx]
        sub_f = {k: v[idx] for k, v in f.items()}
        sub = predict_offline(sub_f, c, max_output_tokens[idx], jobs)
        for key, arr in sub.items():
            if key in out:
                merged = out[key].copy()
                merged[idx] = arr
                out[key] = merged
    return out
