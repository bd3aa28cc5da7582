"""Reading and parsing a result bundle, bounded: size, nesting, integers, NaN, problem count.

A bundle is either a :class:`~mlenergy.records.Submission` JSON object, or records (run
records and quality results) as JSON Lines (``mlenergy bench --json`` output), a JSON array or
a single record object; then the submitter's name comes from the caller.

Reading stops at :data:`MAX_BUNDLE_BYTES`; JSON that nests deeper than :data:`MAX_DEPTH`,
holds an integer longer than :data:`MAX_INT_DIGITS` digits, or a NaN or Infinity is refused
with one line naming the check; at most :data:`MAX_PROBLEMS` schema problems are collected.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mlenergy.records import QualityResult, RunRecord, Submission
from mlenergy.store.checks import tag

MAX_BUNDLE_BYTES = 5_000_000
"""Largest accepted bundle, in bytes (5 MB); reading stops there."""
MAX_PROBLEMS = 200
"""Problems listed before the report is cut short."""
MAX_DEPTH = 32
"""Deepest nesting of JSON objects and arrays accepted."""
MAX_INT_DIGITS = 20
"""Longest integer accepted, in digits (a 64-bit count has at most 20)."""


class BundleRefused(ValueError):
    """The bundle's JSON breaks a bound (depth, integer size, NaN); ``problem`` says which."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise BundleRefused(
            tag(
                "integer-size",
                f"bundle holds an integer of {len(text.lstrip('-'))} digits "
                f"(at most {MAX_INT_DIGITS})",
            )
        )
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BundleRefused(
            tag("finite-numbers", f"bundle holds {text[:40]!r}, which is not a finite number")
        )
    return value


def _parse_constant(name: str) -> float:
    raise BundleRefused(
        tag("finite-numbers", f"bundle holds {name}, which is not a number (JSON has no {name})")
    )


