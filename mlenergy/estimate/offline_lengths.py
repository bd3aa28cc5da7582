"""Output lengths of an offline job: the stopping rate under a cap, and where the tokens fall.

Pieces of :mod:`~mlenergy.estimate.offline`: with a generation cap ``M`` (``max_output_tokens``
>= the mean ``O``), sequences stop at end-of-sequence with a constant probability per token
(:func:`stop_rate`), and those still running at ``M`` stop there; :func:`decode_segments` cuts
a job's decode steps into segments of the sequences still alive, :func:`ride_tokens` counts the
tokens decoded while the prompts are still being prefilled. Lengths in tokens.
"""

from __future__ import annotations

import numpy as np

SEGMENTS = 16
"""Decode segments per job (each evaluated at its own batch and context)."""


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
        pos = mid > 0
        mean = np.where(pos, -np.expm1(-mid * m) / np.where(pos, mid, 1.0), m)
        above = mean > o
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return np.where(m <= o, 0.0, 0.5 * (lo + hi))


def job_stop_rate(output_tokens: np.ndarray, max_output_tokens: np.ndarray) -> np.ndarray:
    """Each job's :func:`stop_rate`: 0 without a cap (NaN), else the capped mean's rate.

    Args:
        output_tokens: Mean output length ``O`` (tokens).
        max_output_tokens: Generation cap ``M`` (tokens; NaN: every sequence generates ``O``).
    """
    o = np.asarray(output_tokens, float)
    m = np.broadcast_to(np.asarray(max_output_tokens, float), o.shape)
    lam = np.zeros_like(o)
    # Without a cap, or with one at or below the mean, every sequence runs to its end: 0.
    # The search runs on the other rows alone (each row's rate is its own).
    idx = np.flatnonzero(~np.isnan(m) & ~(m <= o))
    if len(idx):
        lam[idx] = stop_rate(o[idx], m[idx])
    return lam


def decode_segments(
    output_tokens: np.ndarray,
    max_output_tokens: np.ndarray,
    k: int = SEGMENTS,
    lam: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Alive fraction, steps and mid position of each decode segment (rows x ``k``).

    Args:
        output_tokens: Mean output length per job (tokens).
        max_output_tokens: Generation cap per job (tokens; NaN: every sequence generates
            the mean).
        k: Segments per job.
        lam: The jobs' :func:`job_stop_rate` when already known (default: computed).

    Returns:
        ``(alive, steps, position)``: mean share of the job's sequences decoding in the
        segment, its decode steps, and its mid position (tokens generated so far). Summed
        over segments, ``alive * steps`` is the mean output length.
    """
    o = np.asarray(output_tokens, float)
    capped = ~np.isnan(max_output_tokens)
    horizon = np.where(capped, max_output_tokens, o)
    lam = job_stop_rate(o, max_output_tokens) if lam is None else lam
    edges = horizon[:, None] * np.linspace(0.0, 1.0, k + 1)[None, :]
    a, b = edges[:, :-1], edges[:, 1:]
    steps = b - a
    lam_c = lam[:, None]
    # Sequences alive at position t: exp(-lam t); its mean over [a, b).
    safe = np.where(lam_c > 0, lam_c, 1.0)
    mass = np.where(lam_c > 0, (np.exp(-lam_c * a) - np.exp(-lam_c * b)) / safe, steps)
    alive = mass / np.where(steps > 0, steps, 1.0)
    return alive, steps, 0.5 * (a + b)


def ride_tokens(
    prefill_steps: np.ndarray,
    output_tokens: np.ndarray,
    max_output_tokens: np.ndarray,
    lam: np.ndarray | None = None,
) -> np.ndarray:
    """Mean tokens a sequence decodes while the job's prompts are still being prefilled.

    The prompts finish evenly over the ``S`` prefill steps, so a sequence's prompt finishes
    ``u`` steps before the last one with ``u`` uniform on ``[0, S]``, and it decodes
    ``min(u, L)`` tokens in them (``L``: its output length). Equal lengths ``L = O`` give
    ``S / 2`` (``S <= O``) or ``O - O^2 / (2 S)``; lengths stopping at a constant rate
    ``lam`` per token, capped at ``M`` (:func:`stop_rate`), the mean of
    ``(1 - exp(-lam min(u, M))) / lam``.

    Args:
        prefill_steps: Steps ``S`` of the prefill phase (>= 1).
        output_tokens: Mean output length ``O`` (tokens).
        max_output_tokens: Generation cap ``M`` (tokens; NaN: every sequence generates ``O``).
        lam: The jobs' :func:`job_stop_rate` when already known (default: computed).
    """
    s = np.asarray(prefill_steps, float)
    o = np.asarray(output_tokens, float)
    capped = ~np.isnan(max_output_tokens)
    m = np.where(capped, max_output_tokens, o)
    lam = job_stop_rate(o, max_output_tokens) if lam is None else lam
    length = np.where(capped, m, o)  # the length every sequence reaches when lam = 0
    equal = np.where(s <= length, 0.5 * s, length - length * length / (2.0 * s))
    safe = np.where(lam > 0, lam, 1.0)
    a = np.minimum(s, m)
    grow = a / safe + np.expm1(-safe * a) / (safe * safe)  # integral of G over [0, a]
    flat = np.maximum(s - m, 0.0) * -np.expm1(-safe * m) / safe
    return np.where(lam > 0, (grow + flat) / s, equal)
