"""Published quality scores: read, validate and match them to measured models.

Model makers and public leaderboards publish benchmark scores (GPQA Diamond, MMLU-Pro,
LiveCodeBench, LMArena). The reference file ``published-quality.csv`` (or any CSV with the same
columns) lists them one row per score with its source. This module is the one reader of such a
file and the one rule that matches a measured model to its score:

* :func:`read_published_quality` reads and validates a file; a bad row raises
  :class:`~mlenergy.errors.UserError` naming its line.
* :func:`match_score` picks, for one model id and one benchmark, the score of the right mode
  (thinking or not), telling how it was matched (:class:`ScoreMatch`).
* :func:`unmatched_model_ids` lists the file's model ids that match no measured model.
* :func:`scores_for` (a model's scores, FP8 checkpoints inheriting their base model's),
  :func:`benchmarks` and :func:`scores_frame` (a table) serve views such as the leaderboard.

A published score was not measured in the same run as any energy figure: it is labelled
``published:<benchmark>`` (:attr:`PublishedScore.label`) and its source is kept.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mlenergy.errors import UserError
from mlenergy.reference import reference_dir

if TYPE_CHECKING:
    import pandas as pd

COLUMNS: tuple[str, ...] = (
    "model_id",
    "benchmark",
    "score",
    "unit",
    "setting",
    "source",
    "source_date",
)
"""Columns every published-quality file must have (extra columns are ignored)."""

FILE_NAME = "published-quality.csv"
"""Name of the file in the shared reference folder."""

THINKING_MIN_OUTPUT_TOKENS = 2000.0
"""Mean output length (tokens) from which a measured run counts as a thinking run.

ML.ENERGY's GPQA runs of reasoning models average 5,000-9,500 output tokens, chat runs of
non-thinking models 350-950; 2,000 separates the two with room on both sides.
"""

Mode = Literal["thinking", "non-thinking"]

DEFAULT_REASONING_LEVEL = "medium"
"""Reasoning level of the measured runs, when scores of several levels exist.

Models with reasoning levels (gpt-oss: low, medium, high) reason at the level the request sets;
ML.ENERGY's benchmark harness config for gpt-oss sets ``reasoning_effort: medium`` (also the
model's chat-template default), so the measured runs reasoned at ``medium``.
"""

RUN_LEVEL_SOURCE = "ML.ENERGY's harness config sets reasoning_effort: medium for the run"
"""Where the measured runs' reasoning level comes from (said in every match it decides)."""

_UNSTATED = re.compile(
    r"[^;,()]*\b(?:does not say|doesn't say|not stated|unstated|not specified|not captured|"
    r"unknown)\b[^;,()]*",
    re.I,
)
"""A clause that says the setting is not known (removed before looking for a mode word)."""

_LEVEL_RE = re.compile(r"reasoning (?:level|effort)[:= ]*(?P<level>low|medium|high)\b", re.I)

_UNIT_RANGES: tuple[tuple[str, float, float, bool], ...] = (
    # (unit prefix, low, high, is a percentage accuracy)
    ("%", 0.0, 100.0, True),
    ("index points", 0.0, 100.0, False),
    ("elo", 0.0, 4000.0, False),
)
_MODE_WORDS = re.compile(
    r"(?P<non>non[- ]?(?:thinking|reasoning)|reasoning[- ]off|no[- ]think)"
    r"|(?P<on>thinking|reasoning)",
    re.I,
)


@dataclass(frozen=True)
class PublishedScore:
    """One published score of one model on one benchmark.

    Attributes:
        model_id: Hugging Face id of the model scored.
        benchmark: Benchmark name as written in the file (``GPQA-Diamond``...).
        score: The score, in ``unit``.
        unit: ``% accuracy``, ``% pass@1``, ``Elo-scale (Bradley-Terry)``, ``index points``...
        setting: How it was evaluated (mode, shots, sampling).
        source: Where it was published and read.
        source_date: When it was published (free text).
        mode: ``thinking``, ``non-thinking``, or ``None`` when the setting does not say.
        line: Line of the row in its file (header = line 1).
    """

    model_id: str
    benchmark: str
    score: float
    unit: str
    setting: str
    source: str
    source_date: str
    mode: Mode | None
    line: int

    @property
    def label(self) -> str:
        """Quality source label, ``published:<benchmark>``."""
        return f"published:{self.benchmark}"

    @property
    def is_accuracy(self) -> bool:
        """Whether the score is a percentage (accuracy, pass@1): energy per correct applies."""
        return _unit_range(self.unit)[2]


