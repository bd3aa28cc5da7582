"""Validation of community result bundles: every problem reported, nothing written.

A bundle is either a :class:`~mlenergy.records.Submission` JSON object, or records (run
records and quality results) as JSON Lines (``mlenergy bench --json`` output), a JSON array or
a single record object; then the submitter's name comes from the caller.

Every rule is a named check (:mod:`mlenergy.store.checks`; ``mlenergy submit --explain``
lists them) and each problem line names the record, the field and the check. The bundle is
read one record at a time (:mod:`mlenergy.store.bundle`, with the bounds of
:mod:`mlenergy.store.json_stream`), each record checked as it comes, and checking stops after
:data:`MAX_PROBLEMS` problems; the records are put together in
:mod:`mlenergy.store.bundle_assembly`. The provenance, source, time and identity rules live in
:mod:`mlenergy.store.rules`, the names in :mod:`mlenergy.store.names`, the physics (limits
from the GPU catalog) in :mod:`mlenergy.store.physics`. The rules also run on the readable
values of a record that fails its schema, so one schema error does not hide the others.

Names a reader sees are refused when they pretend (:mod:`mlenergy.store.names`); other text
fields are not rejected for their content: show them through :func:`escape_text`.
"""

from __future__ import annotations

import html
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from mlenergy.errors import terminal_text
from mlenergy.records import QualityResult, RunRecord, Submission
from mlenergy.store.bundle import (
    MAX_BUNDLE_BYTES,
    MAX_PROBLEMS,
    MAX_RECORDS,
    BundleStream,
    Item,
    decode_text,
    kind_of,
    read_bounded,
)
from mlenergy.store.bundle_assembly import assemble, declared_tasks, parse_record
from mlenergy.store.checks import tag
from mlenergy.store.facts import facts_from_record
from mlenergy.store.json_stream import MAX_DEPTH, MAX_INT_DIGITS, load_json
from mlenergy.store.names import reserved_problem, submitter_problems
from mlenergy.store.near_duplicates import NEAR_DUPLICATE_REL_TOL, NearDuplicateIndex
from mlenergy.store.rules import (
    ENERGY_REL_TOL,
    KNOWN_TASKS,
    PER_TOKEN_REL_TOL,
    POWER_CEILING_FACTOR,
    POWER_FLOOR_FRACTION,
    TdpLookup,
    check_raw_run,
    check_run,
    declared_task_problems,
    measurement_key,
    model_id_problem,
    shown_text_problems,
    task_problem,
    time_problems,
    unverified_reasons,
)
from mlenergy.store.serving_checks import serving_problems
from mlenergy.store.tables import flatten_run

__all__ = [
    "ENERGY_REL_TOL",
    "MAX_BUNDLE_BYTES",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_PROBLEMS",
    "MAX_RECORDS",
    "PER_TOKEN_REL_TOL",
    "POWER_CEILING_FACTOR",
    "POWER_FLOOR_FRACTION",
    "TdpLookup",
    "ValidationReport",
    "check_run",
    "escape_text",
    "load_json",
    "terminal_text",
    "validate_bundle",
]


@dataclass(frozen=True)
class ValidationReport:
    """Outcome of :func:`validate_bundle`.

    Attributes:
        ok: True when there is no problem.
        problems: One line per failed rule (empty when ``ok``).
        submission: The parsed bundle (``None`` when it could not be parsed at all; it may be
            set although ``ok`` is False).
        content_hashes: Content hashes of the bundle's parsed records, in bundle order.
        unverified: ``where: reasons`` of measured runs that lack the provenance a real run
            records; they are queued all the same and shown as unverified
            (check ``measured-provenance``).
    """

    ok: bool
    problems: list[str] = field(default_factory=list)
    submission: Submission | None = None
    content_hashes: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()


def escape_text(text: object) -> str:
    """Return ``text`` safe to show in HTML (a model named ``<script>`` shows as text)."""
    return html.escape(str(text), quote=True)


