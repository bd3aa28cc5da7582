"""Published quality on the leaderboard: attach a benchmark's published score to each run.

Runs measured by ML.ENERGY (and most submissions) carry no quality record of their own. For
them the Quality figure menu also offers each published benchmark of
``published-quality.csv`` (see :mod:`mlenergy.quality.published`), as the key
``published:<benchmark>``. Picking one attaches, to every run whose model has a score on that
benchmark, the score of the run's mode (thinking or not, told by the run's mean output
length; :func:`~mlenergy.quality.published.match_score`). Such a figure was not measured in
the run: its ``quality_source`` is ``published:<benchmark>`` and ``quality_link`` says where it
was published and how it was matched. A model with a quality record of its own in the store
on that benchmark gets that record instead (``quality_source`` ``measured:<task>`` or
``imported:<task>``), as in the measured study: both call the one rule,
:func:`mlenergy.analysis.quality_attach.pick_quality`.

Where the score is an accuracy in % and the run answered that benchmark's questions (its task
is the benchmark's, see :func:`mlenergy.records.metrics.task_answers_benchmark`: ML.ENERGY's
``gpqa`` runs measured whole GPQA responses), the run also gets
``energy_per_correct_j = energy_per_response_j / (quality / 100)`` with
``energy_per_response_j = energy_per_token_j x mean output length`` (J; the exact mean,
``avg_output_tokens``, where the record has one, else ``output_tokens``). A chat response's
energy divided by a GPQA accuracy is no energy per correct answer, so chat runs get none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TypeGuard

import numpy as np
import pandas as pd

from mlenergy.analysis.quality_attach import pick_quality
from mlenergy.quality.published import (
    THINKING_MIN_OUTPUT_TOKENS,
    Mode,
    PublishedScore,
    default_published_quality_path,
    read_published_quality,
    run_mode,
    scores_for,
)
from mlenergy.records import QualityResult
from mlenergy.records.metrics import (
    TASK_BENCHMARK,
    energy_per_correct_j,
    energy_per_response_j,
    mean_output_tokens_column,
    task_answers_benchmark,
)

PREFIX = "published:"
"""Prefix of the Quality figure menu's published entries (the score's source label)."""

PREFERRED = ("GPQA-Diamond", "MMLU-Pro", "LMArena text score")
"""Benchmarks listed first in the menu (the measured study's choices), when present."""

QUALITY_EXTRA_COLUMNS = ("quality_source", "energy_per_response_j", "energy_per_correct_j")
"""Columns :func:`attach_published` adds beside ``quality`` and ``quality_link``."""


_MODE_RULE = {
    "thinking": f"mean output >= {THINKING_MIN_OUTPUT_TOKENS:,.0f} tokens -> thinking run",
    "non-thinking": f"mean output < {THINKING_MIN_OUTPUT_TOKENS:,.0f} tokens -> non-thinking run",
}


def published_key(benchmark: str) -> str:
    """The menu key of a published benchmark, its source label ``published:<benchmark>``."""
    return f"{PREFIX}{benchmark}"


def is_published_key(key: str | None) -> TypeGuard[str]:
    """Whether a quality key names a published benchmark."""
    return key is not None and key.startswith(PREFIX)


def load_published(path: str | Path | None = None) -> list[PublishedScore]:
    """Read the published scores the app attaches.

    Args:
        path: A published-quality CSV; ``None`` reads the reference's file (shipped with
            mlenergy, or ``$MLENERGY_REFERENCE_DIR``'s) when present.

    Returns:
        The scores; empty when no path is given and no reference file exists.

    Raises:
        UserError: The file given is missing or has a bad row (the message names the line).
    """
    if path is None:
        path = default_published_quality_path()
        if path is None:
            return []
    return read_published_quality(path)


def published_keys(scores: Sequence[PublishedScore], model_ids: Iterable[str]) -> list[str]:
    """Menu keys of the benchmarks with a score for at least one model in the store.

    Ordered :data:`PREFERRED` first, then by the number of models scored (most first), then
    by name.

    Args:
        scores: Published scores.
        model_ids: Model ids of the store's runs.
    """
    counts: Counter[str] = Counter()
    names = {s.benchmark.lower(): s.benchmark for s in scores}
    for model_id in set(model_ids):
        found, _ = scores_for(scores, model_id)
        for bench in {s.benchmark.lower() for s in found}:
            counts[names[bench]] += 1
    rank = {b: i for i, b in enumerate(PREFERRED)}
    ordered = sorted(counts, key=lambda b: (rank.get(b, len(rank)), -counts[b], b))
    return [published_key(b) for b in ordered]


def task_quality_key(task: str | None) -> str | None:
    """The quality figure a view of ``task`` opens with, or ``None``.

    The task's benchmark (:data:`mlenergy.records.metrics.TASK_BENCHMARK`: LMArena's text score
    for the text chat tasks, GPQA-Diamond for ``gpqa``; other tasks: none until the reader
    picks one).
    """
    bench = TASK_BENCHMARK.get((task or "").strip().lower())
    return published_key(bench) if bench else None


def _link_text(score: PublishedScore, how: str) -> str:
    """What the detail view and the hover say about one attached score."""
    when = f", {score.source_date}" if score.source_date else ""
    return (
        f"published {score.benchmark} {score.score:g} {score.unit} (not measured in this run); "
        f"{score.setting or 'setting not stated'}; source: {score.source}{when}; {how}"
    )


def _matches(
    records: Sequence[QualityResult],
    scores: Sequence[PublishedScore],
    benchmark: str,
    pairs: Iterable[tuple[str, Mode | None]],
) -> dict[tuple[str, Mode | None], tuple[float, str, bool, str]]:
    """``(model_id, mode) -> (score, link text, is accuracy, source label)`` with a figure.

    The figure is :func:`~mlenergy.analysis.quality_attach.pick_quality`'s: the store's own
    record of the model on the benchmark, else the published score of the run's mode.
    """
    out = {}
    for model_id, mode in pairs:
        fig = pick_quality(records, scores, model_id, benchmark, mode=mode)
        if fig is None:
            continue
        if fig.published is not None:
            how = fig.how.replace(f"{mode} run (given)", _MODE_RULE.get(mode or "", ""))
            link = _link_text(fig.published, how)
        else:
            link = f"{fig.reference}; {fig.how}"
        out[(model_id, mode)] = (fig.score, link, fig.is_accuracy, fig.source_label)
    return out


def attach_published(
    runs: pd.DataFrame,
    scores: Sequence[PublishedScore],
    key: str,
    records: Sequence[QualityResult] = (),
) -> pd.DataFrame:
    """Set the quality figure of benchmark ``key`` on every run whose model has one.

    The figure is the one rule's (:func:`~mlenergy.analysis.quality_attach.pick_quality`,
    shared with the measured study): the store's own quality record of the model on that
    benchmark when there is one (``quality_source`` ``measured:<task>`` or
    ``imported:<task>``), else the published score of the run's mode.

    Args:
        runs: A frame from :func:`mlenergy.leaderboard.prepare.prepare_runs`.
        scores: Published scores.
        key: A menu key (``published:<benchmark>``).
        records: The store's quality records (preferred to published scores).

    Returns:
        A copy of ``runs`` with ``quality`` (the score, NaN where none), ``quality_link`` (its
        source and how it was matched), ``quality_source`` (``published:<benchmark>``),
        ``energy_per_response_j`` and ``energy_per_correct_j`` (J; only where the score is an
        accuracy in % and the run's task is the benchmark's).
    """
    benchmark = key[len(PREFIX) :] if is_published_key(key) else key
    out = runs.copy()
    tokens = mean_output_tokens_column(out)
    modes = [run_mode(t) for t in tokens]
    pairs = dict.fromkeys(zip(out["model_id"], modes, strict=True))
    found = _matches(records, scores, benchmark, pairs)
    picked = [found.get(pair) for pair in zip(out["model_id"], modes, strict=True)]
    out["quality"] = [p[0] if p else np.nan for p in picked]
    out["quality_link"] = [p[1] if p else "" for p in picked]
    out["quality_source"] = [p[3] if p else "" for p in picked]
    energy = energy_per_response_j(out["energy_per_token_j"], tokens)
    out["energy_per_response_j"] = energy  # as prepare_runs computes it
    answers = {t: task_answers_benchmark(t, benchmark) for t in out["task"].unique()}
    accuracy = np.array(
        [bool(p and p[2] and answers[t]) for p, t in zip(picked, out["task"], strict=True)],
        dtype=bool,
    )
    out["energy_per_correct_j"] = energy_per_correct_j(
        energy, out["quality"].to_numpy(dtype=float), accuracy
    )
    return out
