"""Which quality figure a run gets: one rule for the leaderboard and the measured study.

For a run of model ``model_id`` and a benchmark (``GPQA-Diamond``, ``LMArena text score``...),
:func:`pick_quality` returns:

1. the store's own quality record for the model on that benchmark (:func:`store_quality`):
   a record measured by this project (``measured:<task>``) before one imported from another
   tool's file or submitted (``imported:<task>``, e.g. ``imported:lm-eval:gpqa_diamond``); among
   those the newest evaluation, then the benchmark's own task or group before its subtasks,
   then lm-eval's filter ``none``, then ``strict-match``; an accuracy fraction in [0, 1] is shown
   in %. The published score it is preferred to is named in ``how``;
2. else the published score (:mod:`mlenergy.quality.published`) in the run's mode, matched by
   :func:`~mlenergy.quality.published.match_score` (thinking or not, told by the run's mean
   output length, or given).

Where the two views used to disagree, this is the behaviour both now have: the leaderboard's
published benchmark figures (``published:<benchmark>`` in its menu) also prefer the store's
own record of the model, as the study always did, so a model evaluated in the store never shows
a published score beside it on one view and its own figure on the other.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from mlenergy.quality.published import Mode, PublishedScore, match_score
from mlenergy.records import QualityResult


@dataclass(frozen=True)
class QualityFigure:
    """The quality figure attached to one row, with its label and how it was matched."""

    benchmark: str
    score: float
    is_accuracy: bool
    source_label: str
    reference: str
    how: str
    alternatives: tuple[float, ...] = field(default=())
    published: PublishedScore | None = None


_ACCURACY_METRICS = ("acc", "exact_match", "em", "pass@1", "accuracy")


def normalise(text: str) -> str:
    """Lower-case letters and digits only (``GPQA-Diamond`` -> ``gpqadiamond``)."""
    return "".join(ch for ch in text.lower() if ch.isalnum())


_FILTER_ORDER = ("none", "strict-match")
"""lm-eval filters preferred when one task reports several (then the others, by name)."""


def _quality_kind(q: QualityResult) -> str:
    """``imported`` (read from another tool's file or submitted) or ``measured`` (this project)."""
    return "imported" if q.tags.get("imported_from") or q.submission is not None else "measured"


def _quality_origin(q: QualityResult) -> str:
    """Who produced a quality record: the tool (and submitter) or this project."""
    who = q.tags.get("origin") or ("this project" if _quality_kind(q) == "measured" else "")
    if q.submission is not None:
        by = f"submitted by {q.submission.submitter}"
        who = f"{who}, {by}" if who else by
    return who


def _filter_rank(q: QualityResult) -> tuple[int, str]:
    filt = q.tags.get("filter", "none")
    order = _FILTER_ORDER.index(filt) if filt in _FILTER_ORDER else len(_FILTER_ORDER)
    return order, q.metric


def _task_rank(q: QualityResult, benchmark: str) -> tuple[int, float, int, int, int]:
    """Order of preference among matching records.

    Measured by this project before imported or submitted, then the newest, then the
    benchmark's own task:

    ``lm-eval:mmlu_pro`` (the task named as the benchmark, or a group) comes before its
    subtasks such as ``lm-eval:mmlu_pro_biology``, then shorter names.
    """
    name = normalise(q.task.removeprefix("lm-eval:"))
    exact = name == normalise(benchmark) or q.tags.get("benchmark") is not None
    kind = 0 if _quality_kind(q) == "measured" else 1
    return (kind, -q.created_at.timestamp(), 0 if exact else 1, 0 if q.tags.get("group") else 1,
            len(q.task))  # fmt: skip


def _as_percent(q: QualityResult) -> tuple[float, bool]:
    accuracy = q.metric.lower().startswith(_ACCURACY_METRICS) and 0.0 <= q.value <= 1.0
    return (q.value * 100.0 if accuracy else q.value), accuracy


def store_quality(
    records: Iterable[QualityResult], model_id: str, benchmark: str
) -> QualityFigure | None:
    """The store's own quality record for ``model_id`` on ``benchmark``, if any.

    A record counts when its ``tags["benchmark"]`` names the benchmark or its task contains
    the benchmark's name (``lm-eval:gpqa_diamond_cot_zeroshot`` for ``GPQA-Diamond``). A record
    measured by this project wins over an imported or submitted one, then the newest evaluation,
    and within it the benchmark's own task or group before its
    subtasks (:func:`_task_rank`); among that task's records lm-eval's filter ``none``, then
    ``strict-match``, is chosen and the other figures are named in ``how``. Accuracy
    fractions in [0, 1] are shown in %. The label is ``imported:<task>`` for a record read
    from another tool's file or submitted, else ``measured:<task>``.
    """
    found = [q for q in records if q.model.model_id == model_id and matches_benchmark(q, benchmark)]
    if not found:
        return None
    newest = min(found, key=lambda r: _task_rank(r, benchmark))
    same = [
        q
        for q in found
        if q.task == newest.task
        and q.created_at == newest.created_at
        and _quality_kind(q) == _quality_kind(newest)
    ]
    q = min(same, key=_filter_rank)
    score, accuracy = _as_percent(q)
    others = [f"{o.metric} {_as_percent(o)[0]:.4g}" for o in sorted(same, key=_filter_rank)[1:]]
    how = f"quality record of the store ({q.task}, {q.metric}), preferred to published scores"
    if others:
        how += f"; other figures of that evaluation: {', '.join(others)}"
    return QualityFigure(
        benchmark=benchmark,
        score=score,
        is_accuracy=accuracy,
        source_label=f"{_quality_kind(q)}:{q.task}",
        reference=(
            f"quality record {q.quality_id} ({q.metric} on {q.dataset or q.task}, "
            f"by {_quality_origin(q)}; not measured in the energy runs)"
        ),
        how=how,
    )


def matches_benchmark(q: QualityResult, benchmark: str) -> bool:
    """Whether a quality record scores ``benchmark`` (its ``benchmark`` tag or task name)."""
    want = normalise(benchmark)
    return normalise(q.tags.get("benchmark", "")) == want or want in normalise(q.task)


def published_quality(
    scores: Iterable[PublishedScore],
    model_id: str,
    benchmark: str,
    mean_output_tokens: float | None = None,
    mode: Mode | None = None,
) -> QualityFigure | None:
    """The published score of ``model_id`` on ``benchmark``, in the run's mode, if any.

    Args:
        scores: Published scores.
        model_id: The run's model.
        benchmark: Benchmark name (case-insensitive).
        mean_output_tokens: The run's mean output length (tokens), which tells its mode.
        mode: The run's mode when known otherwise (wins over the length).
    """
    match = match_score(
        list(scores), model_id, benchmark, mean_output_tokens=mean_output_tokens, mode=mode
    )
    if match is None:
        return None
    s = match.score
    return QualityFigure(
        benchmark=s.benchmark,
        score=s.score,
        is_accuracy=s.is_accuracy,
        source_label=s.label,
        reference=f"{s.source} ({s.source_date}; {s.setting})",
        how=match.how,
        alternatives=tuple(sorted({a.score for a in match.alternatives} - {s.score})),
        published=s,
    )


def pick_quality(
    records: Iterable[QualityResult],
    scores: Iterable[PublishedScore],
    model_id: str,
    benchmark: str,
    mean_output_tokens: float | None = None,
    mode: Mode | None = None,
) -> QualityFigure | None:
    """The quality figure of a run: the store's own record, else the published score.

    See the module's docstring for the rule.

    Args:
        records: The store's quality records.
        scores: Published scores.
        model_id: The run's model.
        benchmark: Benchmark name.
        mean_output_tokens: The run's exact mean output length (tokens; tells its mode).
        mode: The run's mode when known otherwise.

    Returns:
        The figure, or ``None`` when neither the store nor the published scores have one.
    """
    stored = store_quality(records, model_id, benchmark)
    published = published_quality(scores, model_id, benchmark, mean_output_tokens, mode)
    if stored is None:
        return published
    if published is not None:
        how = f"{stored.how} (published {published.score:g}, {published.reference}, not used)"
        stored = replace(stored, how=how)
    return stored