@dataclass(frozen=True)
class ScoreMatch:
    """The score chosen for one model and benchmark, and how it was chosen.

    Attributes:
        score: The chosen score.
        run_mode: Mode of the measured run (from its mean output length), if known.
        how: One sentence saying how the score was matched (for the report).
        alternatives: Other rows that matched equally well (another source, another setting).
        via_base_model: The score is the base model's (an ``-FP8`` checkpoint inherits it).
    """

    score: PublishedScore
    run_mode: Mode | None
    how: str
    alternatives: tuple[PublishedScore, ...] = field(default=())
    via_base_model: bool = False


def _unit_range(unit: str) -> tuple[float, float, bool]:
    low_unit = unit.strip().lower()
    for prefix, lo, hi, pct in _UNIT_RANGES:
        if low_unit.startswith(prefix):
            return lo, hi, pct
    raise KeyError(unit)


def setting_mode(setting: str) -> Mode | None:
    """The mode a ``setting`` text states: ``non-thinking``, ``thinking`` or ``None``.

    Clauses that say the setting is not known ("arena entry does not say thinking vs
    non-thinking", "reasoning effort not stated") state no mode and are skipped. Then the first
    mode word decides (a setting may go on to quote the other mode's baselines).
    """
    found = _MODE_WORDS.search(_UNSTATED.sub(" ", setting))
    if found is None:
        return None
    return "non-thinking" if found.group("non") else "thinking"


def reasoning_level(setting: str) -> str | None:
    """The reasoning level a ``setting`` states (``low``, ``medium``, ``high``), else ``None``."""
    found = _LEVEL_RE.search(setting)
    return found.group("level").lower() if found else None


def _default_level(chosen: list[PublishedScore]) -> tuple[list[PublishedScore], str]:
    """Keep the :data:`DEFAULT_REASONING_LEVEL` rows when the rows differ in reasoning level."""
    levels = {reasoning_level(s.setting) for s in chosen} - {None}
    if len(levels) < 2 or DEFAULT_REASONING_LEVEL not in levels:
        return chosen, ""
    keep = [s for s in chosen if reasoning_level(s.setting) == DEFAULT_REASONING_LEVEL]
    others = sorted(
        {f"{reasoning_level(s.setting) or 'unstated'} {s.score:g}" for s in chosen}
        - {f"{DEFAULT_REASONING_LEVEL} {s.score:g}" for s in keep}
    )
    return keep, (
        f"; reasoning level {DEFAULT_REASONING_LEVEL} chosen, as the run used it "
        f"({RUN_LEVEL_SOURCE}; other rows: {', '.join(others)})"
    )


def run_mode(mean_output_tokens: float | None) -> Mode | None:
    """The mode of a measured run from its mean output length (``None`` when unknown).

    Args:
        mean_output_tokens: Mean generated tokens per response.
    """
    if mean_output_tokens is None or not math.isfinite(mean_output_tokens):
        return None
    return "thinking" if mean_output_tokens >= THINKING_MIN_OUTPUT_TOKENS else "non-thinking"


