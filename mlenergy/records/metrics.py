"""The figures on the record: one rule each, read by every view.

The CLI, bench, the store's listing, the leaderboard, the studies, the planners and the
calibration all read a run's figures through this module:

* **Which phase gives a run's figures** (:data:`HEADLINE_PHASES`): the whole-request phase, as
  ML.ENERGY's reference reports it (prefill and decode together over the steady-state window;
  for a static batch, the whole ``generate`` call), else the decode phase for runs that
  measured only that. Energy per token, throughput and power all come from the same phase.
  Other phases are shown under their own labels.
* **Mean output length** (:func:`mean_output_tokens`): ``Workload.avg_output_tokens`` (the
  exact mean of serving data), else ``output_tokens``.
* **Energy per response** (:func:`energy_per_response_j`): energy per output token times the
  exact mean output length (never a rounded count).
* **Which benchmark a task is judged on** (:data:`TASK_BENCHMARK`) and **whether its runs
  answer that benchmark's questions** (:func:`task_answers_benchmark`): only then is
  **energy per correct answer** (:func:`energy_per_correct_j`) the energy per response over
  the accuracy.
* **Meeting a latency deadline** (:func:`meets_deadline`): the median inter-token latency is at
  most the deadline; a configuration with no latency cannot be judged and does not meet it,
  unless the view asks to keep such rows visible (``unknown_meets=True``, said where used).
  Where none is given, the deadline is :data:`DEFAULT_ITL_LIMIT_MS`.
* **The best configuration** (:func:`lowest_energy_positions`): within each group (model x
  hardware x task), the lowest energy per output token; rows with no energy figure only when
  the group has nothing else; ties keep the first row.

Each rule comes in the forms its readers need: on a :class:`~mlenergy.records.RunRecord`, on a
flat runs frame (the store's columns) and in SQL over the store. Not imported by
:mod:`mlenergy.records` itself (it needs numpy and pandas).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from mlenergy.records.run import Phase, PhaseResult, RunRecord

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


def mean_output_tokens(run: RunRecord) -> float:
    """A run's mean output length (tokens): the exact mean where recorded, else the count."""
    return float(run.workload.avg_output_tokens or run.workload.output_tokens)


def mean_output_tokens_column(frame: pd.DataFrame) -> np.ndarray:
    """The same rule over a flat runs frame: ``avg_output_tokens``, else ``output_tokens``.

    Args:
        frame: Rows with the store's ``avg_output_tokens`` and ``output_tokens`` columns
            (missing ones read as NaN).

    Returns:
        Tokens per response; NaN where neither is positive (0: length not published).
    """
    tokens = np.full(len(frame), np.nan)
    for name in ("output_tokens", "avg_output_tokens"):  # the exact mean wins
        if name in frame.columns:
            values = pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)
            tokens = np.where(np.isfinite(values), values, tokens)
    return np.where(tokens > 0, tokens, np.nan)


def energy_per_response_j(energy_per_token_j: Any, mean_output_tokens: Any) -> Any:
    """Energy per output token x the exact mean output length (J); NaN where length <= 0."""
    length = np.asarray(mean_output_tokens, dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):  # 1e308 J x tokens is inf, not a warning
        return np.asarray(energy_per_token_j, dtype=float) * np.where(length > 0, length, np.nan)


DEFAULT_ITL_LIMIT_MS = 50.0
"""The median inter-token latency deadline when none is given, milliseconds (20 tokens/s per
stream, a comfortable reading speed): the power-cap planner, the measured study and the
leaderboard's Power budget view open on it."""


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


CHAT_BENCHMARK = "LMArena text score"
"""Quality figure of the chat tasks: LMArena's text score (one snapshot, on one Elo scale)."""

REASONING_BENCHMARK = "GPQA-Diamond"
"""Quality figure of the reasoning task (``gpqa``), unless a view is told another."""

TASK_BENCHMARK: dict[str, str] = {
    "lm-arena-chat": CHAT_BENCHMARK,
    "sharegpt-chat": CHAT_BENCHMARK,
    "gpqa": REASONING_BENCHMARK,
}
"""Task label -> the published benchmark its runs are judged on (other tasks: none)."""

TASK_QUESTIONS: dict[str, tuple[str, ...]] = {"gpqa": ("gpqa",)}
"""Task label -> the benchmark name prefixes (lower case) whose questions its runs answer:
ML.ENERGY's ``gpqa`` runs measured whole GPQA responses. A chat response's energy over a GPQA
accuracy is no energy per correct answer."""


def task_benchmarks(reasoning: str = REASONING_BENCHMARK) -> dict[str, str]:
    """:data:`TASK_BENCHMARK` with the reasoning task judged on ``reasoning``."""
    return {task: reasoning if task == "gpqa" else bench for task, bench in TASK_BENCHMARK.items()}


def task_answers_benchmark(task: str | None, benchmark: str | None) -> bool:
    """Whether runs of ``task`` answer the questions of ``benchmark`` (:data:`TASK_QUESTIONS`)."""
    prefixes = TASK_QUESTIONS.get((task or "").strip().lower(), ())
    return bool(prefixes) and (benchmark or "").strip().lower().startswith(prefixes)
