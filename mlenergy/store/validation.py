"""Validation of community result bundles: every problem reported at once, nothing written.

A bundle is either a :class:`~mlenergy.records.Submission` JSON object, or records (run
records and quality results) as JSON Lines (``mlenergy bench --json`` output), a JSON array or
a single record object; then the submitter's name comes from the caller.

Rules, each reported as one line naming the record and the field:

* size at most :data:`MAX_BUNDLE_BYTES`; UTF-8 JSON;
* the JSON Schema of the records (no unknown fields, types, ranges);
* provenance: CPU model for CPU runs, the torch version (or serving engine) for measured or
  modelled runs, the Zeus version for Zeus measurements, at least one energy figure,
  successful runs only;
* physics per phase: average power within [5% of TDP, TDP x 1.2], TDP being the claimed
  accelerators' total (CPU-only runs: the CPU TDP); energy equal to average power x duration
  within 5%; energy per token equal to energy / tokens within 1%;
* no ``emulated:*`` energy figures (test devices);
* no duplicates (content hash) within the bundle or against ``known_hashes`` (the store and
  the pending queue), no reuse of a stored run id;
* identity: a model id is a hub id (``org/name``), a preset (``preset:<name>``) or a config
  fingerprint (``config:<name>@<hex>``); a run's task is a known task (``known_tasks``) or
  declared new (the Submission's ``new_tasks``, or ``new_tasks`` given by the caller);
* no measurement twice: runs whose phase figures are identical (see
  :func:`~mlenergy.store.rules.measurement_key`) are duplicates, whatever model id they
  carry, within the bundle or against ``known_measurements``.

The provenance, physics and energy-source rules live in :mod:`mlenergy.store.rules`; they also
run on the readable values of a record that fails its schema, so one schema error does not
hide the other problems.

Text fields are not rejected for their content; show them through :func:`escape_text`.
"""

from __future__ import annotations

import html
import json
import unicodedata
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mlenergy.records import QualityResult, RunRecord, Submission
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
    task_problem,
)
from mlenergy.store.serving_checks import serving_problems
from mlenergy.store.tables import flatten_run

__all__ = [
    "ENERGY_REL_TOL",
    "MAX_BUNDLE_BYTES",
    "MAX_PROBLEMS",
    "PER_TOKEN_REL_TOL",
    "POWER_CEILING_FACTOR",
    "POWER_FLOOR_FRACTION",
    "ParsedBundle",
    "TdpLookup",
    "ValidationReport",
    "check_run",
    "escape_text",
    "parse_bundle",
    "terminal_text",
    "validate_bundle",
]

MAX_BUNDLE_BYTES = 5_000_000
"""Largest accepted bundle, in bytes (5 MB)."""
MAX_PROBLEMS = 200
"""Problems listed before the report is cut short."""


@dataclass(frozen=True)
class ValidationReport:
    """Outcome of :func:`validate_bundle`.

    Attributes:
        ok: True when there is no problem.
        problems: One line per failed rule (empty when ``ok``).
        submission: The parsed bundle (``None`` when it could not be parsed at all; it may be
            set although ``ok`` is False).
        content_hashes: Content hashes of the bundle's parsed records, in bundle order.
    """

    ok: bool
    problems: list[str] = field(default_factory=list)
    submission: Submission | None = None
    content_hashes: tuple[str, ...] = ()


def escape_text(text: object) -> str:
    """Return ``text`` safe to show in HTML (a model named ``<script>`` shows as text)."""
    return html.escape(str(text), quote=True)


def terminal_text(text: object, max_len: int = 200) -> str:
    """Return ``text`` safe for a terminal: control characters (ANSI escapes) made visible."""
    out = "".join(
        ch if unicodedata.category(ch)[0] != "C" else f"\\x{ord(ch):02x}" for ch in str(text)
    )
    return out if len(out) <= max_len else out[: max_len - 1] + "…"


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _pydantic_problems(where: str, exc: ValidationError | list[Any]) -> list[str]:
    problems = []
    errors = exc.errors(include_url=False) if isinstance(exc, ValidationError) else exc
    for err in errors:
        loc = _loc(tuple(err["loc"]))
        msg = "unknown field" if err["type"] == "extra_forbidden" else str(err["msg"])
        msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        target = f"{where}.{loc}" if where and loc else (where or loc or "bundle")
        problems.append(f"{target}: {msg}")
    return problems