def _parse_row(row: dict[str, str | None], line: int, name: str) -> PublishedScore:
    where = f"{name} line {line}"
    model_id = (row.get("model_id") or "").strip()
    benchmark = (row.get("benchmark") or "").strip()
    unit = (row.get("unit") or "").strip()
    raw = (row.get("score") or "").strip()
    for col, value in (("model_id", model_id), ("benchmark", benchmark), ("unit", unit)):
        if not value:
            raise UserError(f"{where}: column {col!r} is empty", f"fill in {col} on that row")
    try:
        score = float(raw)
    except ValueError:
        raise UserError(
            f"{where} ({model_id}, {benchmark}): score {raw!r} is not a number",
            "write the score as a plain number, e.g. 68.4",
        ) from None
    if not math.isfinite(score):
        raise UserError(f"{where} ({model_id}, {benchmark}): score {raw!r} is not finite")
    try:
        lo, hi, _ = _unit_range(unit)
    except KeyError:
        raise UserError(
            f"{where} ({model_id}, {benchmark}): unit {unit!r} is not known",
            "use a unit starting with '%', 'Elo' or 'index points'",
        ) from None
    if not lo <= score <= hi:
        raise UserError(
            f"{where} ({model_id}, {benchmark}): score {score:g} is outside the range of "
            f"unit {unit!r} ({lo:g} to {hi:g})",
            "check the score and its unit",
        )
    setting = (row.get("setting") or "").strip()
    return PublishedScore(
        model_id=model_id,
        benchmark=benchmark,
        score=score,
        unit=unit,
        setting=setting,
        source=(row.get("source") or "").strip(),
        source_date=(row.get("source_date") or "").strip(),
        mode=setting_mode(setting),
        line=line,
    )


