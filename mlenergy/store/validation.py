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
  the pending queue), no reuse of a stored run id.

Text fields are not rejected for their content; show them through :func:`escape_text`.
"""

from __future__ import annotations

import html
import json
import unicodedata
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mlenergy.records import QualityResult, RunRecord, Submission

MAX_BUNDLE_BYTES = 5_000_000
"""Largest accepted bundle, in bytes (5 MB)."""
POWER_CEILING_FACTOR = 1.2
"""Average power may exceed the claimed devices' total TDP by at most this factor."""
POWER_FLOOR_FRACTION = 0.05
"""Average power must reach this fraction of the claimed devices' total TDP (the floor)."""
ENERGY_REL_TOL = 0.05
"""Allowed relative gap between ``energy_j`` and ``avg_power_w x duration_s``."""
PER_TOKEN_REL_TOL = 0.01
"""Allowed relative gap between ``energy_per_token_j`` and ``energy_j / tokens``."""
MAX_PROBLEMS = 200
"""Problems listed before the report is cut short."""

TdpLookup = Callable[[str], float | None]
"""Maps an accelerator name to its TDP in watts (``None`` if unknown)."""


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
        msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
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
    """

    submission: Submission | None
    records: list[tuple[str, RunRecord | QualityResult]]
    problems: list[str]


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


def parse_bundle(raw: bytes, submitter: str | None = None) -> ParsedBundle:
    """Parse bundle bytes, collecting every format and schema problem.

    Each record is checked on its own, so one bad record does not hide the others.

    Args:
        raw: The bundle's bytes (UTF-8 JSON or JSON Lines).
        submitter: Submitter name for a bundle of bare records (ignored for a Submission
            object, which names its own submitter).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return ParsedBundle(
            None, [], [f"bundle is not UTF-8 text (bad byte at offset {exc.start})"]
        )
    items, problems = _parse_items(text.lstrip("\ufeff"))
    records: list[tuple[str, RunRecord | QualityResult]] = []
    failed = bool(problems)
    if len(items) == 1 and isinstance(items[0][1], dict) and _kind_of(items[0][1]) == "submission":
        obj = items[0][1]
        for key, kind in (("runs", "run"), ("quality", "quality")):
            values = obj.get(key)
            if not isinstance(values, list):
                continue
            for i, value in enumerate(values):
                rec, errs = _parse_record(f"{key}[{i}]", value, kind)
                problems.extend(errs)
                if rec is not None:
                    records.append((f"{key}[{i}]", rec))
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
            return ParsedBundle(None, records, problems)
        return ParsedBundle(None if failed else submission, records, problems)
    runs: list[RunRecord] = []
    quality: list[QualityResult] = []
    for where, obj in items:
        rec, errs = _parse_record(where, obj)
        problems.extend(errs)
        if rec is None:
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
        return ParsedBundle(None, records, problems)
    try:
        submission = Submission(
            submitter=(submitter or "").strip(), runs=tuple(runs), quality=tuple(quality)
        )
    except ValidationError as exc:
        return ParsedBundle(None, records, _pydantic_problems("", exc))
    return ParsedBundle(submission, records, problems)


def _rel_gap(a: float, b: float) -> float:
    scale = max(abs(a), abs(b))
    return 0.0 if scale == 0 else abs(a - b) / scale


def _power_limits(
    run: RunRecord, where: str, tdp_lookup: TdpLookup | None
) -> tuple[tuple[float, float, str] | None, list[str]]:
    """Return ``(floor_w, ceiling_w, description)`` for the run's claimed hardware."""
    hw = run.hardware
    cpu_packages = max(1, len(run.scope.cpu_indices))
    if hw.accelerator_count > 0:
        name = hw.accelerator_model or ""
        tdp = hw.accelerator_tdp_w
        if tdp is None and tdp_lookup is not None:
            try:
                tdp = tdp_lookup(name)
            except Exception:  # a catalog failure must not hide the other problems
                tdp = None
        if tdp is None or not tdp > 0:
            return None, [
                f"{where}.hardware: unknown accelerator {name!r}: add accelerator_tdp_w (watts)"
            ]
        total = hw.accelerator_count * tdp
        ceiling = total * POWER_CEILING_FACTOR
        if run.scope.cpu_indices and hw.cpu_tdp_w:
            ceiling += cpu_packages * hw.cpu_tdp_w * POWER_CEILING_FACTOR
        floor = POWER_FLOOR_FRACTION * total
        return (floor, ceiling, f"{hw.accelerator_count} x {name} (TDP {tdp:g} W)"), []
    if hw.cpu_tdp_w is None:
        return None, [f"{where}.hardware.cpu_tdp_w: a CPU-only run needs the CPU TDP in watts"]
    total = cpu_packages * hw.cpu_tdp_w
    ceiling = total * POWER_CEILING_FACTOR
    return (
        POWER_FLOOR_FRACTION * total,
        ceiling,
        f"CPU {hw.cpu_model or '?'} (TDP {hw.cpu_tdp_w:g} W)",
    ), []