def _read(data: bytes | str | Path, max_bytes: int) -> tuple[bytes | None, list[str]]:
    if isinstance(data, bytes):
        raw = data
    else:
        path = Path(data)
        try:
            size = path.stat().st_size
            if size > 4 * max_bytes:  # do not even read a huge file
                return None, [
                    f"bundle is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:g} MB limit"
                ]
            raw = path.read_bytes()
        except OSError as exc:
            return None, [f"cannot read bundle {path}: {exc.strerror or exc}"]
    problems = []
    if len(raw) > max_bytes:
        problems.append(f"bundle is {len(raw) / 1e6:.1f} MB, over the {max_bytes / 1e6:g} MB limit")
    return raw, problems


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
        return [], ["bundle is empty"]
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError as whole:
        first = stripped.splitlines()[0]
        try:
            json.loads(first)
        except ValueError:  # one broken JSON document, not JSON Lines
            return [], [
                f"bundle is not valid JSON ({whole.msg} at line {whole.lineno} "
                f"column {whole.colno})"
            ]
        items: list[tuple[str, Any]] = []
        problems: list[str] = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                items.append((f"line {n}", json.loads(line)))
            except ValueError as exc:
                problems.append(f"line {n}: not valid JSON ({exc.msg} at column {exc.colno})")
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
        return None, [f"{where}: expected a JSON object (a run or quality record)"]
    kind = expect or _kind_of(obj)
    model = {"run": RunRecord, "quality": QualityResult}.get(kind)
    if model is None:
        return None, [f"{where}.record_type: unknown record type {kind!r}"]
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
        obj = json.loads(raw.decode("utf-8").lstrip("\ufeff"))
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
            None, [], [f"bundle is not UTF-8 text (bad byte at offset {exc.start})"]
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

    Returns:
        The report; ``ok`` is True only when ``problems`` is empty.
    """
    raw, problems = _read(data, max_bytes)
    if raw is None:
        return ValidationReport(False, problems)
    parsed = parse_bundle(raw, submitter, new_tasks)
    problems.extend(parsed.problems)
    problems.extend(declared_task_problems(parsed.new_tasks))
    hashes, duplicates = _duplicate_problems(parsed.records, known_hashes, known_run_ids or {})
    problems.extend(duplicates)
    problems.extend(_measurement_problems(parsed.records, known_measurements or {}))
    # Every record that parsed is checked, even when others failed.
    for where, rec in parsed.records:
        fp = rec.model.config_fingerprint
        bad_id = model_id_problem(where, rec.model.model_id, fp)
        problems.extend([bad_id] if bad_id else [])
        if isinstance(rec, RunRecord):
            bad_task = task_problem(where, rec.workload.task, known_tasks, parsed.new_tasks)
            problems.extend([bad_task] if bad_task else [])
            problems.extend(check_run(rec, where, tdp_lookup))
            problems.extend(serving_problems(rec, where))
    # Records that failed their schema still get the rules their readable values allow.
    for where, obj in parsed.raw_runs:
        problems.extend(check_raw_run(obj, where, tdp_lookup))
    if len(problems) > MAX_PROBLEMS:
        extra = len(problems) - MAX_PROBLEMS
        problems = [*problems[:MAX_PROBLEMS], f"... and {extra} more problem(s)"]
    return ValidationReport(not problems, problems, parsed.submission, tuple(hashes))


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
            problems.append(f"{where}: duplicates {seen[h]} (same content hash {h[:12]})")
        elif h in known:
            problems.append(
                f"{where}: duplicate of a record already stored or pending (content hash {h[:12]})"
            )
        elif rid in seen_ids:
            problems.append(f"{where}: id {rid!r} is also used by {seen_ids[rid]}")
        elif isinstance(rec, RunRecord) and rid in stored_ids and stored_ids[rid] != h:
            problems.append(f"{where}.run_id: {rid!r} is already used by a stored run")
        seen.setdefault(h, where)
        seen_ids.setdefault(rid, where)
    return hashes, problems


def _measurement_problems(
    records: list[tuple[str, RunRecord | QualityResult]], known: Mapping[str, str]
) -> list[str]:
    """Runs carrying a measurement (identical figures) already in the bundle, store or queue.

    Exact duplicates (same content hash) are reported by :func:`_duplicate_problems`; this
    catches the same figures under another model id, run id or timestamp.
    """
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
        key = measurement_key(flatten_run(rec, content_hash=h))
        if key is None:
            continue
        model = _short(rec.model.model_id)
        if key in seen:
            other, other_model = seen[key]
            problems.append(
                f"{where}: same measurement as {other} (identical phase figures) under model "
                f"id {model!r} (there {other_model!r}): one measurement is submitted once"
            )
        elif key in known:
            problems.append(
                f"{where}: same measurement (identical phase figures) as {known[key]}, now "
                f"under model id {model!r}: one measurement is submitted once"
            )
        seen.setdefault(key, (where, model))
    return problems


def _short(text: str, max_len: int = 80) -> str:
    """``text`` cut to ``max_len`` characters for a problem line (escaped where shown)."""
    return text if len(text) <= max_len else text[: max_len - 1] + "…"