def read_published_quality(path: str | Path) -> list[PublishedScore]:
    """Read and validate a published-quality CSV.

    Args:
        path: The file (columns :data:`COLUMNS`; extra columns ignored).

    Returns:
        One :class:`PublishedScore` per row, in file order.

    Raises:
        UserError: The file is missing or unreadable, a column is missing, or a row has an
            empty id/benchmark/unit, a non-numeric score, an unknown unit or a score outside
            its unit's range (the message names the line).
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(
            f"published-quality file {path} not found",
            "pass --reference DIR (holding published-quality.csv) or a file with its columns",
        )
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise UserError(
                    f"{path.name}: missing column(s) {', '.join(missing)}",
                    f"the header must name {', '.join(COLUMNS)}",
                )
            scores = []
            line = reader.line_num
            for row in reader:
                scores.append(_parse_row(row, line + 1, path.name))
                line = reader.line_num
    except (UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"{path.name} is not a readable CSV file ({exc})") from None
    return scores


def published_quality_path(reference_dir: str | Path) -> Path:
    """The published-quality file of a reference folder."""
    return Path(reference_dir) / FILE_NAME


def default_published_quality_path() -> Path | None:
    """The reference's file (shipped with mlenergy, or ``$MLENERGY_REFERENCE_DIR``'s).

    Returns:
        The path, or ``None`` when ``$MLENERGY_REFERENCE_DIR`` names a folder without it.
    """
    path = published_quality_path(reference_dir())
    return path if path.is_file() else None


def benchmarks(scores: Iterable[PublishedScore]) -> list[str]:
    """Benchmark names present, in first-seen order."""
    return list(dict.fromkeys(s.benchmark for s in scores))


def base_model_id(model_id: str) -> str | None:
    """The BF16 model an ``-FP8`` checkpoint derives from (``None`` for other ids)."""
    return model_id[: -len("-FP8")] if model_id.upper().endswith("-FP8") else None


def scores_for(
    scores: Iterable[PublishedScore], model_id: str, benchmark: str | None = None
) -> tuple[list[PublishedScore], bool]:
    """The scores of ``model_id`` (on ``benchmark``, case-insensitive, when given).

    An ``-FP8`` id with no score of its own takes its base model's scores.

    Returns:
        ``(scores, via_base_model)``.
    """
    pool = [s for s in scores if benchmark is None or s.benchmark.lower() == benchmark.lower()]
    own = [s for s in pool if s.model_id == model_id]
    if own:
        return own, False
    base = base_model_id(model_id)
    if base is not None:
        inherited = [s for s in pool if s.model_id == base]
        if inherited:
            return inherited, True
    return [], False


def _pick(candidates: Sequence[PublishedScore], mode: Mode | None) -> tuple[list, str]:
    """The candidates best matching ``mode``, and the sentence saying why."""
    modes = {s.mode for s in candidates}
    if mode is None:
        return list(candidates), "the run's mode is unknown; first published row used"
    same = [s for s in candidates if s.mode == mode]
    if same:
        if len(modes - {None}) > 1:
            return same, f"{mode} score chosen over the other mode's"
        return same, f"published {mode} score"
    unstated = [s for s in candidates if s.mode is None]
    if unstated:
        return unstated, "published setting does not state a mode"
    other = sorted(m for m in modes if m is not None)[0]
    return list(candidates), f"only {other} scores are published (run looks {mode}); used as is"


def match_score(
    scores: Iterable[PublishedScore],
    model_id: str,
    benchmark: str,
    *,
    mean_output_tokens: float | None = None,
    mode: Mode | None = None,
) -> ScoreMatch | None:
    """The published score of ``model_id`` on ``benchmark`` in the mode of the measured run.

    The run's mode is ``mode`` when given, else it comes from the run's mean output length
    (:func:`run_mode`); with neither, the first row is used. Rows of that mode win;
    then rows whose setting states no mode; then rows of the other mode (said so in ``how``).
    When the model's rows state different reasoning levels (gpt-oss: low, medium, high), the
    rows of the runs' level (:data:`DEFAULT_REASONING_LEVEL`) are kept whatever the mode.
    Among equals the first row of the file is chosen and the others are kept as
    ``alternatives``.

    Args:
        scores: Published scores (:func:`read_published_quality`).
        model_id: The measured model's id.
        benchmark: Benchmark name (case-insensitive).
        mean_output_tokens: Mean generated tokens per response of the measured run.
        mode: The run's mode (``thinking`` or ``non-thinking``), when known otherwise.

    Returns:
        The match, or ``None`` when the model has no score on the benchmark.

    Raises:
        ValueError: For a ``mode`` other than ``thinking`` / ``non-thinking``.
    """
    if mode is not None and mode not in ("thinking", "non-thinking"):
        raise ValueError(f"mode must be 'thinking' or 'non-thinking', not {mode!r}")
    candidates, via_base = scores_for(scores, model_id, benchmark)
    if not candidates:
        return None
    if mode is not None:
        length = f"{mode} run (given)"
    else:
        mode = run_mode(mean_output_tokens)
        length = (
            f"mean output {mean_output_tokens:,.0f} tokens -> {mode} run"
            if mode is not None and mean_output_tokens is not None
            else "no output length"
        )
    levels = {reasoning_level(s.setting) for s in candidates} - {None}
    if len(levels) > 1 and DEFAULT_REASONING_LEVEL in levels:
        # A model with reasoning levels always reasons: the run's level decides, not its length.
        chosen, level_why = _default_level(candidates)
        why = "the model has reasoning levels"
    else:
        chosen, why = _pick(candidates, mode)
        chosen, level_why = _default_level(chosen)
    how = f"{length}; {why}{level_why}"
    if via_base:
        how += f"; score of {base_model_id(model_id)} (the FP8 checkpoint inherits it)"
    first = chosen[0]
    alternatives = tuple(
        s for s in chosen[1:] if s.score != first.score or s.source != first.source
    )
    return ScoreMatch(first, mode, how, alternatives, via_base)


def unmatched_model_ids(
    scores: Iterable[PublishedScore], measured_model_ids: Iterable[str]
) -> list[str]:
    """Model ids of the file that match no measured model (directly or as an FP8 base).

    Args:
        scores: Published scores.
        measured_model_ids: Ids of the models that have measurements.

    Returns:
        The unmatched ids, sorted.
    """
    measured = set(measured_model_ids)
    bases = {b for m in measured if (b := base_model_id(m)) is not None}
    return sorted({s.model_id for s in scores} - measured - bases)


def scores_frame(scores: Iterable[PublishedScore]) -> pd.DataFrame:
    """The scores as a table (one row each, plus ``label``, ``is_accuracy`` and ``mode``).

    Columns: :data:`COLUMNS`, ``mode``, ``label`` (``published:<benchmark>``), ``is_accuracy``
    and ``line``.
    """
    import pandas as pd

    rows = [
        {
            "model_id": s.model_id,
            "benchmark": s.benchmark,
            "score": s.score,
            "unit": s.unit,
            "setting": s.setting,
            "source": s.source,
            "source_date": s.source_date,
            "mode": s.mode,
            "label": s.label,
            "is_accuracy": s.is_accuracy,
            "line": s.line,
        }
        for s in scores
    ]
    return pd.DataFrame(rows, columns=[*COLUMNS, "mode", "label", "is_accuracy", "line"])
