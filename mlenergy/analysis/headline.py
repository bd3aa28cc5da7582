"""The shared rules behind every view's headline serving figures (one place each).

* **Which phase gives a run's figures** (:data:`HEADLINE_PHASES`): the whole-request phase, as
  ML.ENERGY's reference reports it (prefill and decode together over the steady-state window),
  else the decode phase for runs that measured only that. Energy per token, throughput and
  power all come from the same phase. Other phases are shown under their own labels.
* **Energy per response** (:func:`energy_per_response_j`): energy per output token times the
  exact mean output length (never a rounded count).
* **Meeting a latency deadline** (:func:`meets_deadline`): the median inter-token latency is at
  most the deadline; a configuration with no latency cannot be judged and does not meet it,
  unless the view asks to keep such rows visible (``unknown_meets=True``, said where used).
* **The best configuration** (:func:`lowest_energy_positions`): within each group (model x
  hardware x task), the lowest energy per output token; rows with no energy figure only when
  the group has nothing else; ties keep the first row.

Used by the leaderboard (:mod:`mlenergy.leaderboard.query`), the measured study
(:mod:`mlenergy.studies.measured`) and the power-cap planner
(:mod:`mlenergy.optimize.candidates`, :mod:`mlenergy.optimize.power_cap`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from mlenergy.records import Phase, PhaseResult, RunRecord

HEADLINE_PHASES: tuple[Phase, ...] = (Phase.REQUEST, Phase.DECODE)
"""Phases that give a run's headline figures, first found wins."""


def headline_phase(run: RunRecord) -> PhaseResult | None:
    """The phase whose figures a run's headline shows (:data:`HEADLINE_PHASES`), if any."""
    for phase in HEADLINE_PHASES:
        found = run.phase(phase)
        if found is not None and found.energy_per_token_j is not None:
            return found
    return None


def headline_column(frame: pd.DataFrame, field: str) -> pd.Series:
    """A flat runs frame's headline ``field`` (``energy_per_token_j``...): request, else decode.

    Args:
        frame: Rows with ``<phase>_<field>`` columns (missing ones read as NaN).
        field: ``energy_per_token_j``, ``throughput_tokens_per_s`` or ``avg_power_w``.
    """
    out = pd.Series(np.nan, index=frame.index, dtype=float)
    for phase in reversed(HEADLINE_PHASES):
        col = f"{phase.value}_{field}"
        if col in frame.columns:
            values = pd.to_numeric(frame[col], errors="coerce").astype(float)
            out = values.where(values.notna(), out)
    return out


def headline_sql(field: str) -> str:
    """The same rule in SQL over the store's flat columns: ``coalesce(request_x, decode_x)``."""
    return "coalesce(" + ", ".join(f"{p.value}_{field}" for p in HEADLINE_PHASES) + ")"


def energy_per_response_j(energy_per_token_j: Any, mean_output_tokens: Any) -> Any:
    """Energy per output token x the exact mean output length (J); NaN where length <= 0."""
    length = np.asarray(mean_output_tokens, dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):  # 1e308 J x tokens is inf, not a warning
        return np.asarray(energy_per_token_j, dtype=float) * np.where(length > 0, length, np.nan)


def meets_deadline(itl_ms: Any, limit_ms: float, unknown_meets: bool = False) -> np.ndarray:
    """Whether each median inter-token latency (ms) is within ``limit_ms``.

    Args:
        itl_ms: Median inter-token latencies, milliseconds (NaN: not recorded).
        limit_ms: The deadline, milliseconds.
        unknown_meets: Count a missing latency as meeting it (a filter keeping such rows in
            view); by default it does not.
    """
    itl = np.asarray(itl_ms, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(itl), unknown_meets, itl <= limit_ms)


def lowest_energy_positions(
    groups: np.ndarray, energy: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Position of each group's lowest-energy row, and each group's size.

    Args:
        groups: Integer group code of each row.
        energy: Energy per output token of each row (NaN: none; picked only when the group
            has nothing else).

    Returns:
        ``(positions, counts)``, one per group, in order of group code.
    """
    if len(groups) == 0:
        return np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    key = np.where(np.isnan(energy), np.inf, energy)
    order = np.lexsort((key, groups))  # stable: ties keep input order
    sorted_groups = groups[order]
    first = np.r_[True, sorted_groups[1:] != sorted_groups[:-1]]
    starts = np.flatnonzero(first)
    counts = np.diff(np.r_[starts, len(order)])
    return order[starts], counts


def energy_per_correct_j(energy_per_response_j: Any, accuracy_pct: Any, is_accuracy: Any) -> Any:
    """Energy per correct answer (J): ``energy_per_response_j / (accuracy_pct / 100)``.

    NaN where the score is not an accuracy in %, is not positive, or the energy is missing.
    """
    e = np.asarray(energy_per_response_j, dtype=float)
    a = np.asarray(accuracy_pct, dtype=float)
    ok = np.asarray(is_accuracy, dtype=bool) & np.isfinite(e) & np.isfinite(a) & (a > 0)
    out = np.full(np.broadcast(e, a).shape, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.copyto(out, e / (a / 100.0), where=ok)
    return out