def check_run(run: RunRecord, where: str, tdp_lookup: TdpLookup | None = None) -> list[str]:
    """Check one run's provenance, physics and energy source; return its problems."""
    problems: list[str] = []
    source = run.energy_source
    for label, value in (
        ("energy_source", source),
        ("idle.energy_source", run.idle.energy_source if run.idle else None),
        (
            "power_timeline.energy_source",
            run.power_timeline.energy_source if run.power_timeline else None,
        ),
    ):
        if value is not None and value.startswith("emulated:"):
            problems.append(f"{where}.{label}: {value!r} comes from emulated test devices")
    if run.status != "ok":
        problems.append(f"{where}.status: only successful runs can be submitted")
    if run.hardware.accelerator_count == 0 and not run.hardware.cpu_model:
        problems.append(f"{where}.hardware.cpu_model: required for a CPU-only run")
    kind = source.split(":", 1)[0]
    if kind in ("measured", "modelled") and not (run.software.torch or run.software.engine):
        problems.append(
            f"{where}.software.torch: required for a measured or modelled run "
            "(or software.engine for a serving engine)"
        )
    if source.startswith("measured:zeus") and not run.software.zeus:
        problems.append(f"{where}.software.zeus: required for a Zeus measurement")
    energetic = [p for p in run.phases if p.energy_j is not None]
    if (
        run.status == "ok"
        and not energetic
        and not any(c.energy_j is not None for c in run.checkpoints)
    ):
        problems.append(f"{where}.phases: no energy figure (every energy_j is null)")

    limits, limit_problems = _power_limits(run, where, tdp_lookup)
    problems.extend(limit_problems)
    for i, phase in enumerate(run.phases):
        at = f"{where}.phases[{i}] ({phase.phase.value})"
        if phase.energy_j is None:
            continue
        if phase.duration_s <= 0:
            problems.append(f"{at}.duration_s: must be positive when energy_j is given")
            continue
        power = phase.energy_j / phase.duration_s
        if phase.avg_power_w is not None:
            implied = phase.avg_power_w * phase.duration_s
            gap = _rel_gap(phase.energy_j, implied)
            if gap > ENERGY_REL_TOL:
                problems.append(
                    f"{at}.energy_j: {phase.energy_j:.6g} J differs from avg_power_w x duration_s "
                    f"= {implied:.6g} J by {gap:.1%} (limit {ENERGY_REL_TOL:.0%})"
                )
        if limits is not None:
            floor, ceiling, desc = limits
            if not (floor <= power <= ceiling and power > 0):
                problems.append(
                    f"{at}: average power {power:.4g} W is outside the plausible range "
                    f"[{floor:.4g}, {ceiling:.4g}] W for {desc}"
                )
        if phase.energy_per_token_j is not None:
            if phase.tokens <= 0:
                problems.append(f"{at}.energy_per_token_j: given but tokens is 0")
            else:
                expected = phase.energy_j / phase.tokens
                gap = _rel_gap(phase.energy_per_token_j, expected)
                if gap > PER_TOKEN_REL_TOL:
                    problems.append(
                        f"{at}.energy_per_token_j: {phase.energy_per_token_j:.6g} J differs from "
                        f"energy_j / tokens = {expected:.6g} J by {gap:.1%}"
                    )
    idle_w = run.idle.avg_power_w if run.idle is not None else None
    if limits is not None and idle_w is not None and idle_w > limits[1]:
        problems.append(
            f"{where}.idle.avg_power_w: {idle_w:.4g} W exceeds {limits[1]:.4g} W for {limits[2]}"
        )
    return problems


def validate_bundle(
    data: bytes | str | Path,
    *,
    submitter: str | None = None,
    tdp_lookup: TdpLookup | None = None,
    known_hashes: Collection[str] = (),
    known_run_ids: Mapping[str, str] | None = None,
    max_bytes: int = MAX_BUNDLE_BYTES,
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

    Returns:
        The report; ``ok`` is True only when ``problems`` is empty.
    """
    raw, problems = _read(data, max_bytes)
    if raw is None:
        return ValidationReport(False, problems)
    parsed = parse_bundle(raw, submitter)
    problems.extend(parsed.problems)
    submission = parsed.submission
    hashes: list[str] = []
    seen: dict[str, str] = {}
    seen_ids: dict[str, str] = {}
    known = set(known_hashes)
    stored_ids = known_run_ids or {}
    # Every record that parsed is checked, even when others failed.
    for where, rec in parsed.records:
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
        if isinstance(rec, RunRecord):
            problems.extend(check_run(rec, where, tdp_lookup))
    if len(problems) > MAX_PROBLEMS:
        extra = len(problems) - MAX_PROBLEMS
        problems = [*problems[:MAX_PROBLEMS], f"... and {extra} more problem(s)"]
    return ValidationReport(not problems, problems, submission, tuple(hashes))