def validate_bundle(
    data: bytes | str | Path,
    *,
    submitter: str | None = None,
    tdp_lookup: TdpLookup | None = None,
    known_hashes: Collection[str] = (),
    known_run_ids: Mapping[str, str] | None = None,
    max_bytes: int = MAX_BUNDLE_BYTES,
    known_tasks: Collection[str] = KNOWN_TASKS,
    new_tasks: Collection[str] = (),
    known_measurements: Mapping[str, str] | None = None,
    known_runs: NearDuplicateIndex | None = None,
    known_quality_ids: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> ValidationReport:
    """Validate a result bundle against every rule and report its problems.

    Reads nothing but the bundle and writes nothing. Records are read one at a time
    (:class:`~mlenergy.store.bundle.BundleStream`) and checked as they come; only the records
    that pass their schema are kept (they make up the submission). Checking stops after
    :data:`MAX_PROBLEMS` problems, with a last line saying how much was left unread.

    Args:
        data: The bundle's bytes, or a path (``str`` or ``Path``) to it.
        submitter: Submitter name, required when the bundle holds bare records.
        tdp_lookup: Accelerator name -> TDP in watts, used when a record lacks
            ``hardware.accelerator_tdp_w`` (the CLI passes the estimator's GPU catalog).
        known_hashes: Content hashes already stored or pending; matching records are
            duplicates.
        known_run_ids: Stored and pending ``run_id -> content hash``; reusing an id for
            other content is a problem.
        max_bytes: Size limit in bytes.
        known_tasks: Task labels accepted without a declaration.
        new_tasks: Task labels the submitter declares new (merged with the bundle's own).
        known_measurements: :func:`~mlenergy.store.rules.measurement_key` of runs already
            stored or pending -> a description of that run (e.g. its id and model id).
        known_runs: Stored and pending runs for the near-duplicate rule (figures within
            0.1%).
        known_quality_ids: Stored and pending ``quality_id -> content hash``, likewise.
        now: The current time (UTC) for the rule on future times; ``None``: the clock.

    Returns:
        The report; ``ok`` is True only when ``problems`` is empty.
    """
    raw, problems = read_bounded(data, max_bytes)
    text = None
    if raw is not None:
        text, problems = decode_text(raw)
    if text is None:
        return ValidationReport(False, problems)
    del raw
    now = now or datetime.now(UTC)
    stream = BundleStream(text)
    records: list[tuple[str, RunRecord | QualityResult]] = []
    unverified: list[str] = []
    stopped = None
    for item in stream.items():
        problems.extend(_item_problems(item, records, unverified, tdp_lookup, now))
        if len(problems) >= MAX_PROBLEMS:
            stopped = (
                f"... and {stream.rest()} not checked (checking stops after "
                f"{MAX_PROBLEMS} problems)"
            )
            break
    problems.extend(stream.problems)
    declared = declared_tasks(stream, new_tasks)
    problems.extend(tag("task-known", p) for p in declared_task_problems(declared))
    for where, rec in records:
        if isinstance(rec, RunRecord):
            bad_task = task_problem(where, rec.workload.task, known_tasks, declared)
            problems.extend([tag("task-known", bad_task)] if bad_task else [])
    hashes, duplicates = _duplicate_problems(
        records, known_hashes, known_run_ids or {}, known_quality_ids or {}
    )
    problems.extend(duplicates)
    problems.extend(_measurement_problems(records, known_measurements or {}, known_runs))
    problems.extend(_submitter_problems(stream, submitter))
    submission, shell_problems = assemble(stream, records, submitter, declared, bool(problems))
    problems.extend(shell_problems)
    if len(problems) > MAX_PROBLEMS + 1:
        extra = len(problems) - MAX_PROBLEMS
        problems = [*problems[:MAX_PROBLEMS], f"... and {extra} more problem(s)"]
    problems.extend([stopped] if stopped else [])
    return ValidationReport(not problems, problems, submission, tuple(hashes), tuple(unverified))


def _item_problems(
    item: Item,
    records: list[tuple[str, RunRecord | QualityResult]],
    unverified: list[str],
    tdp_lookup: TdpLookup | None,
    now: datetime,
) -> list[str]:
    """Check one record as read: its schema, then every rule of one record.

    A record that passes its schema is appended to ``records`` (and to ``unverified`` when it
    lacks measured provenance); a run that fails it still gets the rules its readable values
    allow.
    """
    if item.problem is not None:
        return [item.problem]
    rec, problems = parse_record(item)
    where = item.where
    if rec is None:
        obj = item.value
        if isinstance(obj, dict) and (item.expect or kind_of(obj)) == "run":
            problems.extend(check_raw_run(obj, where, tdp_lookup))
        return problems
    records.append((where, rec))
    model_id = rec.model.model_id
    bad_id = model_id_problem(where, model_id, rec.model.config_fingerprint)
    problems.extend([tag("model-id", bad_id)] if bad_id else [])
    lookalike = reserved_problem(f"{where}.model.model_id", "model id", model_id, stems=False)
    problems.extend([lookalike] if lookalike else [])
    problems.extend(shown_text_problems(where, rec))
    problems.extend(time_problems(where, rec, now))
    if rec.submission is not None:
        problems.extend(
            submitter_problems(f"{where}.submission.submitter", rec.submission.submitter)
        )
    if isinstance(rec, RunRecord):
        problems.extend(check_run(rec, where, tdp_lookup))
        problems.extend(serving_problems(rec, where))
        reasons = unverified_reasons(facts_from_record(rec))
        if reasons:
            unverified.append(f"{where}: {'; '.join(reasons)}")
    return problems


def _submitter_problems(stream: BundleStream, submitter: str | None) -> list[str]:
    """Problems of the submitter's name: the caller's and the bundle's own."""
    problems = submitter_problems("bundle.submitter", submitter)
    if stream.form == "submission":
        for problem in submitter_problems("bundle.submitter", stream.shell.get("submitter")):
            if problem not in problems:
                problems.append(problem)
    return problems


def _duplicate_problems(
    records: list[tuple[str, RunRecord | QualityResult]],
    known_hashes: Collection[str],
    known_run_ids: Mapping[str, str],
    known_quality_ids: Mapping[str, str],
) -> tuple[list[str], list[str]]:
    """Content hashes of ``records`` and their duplicate and id-reuse problems."""
    hashes: list[str] = []
    problems: list[str] = []
    seen: dict[str, str] = {}
    seen_ids: dict[tuple[str, str], str] = {}
    known = set(known_hashes)
    for where, rec in records:
        h = rec.content_hash()
        hashes.append(h)
        is_run = isinstance(rec, RunRecord)
        rid = rec.run_id if isinstance(rec, RunRecord) else rec.quality_id
        taken = known_run_ids if is_run else known_quality_ids
        field_name = "run_id" if is_run else "quality_id"
        if h in seen:
            problems.append(
                tag("no-duplicate", f"{where}: duplicates {seen[h]} (same content hash {h[:12]})")
            )
        elif h in known:
            problems.append(
                tag(
                    "no-duplicate",
                    f"{where}: duplicate of a record already stored or pending "
                    f"(content hash {h[:12]})",
                )
            )
        elif (field_name, rid) in seen_ids:
            problems.append(
                tag(
                    "run-id-unique",
                    f"{where}: id {rid!r} is also used by {seen_ids[field_name, rid]}",
                )
            )
        elif rid in taken and taken[rid] != h:
            problems.append(
                tag(
                    "run-id-unique",
                    f"{where}.{field_name}: {rid!r} is already used by a stored or pending "
                    "record with other content (give this record a fresh id)",
                )
            )
        seen.setdefault(h, where)
        seen_ids.setdefault((field_name, rid), where)
    return hashes, problems


def _measurement_problems(
    records: list[tuple[str, RunRecord | QualityResult]],
    known: Mapping[str, str],
    known_runs: NearDuplicateIndex | None = None,
) -> list[str]:
    """Runs carrying a measurement already in the bundle, store or queue.

    Exact duplicates (same content hash) are reported by :func:`_duplicate_problems`; this
    catches the same figures under another model id, run id or timestamp, and figures all
    within 0.1% of another run's (:mod:`mlenergy.store.near_duplicates`).
    """
    bundle_runs = NearDuplicateIndex()
    problems: list[str] = []
    seen: dict[str, tuple[str, str]] = {}
    hashes: set[str] = set()
    for where, rec in records:
        if not isinstance(rec, RunRecord):
            continue
        h = rec.content_hash()
        if h in hashes:
            continue  # an exact duplicate, already reported
        hashes.add(h)
        flat = flatten_run(rec, content_hash=h)
        key = measurement_key(flat)
        if key is None:
            continue
        model = _short(rec.model.model_id)
        near = bundle_runs.find(flat) or (known_runs.find(flat) if known_runs else None)
        bundle_runs.add(flat, f"{where} (model {model!r})")
        if key in seen:
            other, other_model = seen[key]
            problems.append(
                tag(
                    "no-near-duplicate",
                    f"{where}: same measurement as {other} (identical phase figures) under "
                    f"model id {model!r} (there {other_model!r}): one measurement is "
                    "submitted once",
                )
            )
        elif key in known:
            problems.append(
                tag(
                    "no-near-duplicate",
                    f"{where}: same measurement (identical phase figures) as {known[key]}, now "
                    f"under model id {model!r}: one measurement is submitted once",
                )
            )
        elif near is not None:
            problems.append(
                tag(
                    "no-near-duplicate",
                    f"{where}: every figure is within {NEAR_DUPLICATE_REL_TOL:.1%} of {near}: "
                    "the same measurement, slightly altered, is submitted once",
                )
            )
        seen.setdefault(key, (where, model))
    return problems


def _short(text: str, max_len: int = 80) -> str:
    """``text`` cut to ``max_len`` characters for a problem line (escaped where shown)."""
    return text if len(text) <= max_len else text[: max_len - 1] + "…"
