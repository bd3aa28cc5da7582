"""A bundle's records checked against their schema, then put together as one Submission.

:class:`~mlenergy.store.bundle.BundleStream` hands out the records one at a time;
:func:`parse_record` checks each against its schema (problems named by field), and once every
record is read :func:`assemble` builds the :class:`~mlenergy.records.Submission` from the
records that passed and the bundle's other fields (or the caller's submitter, for bare
records).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pydantic import ValidationError

from mlenergy.records import QualityResult, RunRecord, Submission
from mlenergy.records.submission import normalise_name
from mlenergy.store.bundle import MAX_PROBLEMS, BundleStream, Item, kind_of
from mlenergy.store.checks import tag


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def pydantic_problems(where: str, exc: ValidationError | list[Any]) -> list[str]:
    """Schema problems, one line each naming the field, at most :data:`MAX_PROBLEMS`."""
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


def parse_record(item: Item) -> tuple[RunRecord | QualityResult | None, list[str]]:
    """The item checked against its record schema: the record, or its schema problems."""
    where, obj = item.where, item.value
    if not isinstance(obj, dict):
        return None, [tag("schema", f"{where}: expected a JSON object (a run or quality record)")]
    kind = item.expect or kind_of(obj)
    models: dict[str, type[RunRecord] | type[QualityResult]] = {
        "run": RunRecord,
        "quality": QualityResult,
    }
    model = models.get(kind)
    if model is None:
        return None, [tag("schema", f"{where}.record_type: unknown record type {str(kind)[:40]!r}")]
    try:
        return model.model_validate(obj), []
    except ValidationError as exc:
        return None, pydantic_problems(where, exc)


def declared_tasks(stream: BundleStream, new_tasks: Collection[str]) -> tuple[str, ...]:
    """Task labels declared new: the Submission's ``new_tasks`` and the caller's."""
    own = stream.shell.get("new_tasks") if stream.form == "submission" else None
    labels = [t for t in own if isinstance(t, str)] if isinstance(own, list) else []
    labels += [t.strip() for t in new_tasks if t.strip()]
    return tuple(dict.fromkeys(labels))


def normalised(name: object) -> str | None:
    """A name as kept (:func:`~mlenergy.records.submission.normalise_name`); ``None``: no text."""
    return normalise_name(name) if isinstance(name, str) else None


def assemble(
    stream: BundleStream,
    records: list[tuple[str, RunRecord | QualityResult]],
    submitter: str | None,
    declared: tuple[str, ...],
    failed: bool,
) -> tuple[Submission | None, list[str]]:
    """The bundle as one :class:`Submission` once every record is read, and its problems.

    Args:
        stream: The exhausted stream (its form and the Submission's other fields).
        records: The records that passed their schema, in bundle order.
        submitter: The caller's submitter name (required for bare records; for a Submission
            object it must match the file's).
        declared: Task labels declared new (kept on the submission).
        failed: Whether any record had a problem (no submission is built then).
    """
    runs = tuple(r for _, r in records if isinstance(r, RunRecord))
    quality = tuple(r for _, r in records if isinstance(r, QualityResult))
    given = normalised(submitter) or ""
    if stream.form == "records":
        problems = []
        if not given and (records or not failed):
            problems.append(
                "bundle holds bare records: pass the submitter's name (--submitter NAME)"
            )
        if not runs and not failed:
            problems.append("bundle holds no run record")
        if failed or problems:
            return None, problems
        try:
            return Submission(submitter=given, runs=runs, quality=quality, new_tasks=declared), []
        except ValidationError as exc:
            return None, pydantic_problems("", exc)
    shell = dict(stream.shell)
    problems = []
    named = normalised(shell.get("submitter"))
    if given and named is not None and named != given:
        problems.append(
            f"bundle.submitter: the file names submitter {named[:80]!r}, but "
            f"--submitter {given[:80]!r} was given (drop --submitter or make them match)"
        )
    for key, kept in (("runs", runs), ("quality", quality)):
        if key in stream.streamed:
            shell[key] = kept
    shell["new_tasks"] = declared
    try:
        submission = Submission.model_validate(shell)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        if failed:  # the streamed records' own problems are listed already
            errors = [e for e in errors if not (e["loc"] and e["loc"][0] in stream.streamed)]
        return None, problems + pydantic_problems("", errors)
    return (None if failed or problems else submission), problems
