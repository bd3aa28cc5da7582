"""Validation of community result bundles: every problem reported at once, nothing written.

A bundle is either a :class:`~mlenergy.records.Submission` JSON object, or records (run
records and quality results) as JSON Lines (``mlenergy bench --json`` output), a JSON array or
a single record object; then the submitter's name comes from the caller.

Every rule is a named check (:mod:`mlenergy.store.checks`; ``mlenergy submit --explain``
lists them) and each problem line names the record, the field and the check. Reading and
parsing, with their bounds, live in :mod:`mlenergy.store.bundle`; the provenance and source
rules in :mod:`mlenergy.store.rules`, the physics (limits from the GPU catalog) in
:mod:`mlenergy.store.physics`. The rules also run on the readable values of a record that
fails its schema, so one schema error does not hide the other problems.

Text fields are not rejected for their content; show them through :func:`escape_text`.
"""

from __future__ import annotations

import html
import unicodedata
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mlenergy.records import QualityResult, RunRecord, Submission
from mlenergy.store.bundle import (
    MAX_BUNDLE_BYTES,
    MAX_DEPTH,
    MAX_INT_DIGITS,
    MAX_PROBLEMS,
    ParsedBundle,
    load_json,
    parse_bundle,
    read_bounded,
)
from mlenergy.store.checks import tag
from mlenergy.store.facts import facts_from_record
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
    reserved_submitter_problem,
    task_problem,
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
    "PER_TOKEN_REL_TOL",
    "POWER_CEILING_FACTOR",
    "POWER_FLOOR_FRACTION",
    "ParsedBundle",
    "TdpLookup",
    "ValidationReport",
    "check_run",
    "escape_text",
    "load_json",
    "parse_bundle",
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


def terminal_text(text: object, max_len: int = 200) -> str:
    """Return ``text`` safe for a terminal: control characters (ANSI escapes) made visible."""
    out = "".join(
        ch if unicodedata.category(ch)[0] != "C" else f"\\x{ord(ch):02x}" for ch in str(text)
    )
    return out if len(out) <= max_len else out[: max_len - 1] + "…"


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
) -> ValidationReport:
    """Validate a result bundle against every rule and report all problems at once.

    Reads nothing but the bundle and writes nothing.

    Args:
        data: The bundle's bytes, or a path (``str`` or ``Path``) to it.
        submitter: Submitter name, required when the bundle holds bare records.
        tdp_lookup: Accelerator name -> TDP in watts, used when a record lacks
            ``hardware.accelerator_tdp_w`` (the CLI passes the estimator's GPU catalog).
        known_hashes: Content hashes already stored or pending; matching records are
            duplicates.
        known_run_ids: Stored ``run_id -> content hash``; reusing an id for other content is
            a problem.
        max_bytes: Size limit in bytes.
        known_tasks: Task labels accepted without a declaration.
        new_tasks: Task labels the submitter declares new (merged with the bundle's own).
        known_measurements: :func:`~mlenergy.store.rules.measurement_key` of runs already
            stored or pending -> a description of that run (e.g. its id and model id).
        known_runs: Stored and pending runs for the near-duplicate rule (figures within
            0.1%).

    Returns:
        The report; ``ok`` is True only when ``problems`` is empty.
    """
    raw, problems = read_bounded(data, max_bytes)
    if raw is None:
        return ValidationReport(False, problems)
    parsed = parse_bundle(raw, submitter, new_tasks)
    problems.extend(parsed.problems)
    problems.extend(tag("task-known", p) for p in declared_task_problems(parsed.new_tasks))
    hashes, duplicates = _duplicate_problems(parsed.records, known_hashes, known_run_ids or {})
    problems.extend(duplicates)
    problems.extend(_measurement_problems(parsed.records, known_measurements or {}, known_runs))
    problems.extend(_reserved_name_problems(parsed, submitter))
    unverified: list[str] = []
    # Every record that parsed is checked, even when others failed.
    for where, rec in parsed.records:
        fp = rec.model.config_fingerprint
        bad_id = model_id_problem(where, rec.model.model_id, fp)
        problems.extend([tag("model-id", bad_id)] if bad_id else [])
        if isinstance(rec, RunRecord):
            bad_task = task_problem(where, rec.workload.task, known_tasks, parsed.new_tasks)
            problems.extend([tag("task-known", bad_task)] if bad_task else [])
            problems.extend(check_run(rec, where, tdp_lookup))
            problems.extend(serving_problems(rec, where))
            reasons = unverified_reasons(facts_from_record(rec))
            if reasons:
                unverified.append(f"{where}: {'; '.join(reasons)}")
    # Records that failed their schema still get the rules their readable values allow.
    for where, obj in parsed.raw_runs:
        problems.extend(check_raw_run(obj, where, tdp_lookup))
    if len(problems) > MAX_PROBLEMS:
        extra = len(problems) - MAX_PROBLEMS
        problems = [*problems[:MAX_PROBLEMS], f"... and {extra} more problem(s)"]
    return ValidationReport(
        not problems, problems, parsed.submission, tuple(hashes), tuple(unverified)
    )


def _reserved_name_problems(parsed: ParsedBundle, submitter: str | None) -> list[str]:
    """Reserved submitter names: the bundle's, the caller's, and any a record carries."""
    names: list[tuple[str, object]] = [("bundle.submitter", submitter)]
    if parsed.submission is not None:
        names.append(("bundle.submitter", parsed.submission.submitter))
    for where, rec in parsed.records:
        if rec.submission is not None:
            names.append((f"{where}.submission.submitter", rec.submission.submitter))
    problems = []
    for where, name in names:
        problem = reserved_submitter_problem(where, name)
        if problem and problem not in problems:
            problems.append(problem)
    return problems


def _duplicate_problems(
    records: list[tuple[str, RunRecord | QualityResult]],
    known_hashes: Collection[str],
    stored_ids: Mapping[str, str],
) -> tuple[list[str], list[str]]:
    """Content hashes of ``records`` and their duplicate and id-reuse problems."""
    hashes: list[str] = []
    problems: list[str] = []
    seen: dict[str, str] = {}
    seen_ids: dict[str, str] = {}
    known = set(known_hashes)
    for where, rec in records:
        h = rec.content_hash()
        hashes.append(h)
        rid = rec.run_id if isinstance(rec, RunRecord) else rec.quality_id
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
        elif rid in seen_ids:
            problems.append(
                tag("run-id-unique", f"{where}: id {rid!r} is also used by {seen_ids[rid]}")
            )
        elif isinstance(rec, RunRecord) and rid in stored_ids and stored_ids[rid] != h:
            problems.append(
                tag("run-id-unique", f"{where}.run_id: {rid!r} is already used by a stored run")
            )
        seen.setdefault(h, where)
        seen_ids.setdefault(rid, where)
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