def _check_depth(value: Any) -> None:
    """Refuse JSON nested deeper than :data:`MAX_DEPTH` (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise BundleRefused(
                tag("json-depth", f"bundle nests objects or arrays deeper than {MAX_DEPTH}")
            )
        children = item.values() if isinstance(item, dict) else item
        if isinstance(item, dict | list):
            stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))


def load_json(text: str) -> Any:
    """``json.loads`` with the bundle's bounds.

    Raises:
        BundleRefused: Too deep, an integer too long, NaN or Infinity.
        json.JSONDecodeError: Not JSON.
    """
    try:
        value = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except RecursionError:
        raise BundleRefused(
            tag("json-depth", f"bundle nests objects or arrays deeper than {MAX_DEPTH}")
        ) from None
    _check_depth(value)
    return value


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _pydantic_problems(where: str, exc: ValidationError | list[Any]) -> list[str]:
    problems = []
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False, include_input=False, include_context=False)
    else:
        errors = exc
    for err in errors[:MAX_PROBLEMS]:
        loc = _loc(tuple(err["loc"]))
        msg = "unknown field" if err["type"] == "extra_forbidden" else str(err["msg"])
        msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        target = f"{where}.{loc}" if where and loc else (where or loc or "bundle")
        problems.append(tag("schema", f"{target}: {msg}"))
    if len(errors) > MAX_PROBLEMS:
        problems.append(
            f"{where or 'bundle'}: ... and {len(errors) - MAX_PROBLEMS} more problem(s)"
        )
    return problems


def read_bounded(data: bytes | str | Path, max_bytes: int) -> tuple[bytes | None, list[str]]:
    """The bundle's bytes, reading at most ``max_bytes + 1`` of them.

    Returns:
        ``(bytes, [])``, or ``(None, [problem])`` when the bundle is over the limit or
        cannot be read.
    """
    over = tag("bundle-size", f"bundle is over the {max_bytes / 1e6:g} MB limit")
    if isinstance(data, bytes):
        return (data, []) if len(data) <= max_bytes else (None, [over])
    path = Path(data)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        return None, [f"cannot read bundle {path.name}: {exc.strerror or exc}"]
    return (raw, []) if len(raw) <= max_bytes else (None, [over])


def _kind_of(obj: Mapping[str, Any]) -> str:
    kind = obj.get("record_type")
    if isinstance(kind, str):
        return kind
    if "runs" in obj:
        return "submission"
    return "quality" if "metric" in obj else "run"


def _parse_items(text: str) -> tuple[list[tuple[str, Any]], list[str]]:
    """Split the text into ``(where, json value)`` items: one object, an array or JSON Lines."""
    stripped = text.strip()
    if not stripped:
        return [], [tag("json-format", "bundle is empty")]
    try:
        value = load_json(stripped)
    except BundleRefused as refused:
        return [], [refused.problem]
    except json.JSONDecodeError as whole:
        first = stripped.split("\n", 1)[0]
        try:
            load_json(first)
        except BundleRefused as refused:
            return [], [f"line 1: {refused.problem}"]
        except ValueError:  # one broken JSON document, not JSON Lines
            return [], [
                tag(
                    "json-format",
                    f"bundle is not valid JSON ({whole.msg} at line {whole.lineno} "
                    f"column {whole.colno})",
                )
            ]
        items: list[tuple[str, Any]] = []
        problems: list[str] = []
        for n, line in enumerate(text.splitlines(), start=1):
            if len(problems) >= MAX_PROBLEMS:
                problems.append(f"line {n}: ... reading stopped after {MAX_PROBLEMS} problems")
                break
            if not line.strip():
                continue
            try:
                items.append((f"line {n}", load_json(line)))
            except BundleRefused as refused:
                problems.append(f"line {n}: {refused.problem}")
            except json.JSONDecodeError as exc:
                problems.append(
                    tag(
                        "json-format", f"line {n}: not valid JSON ({exc.msg} at column {exc.colno})"
                    )
                )
        return items, problems
    if isinstance(value, list):
        return [(f"record[{i}]", v) for i, v in enumerate(value)], []
    return [("bundle", value)], []


@dataclass(frozen=True)
class ParsedBundle:
    """A bundle split into records.

    Attributes:
        submission: The whole bundle as a :class:`Submission` (``None`` if any part failed).
        records: ``(where, record)`` for every record that passed its schema, where ``where``
            is ``runs[i]`` / ``quality[i]`` (Submission) or ``line N`` (JSON Lines).
        problems: Schema and format problems.
        raw_runs: ``(where, dict)`` for every run record that failed its schema: the rules
            that can run on the raw values still check them.
        new_tasks: Task labels the bundle declares new (its ``new_tasks``, and the caller's).
    """

    submission: Submission | None
    records: list[tuple[str, RunRecord | QualityResult]]
    problems: list[str]
    raw_runs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    new_tasks: tuple[str, ...] = ()


def _parse_record(
    where: str, obj: Any, expect: str | None = None
) -> tuple[RunRecord | QualityResult | None, list[str]]:
    if not isinstance(obj, dict):
        return None, [tag("schema", f"{where}: expected a JSON object (a run or quality record)")]
    kind = expect or _kind_of(obj)
    model = {"run": RunRecord, "quality": QualityResult}.get(kind)
    if model is None:
        return None, [tag("schema", f"{where}.record_type: unknown record type {str(kind)[:40]!r}")]
    try:
        return model.model_validate(obj), []
    except ValidationError as exc:
        return None, _pydantic_problems(where, exc)


def parse_bundle(
    raw: bytes, submitter: str | None = None, new_tasks: Collection[str] = ()
) -> ParsedBundle:
    """Parse bundle bytes, collecting every format and schema problem.

    The task labels declared new (the caller's ``new_tasks`` and a Submission's own
    ``new_tasks``) are merged and recorded on the returned submission.

    Args:
        raw: The bundle's bytes (UTF-8 JSON or JSON Lines).
        submitter: See :func:`_parse_bundle`.
        new_tasks: Task labels the submitter declares new (e.g. ``--new-task``).
    """
    parsed = _parse_bundle(raw, submitter)
    sub = parsed.submission
    own = sub.new_tasks if sub is not None else _declared_in_raw(raw)
    declared = tuple(dict.fromkeys([*own, *(t.strip() for t in new_tasks if t.strip())]))
    submission = parsed.submission
    if submission is not None and declared != submission.new_tasks:
        submission = submission.model_copy(update={"new_tasks": declared})
    return ParsedBundle(submission, parsed.records, parsed.problems, parsed.raw_runs, declared)


def _declared_in_raw(raw: bytes) -> tuple[str, ...]:
    """``new_tasks`` of a bundle that failed to parse as a whole (text labels only)."""
    try:
        obj = load_json(raw.decode("utf-8").lstrip("\ufeff"))
    except (UnicodeDecodeError, ValueError):
        return ()
    tasks = obj.get("new_tasks") if isinstance(obj, dict) else None
    return tuple(t for t in tasks if isinstance(t, str)) if isinstance(tasks, list) else ()


def _parse_bundle(raw: bytes, submitter: str | None = None) -> ParsedBundle:
    """Parse bundle bytes, collecting every format and schema problem.

    Each record is checked on its own, so one bad record does not hide the others.

    Args:
        raw: The bundle's bytes (UTF-8 JSON or JSON Lines).
        submitter: Submitter name for a bundle of bare records. A Submission object names
            its own submitter; a different ``submitter`` given here is a problem.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return ParsedBundle(
            None,
            [],
            [tag("json-format", f"bundle is not UTF-8 text (bad byte at offset {exc.start})")],
        )
    items, problems = _parse_items(text.lstrip("\ufeff"))
    if len(items) == 1 and isinstance(items[0][1], dict) and _kind_of(items[0][1]) == "submission":
        return _parse_submission(items[0][1], submitter, problems)
    return _parse_bare_records(items, submitter, problems)


def _parse_submission(
    obj: dict[str, Any], submitter: str | None, problems: list[str]
) -> ParsedBundle:
    """Parse a Submission ``obj``: each record on its own, then the object; add to ``problems``.

    A ``submitter`` given besides the file's own must match it.
    """
    records: list[tuple[str, RunRecord | QualityResult]] = []
    raw_runs: list[tuple[str, dict[str, Any]]] = []
    failed = bool(problems)
    named = obj.get("submitter")
    given = (submitter or "").strip()
    if given and isinstance(named, str) and named.strip() != given:
        problems.append(
            f"bundle.submitter: the file names submitter {named.strip()!r}, but "
            f"--submitter {given!r} was given (drop --submitter or make them match)"
        )
        failed = True
    for key, kind in (("runs", "run"), ("quality", "quality")):
        values = obj.get(key)
        if not isinstance(values, list):
            continue
        for i, value in enumerate(values):
            if len(problems) >= MAX_PROBLEMS:
                problems.append(f"{key}[{i}]: ... checking stopped after {MAX_PROBLEMS} problems")
                failed = True
                break
            rec, errs = _parse_record(f"{key}[{i}]", value, kind)
            problems.extend(errs)
            if rec is not None:
                records.append((f"{key}[{i}]", rec))
            elif kind == "run" and isinstance(value, dict):
                raw_runs.append((f"{key}[{i}]", value))
    try:
        submission = Submission.model_validate(obj)
    except ValidationError as exc:
        bad_keys = {w.split("[", 1)[0] for w in problems if w.startswith(("runs[", "quality["))}
        shell_errors = [
            e
            for e in exc.errors(include_url=False)
            if not (len(e["loc"]) == 1 and e["loc"][0] in bad_keys)
            if not (
                len(e["loc"]) > 1
                and e["loc"][0] in ("runs", "quality")
                and isinstance(e["loc"][1], int)
            )
        ]
        if shell_errors:
            problems.extend(_pydantic_problems("", shell_errors))
        return ParsedBundle(None, records, problems, raw_runs)
    return ParsedBundle(None if failed else submission, records, problems, raw_runs)


def _parse_bare_records(
    items: list[tuple[str, Any]], submitter: str | None, problems: list[str]
) -> ParsedBundle:
    """Parse ``(where, value)`` bare records under ``submitter`` (required); add to ``problems``."""
    records: list[tuple[str, RunRecord | QualityResult]] = []
    raw_runs: list[tuple[str, dict[str, Any]]] = []
    failed = bool(problems)
    runs: list[RunRecord] = []
    quality: list[QualityResult] = []
    for where, obj in items:
        if len(problems) >= MAX_PROBLEMS:
            problems.append(f"{where}: ... checking stopped after {MAX_PROBLEMS} problems")
            failed = True
            break
        rec, errs = _parse_record(where, obj)
        problems.extend(errs)
        if rec is None:
            if isinstance(obj, dict) and _kind_of(obj) == "run":
                raw_runs.append((where, obj))
            failed = True
            continue
        records.append((where, rec))
        (runs if isinstance(rec, RunRecord) else quality).append(rec)  # type: ignore[arg-type]
    if (not submitter or not submitter.strip()) and (records or not problems):
        problems.append("bundle holds bare records: pass the submitter's name (--submitter NAME)")
        failed = True
    if not runs and not failed:
        problems.append("bundle holds no run record")
        failed = True
    if failed:
        return ParsedBundle(None, records, problems, raw_runs)
    try:
        submission = Submission(
            submitter=(submitter or "").strip(), runs=tuple(runs), quality=tuple(quality)
        )
    except ValidationError as exc:
        return ParsedBundle(None, records, _pydantic_problems("", exc), raw_runs)
    return ParsedBundle(submission, records, problems)
