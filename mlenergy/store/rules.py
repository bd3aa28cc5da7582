"""Provenance, source and identity rules of submitted runs, on plain values.

The rules read a :class:`~mlenergy.store.facts.RunFacts` built from a parsed record or from
the raw dict of one that failed its schema (see :mod:`mlenergy.store.facts`), so one schema
error does not hide the other problems. The physics rules, with their limits from the GPU
catalog, live in :mod:`mlenergy.store.physics`; every problem names its check
(:mod:`mlenergy.store.checks`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from mlenergy.records import QualityResult, RunRecord, sha256_hex
from mlenergy.store.checks import tag
from mlenergy.store.facts import PRESENT, PhaseFacts, RunFacts, facts_from_raw, facts_from_record
from mlenergy.store.gpus import GpuLookup, gpu_lookup
from mlenergy.store.names import text_problem
from mlenergy.store.near_duplicates import flat_number
from mlenergy.store.physics import (
    ENERGY_REL_TOL,
    PER_TOKEN_REL_TOL,
    POWER_CEILING_FACTOR,
    POWER_FLOOR_FRACTION,
    check_physics,
    rel_gap,
)
from mlenergy.store.tables import PHASES

__all__ = [
    "ENERGY_REL_TOL",
    "PER_TOKEN_REL_TOL",
    "POWER_CEILING_FACTOR",
    "POWER_FLOOR_FRACTION",
    "PRESENT",
    "PhaseFacts",
    "RunFacts",
    "TdpLookup",
    "check_facts",
    "check_raw_run",
    "check_run",
    "facts_from_raw",
    "facts_from_record",
    "rel_gap",
]

TdpLookup = GpuLookup
"""Maps an accelerator name to its catalog facts (or only its TDP in watts; ``None``: unknown)."""


RESERVED_SOURCE_PREFIXES = ("reference:", "emulated:")
"""Energy-source labels no submitter may use: the maintainers' reference imports, test devices."""
TIMELINE_COVERAGE = 0.95
"""A measured run's power timeline must span this fraction of its longest phase at least."""
CLOCK_SKEW = timedelta(minutes=10)
"""How far in the future a record's time may lie (the submitter's clock may run ahead)."""


def source_problems(where: str, facts: RunFacts) -> list[str]:
    """No energy figure from emulated test devices or labelled as reference data."""
    problems = []
    for label, value in (
        ("energy_source", facts.energy_source),
        ("idle.energy_source", facts.idle_energy_source),
        ("power_timeline.energy_source", facts.timeline_energy_source),
    ):
        if value is None:
            continue
        if value.startswith("emulated:"):
            problems.append(
                tag(
                    "no-emulated-source",
                    f"{where}.{label}: {value[:80]!r} comes from emulated test devices",
                )
            )
        elif value.startswith(RESERVED_SOURCE_PREFIXES):
            problems.append(
                tag(
                    "no-reserved-source",
                    f"{where}.{label}: {value[:80]!r} is reserved for the maintainers' reference "
                    "imports; label what you measured (measured:zeus-nvml, ...)",
                )
            )
    for label, value in (
        ("hardware.accelerator_model", facts.accelerator_model),
        ("hardware.cpu_model", facts.cpu_model),
    ):
        if value is not None and "emulated" in value.casefold():
            problems.append(
                tag("no-emulated-source", f"{where}.{label}: {value[:80]!r} is an emulated device")
            )
    return problems


def unverified_reasons(facts: RunFacts) -> list[str]:
    """What a measured run lacks of the provenance a real run records (empty: verified).

    A run whose energy is not ``measured:*`` has nothing to verify here (its label says
    what it is). A measured run names its devices and driver, the Zeus version, the
    measured GPU indices, and carries a measured power timeline spanning its longest phase.
    """
    if not (facts.energy_source or "").startswith("measured:"):
        return []
    reasons = []
    count = facts.accelerator_count or 0
    if count > 0:
        if not facts.accelerator_model or not facts.driver_version:
            reasons.append("no device name or driver version")
        if facts.gpu_indices != count:
            reasons.append(f"scope names {facts.gpu_indices} measured GPU(s) of {count}")
    elif not facts.cpu_model or facts.cpu_packages == 0:
        reasons.append("no measured CPU package named")
    if not facts.zeus:
        reasons.append("no Zeus version")
    source = facts.timeline_energy_source or ""
    span = facts.timeline_span_s
    longest = max((p.duration_s or 0.0 for p in facts.phases), default=0.0)
    if span is None or not source.startswith("measured:"):
        reasons.append("no measured power timeline")
    elif span[1] - span[0] < TIMELINE_COVERAGE * longest:
        reasons.append(
            f"power timeline spans {span[1] - span[0]:.3g} s of the {longest:.3g} s phase window"
        )
    return reasons


def provenance_problems(where: str, facts: RunFacts) -> list[str]:
    """Successful run, CPU model, torch/engine and Zeus versions, at least one energy figure."""
    problems: list[str] = []
    if facts.status is not None and facts.status != "ok":
        problems.append(
            tag("run-succeeded", f"{where}.status: only successful runs can be submitted")
        )
    if facts.accelerator_count == 0 and not facts.cpu_model:
        problems.append(
            tag("cpu-model-given", f"{where}.hardware.cpu_model: required for a CPU-only run")
        )
    source = facts.energy_source or ""
    if source.split(":", 1)[0] in ("measured", "modelled") and not (facts.torch or facts.engine):
        problems.append(
            tag(
                "software-versions",
                f"{where}.software.torch: required for a measured or modelled run "
                "(or software.engine for a serving engine)",
            )
        )
    if source.startswith("measured:zeus") and not facts.zeus:
        problems.append(
            tag("software-versions", f"{where}.software.zeus: required for a Zeus measurement")
        )
    if (
        facts.status == "ok"
        and not any(p.energy_j is not None for p in facts.phases)
        and not facts.checkpoint_energy
    ):
        problems.append(
            tag("has-energy", f"{where}.phases: no energy figure (every energy_j is null)")
        )
    return problems


def check_facts(where: str, facts: RunFacts, tdp_lookup: GpuLookup | None = None) -> list[str]:
    """Every provenance, physics and energy-source rule of one run; return its problems.

    Args:
        where: Where the run sits in its bundle (``runs[0]``), prefixed to each problem.
        facts: The run's values.
        tdp_lookup: Accelerator name -> catalog facts (or TDP in watts); ``None``: the GPU
            catalog (:func:`mlenergy.store.gpus.gpu_lookup`). Never the record's own TDP.
    """
    lookup = tdp_lookup if tdp_lookup is not None else gpu_lookup()
    problems = source_problems(where, facts) + provenance_problems(where, facts)
    return problems + check_physics(where, facts, lookup)


def check_run(run: RunRecord, where: str, tdp_lookup: GpuLookup | None = None) -> list[str]:
    """Check one parsed run's provenance, physics and energy source; return its problems."""
    return check_facts(where, facts_from_record(run), tdp_lookup)


def check_raw_run(
    obj: Mapping[str, Any], where: str, tdp_lookup: GpuLookup | None = None
) -> list[str]:
    """The same rules on a raw run dict that failed its schema (readable values only)."""
    return check_facts(where, facts_from_raw(obj), tdp_lookup)


def time_problems(where: str, record: RunRecord | QualityResult, now: datetime) -> list[str]:
    """A record's times: none later than ``now`` plus :data:`CLOCK_SKEW`, none ending early.

    Args:
        where: Where the record sits in its bundle, prefixed to each problem.
        record: A run or quality record (times are timezone-aware, UTC).
        now: The current time (timezone-aware).
    """
    latest = now + CLOCK_SKEW
    times: list[tuple[str, datetime | None]] = [("created_at", record.created_at)]
    if isinstance(record, RunRecord):
        times += [("started_at", record.started_at), ("ended_at", record.ended_at)]
    problems = []
    for name, when in times:
        if when is not None and _aware(when) > latest:
            problems.append(
                tag(
                    "times-plausible",
                    f"{where}.{name}: {when.isoformat()} lies in the future (now is "
                    f"{now:%Y-%m-%dT%H:%M}Z; at most {CLOCK_SKEW.seconds // 60} minutes of "
                    "clock skew are allowed)",
                )
            )
    if isinstance(record, RunRecord) and record.started_at and record.ended_at:
        start, end = _aware(record.started_at), _aware(record.ended_at)
        if end < start:
            problems.append(
                tag(
                    "times-plausible",
                    f"{where}.ended_at: the run ends {_span(start - end)} before it starts "
                    f"({record.started_at.isoformat()})",
                )
            )
    return problems


def _aware(when: datetime) -> datetime:
    """``when`` with a time zone (a naive time is read as UTC)."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _span(delta: timedelta) -> str:
    days = delta.total_seconds() / 86_400
    return f"{days:,.0f} day(s)" if days >= 1 else f"{delta.total_seconds():,.3g} s"


SHOWN_TEXT = (
    ("model.model_id", "model id"),
    ("model.architecture", "architecture"),
    ("model.dtype", "dtype"),
    ("hardware.accelerator_model", "accelerator name"),
    ("hardware.cpu_model", "CPU name"),
    ("software.engine", "engine name"),
)
"""The names of a record the leaderboard shows (dotted paths), with what each is."""


def shown_text_problems(where: str, record: RunRecord | QualityResult) -> list[str]:
    """The names a reader sees (model id, hardware, dtype, engine) hold visible text only."""
    problems = []
    for path, what in SHOWN_TEXT:
        value: Any = record
        for part in path.split("."):
            value = getattr(value, part, None)
        problem = text_problem(f"{where}.{path}", what, value)
        if problem:
            problems.append(problem)
    return problems


# ---------------------------------------------------------------------- identity

HUB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}$")
"""A Hugging Face hub id: ``org/name`` (letters, digits, ``-``, ``_``, ``.``)."""
PRESET_ID_RE = re.compile(r"^preset:[a-z0-9][a-z0-9_\-]{0,63}$")
"""A built-in preset: ``preset:<name>``."""
CONFIG_ID_RE = re.compile(
    r"^config:(?P<name>[A-Za-z0-9][A-Za-z0-9_.\-/]{0,127})@(?P<fp>[0-9a-f]{8,64})$"
)
"""A model built from a config file: ``config:<name>@<config fingerprint prefix>``."""
FINGERPRINT_RE = re.compile(r"^[0-9a-f]{16,64}$")
"""A bare config fingerprint (hex)."""
TASK_RE = re.compile(r"^[a-z0-9][a-z0-9_.:\-/]{0,63}$")
"""A task label: lower-case letters, digits and ``-_.:/``, at most 64 characters."""

KNOWN_TASKS: frozenset[str] = frozenset(
    {
        "lm-arena-chat",
        "gpqa",
        "sourcegraph-fim",
        "image-chat",
        "video-chat",
        "v2-sharegpt-chat",
        "v2-code",
        "perplexity",
        "training",
        "dense-vs-moe",
    }
)
"""Tasks the leaderboard knows without a declaration: ML.ENERGY's and mlenergy's own."""


def model_id_problem(where: str, model_id: str, config_fingerprint: str | None) -> str | None:
    """Why ``model_id`` does not look like a model id, or ``None`` when it does.

    Accepted: a hub id (``org/name``), a preset (``preset:<name>``), a config fingerprint
    (``config:<name>@<hex>`` whose hex starts the record's ``config_fingerprint``, or the bare
    fingerprint itself).
    """
    if HUB_ID_RE.match(model_id) and ".." not in model_id:
        return None
    if PRESET_ID_RE.match(model_id):
        return None
    fp = (config_fingerprint or "").lower()
    match = CONFIG_ID_RE.match(model_id)
    if match is not None:
        if fp and not fp.startswith(match["fp"]):
            return (
                f"{where}.model.model_id: {model_id!r} names config fingerprint {match['fp']}, "
                f"but the record's config_fingerprint is {fp}"
            )
        return None
    if FINGERPRINT_RE.match(model_id) and (not fp or model_id == fp):
        return None
    return (
        f"{where}.model.model_id: {model_id[:80]!r} is not a model id; use a hub id "
        "('org/name'), a preset ('preset:<name>') or a config fingerprint "
        "('config:<name>@<hex>')"
    )


def task_problem(
    where: str, task: str | None, known: Collection[str], declared: Collection[str]
) -> str | None:
    """Why ``task`` is not acceptable, or ``None`` (no task, a known task or a declared one)."""
    if task is None:
        return None
    if not TASK_RE.match(task):
        return (
            f"{where}.workload.task: {task[:80]!r} is not a task label (lower-case letters, "
            "digits and -_.:/, at most 64 characters)"
        )
    if task in known or task in declared:
        return None
    return (
        f"{where}.workload.task: {task!r} is not a known task; declare it as new "
        "(Submission field new_tasks, or --new-task / the Submit tab's New tasks box) or use "
        f"one of: {', '.join(sorted(known))}"
    )


def declared_task_problems(declared: Collection[str]) -> list[str]:
    """Problems of declared new task labels (each must be a task label)."""
    return [
        f"bundle.new_tasks: {t[:80]!r} is not a task label (lower-case letters, digits and "
        "-_.:/, at most 64 characters)"
        for t in declared
        if not TASK_RE.match(t)
    ]


MEASUREMENT_FIELDS = ("duration_s", "energy_j", "tokens", "avg_power_w")
"""Per-phase figures whose values make up a measurement's identity."""


def measurement_key(flat: Mapping[str, Any]) -> str | None:
    """Identity of a run's measured figures, whatever its model id (``None``: no energy).

    Args:
        flat: The run's flat columns (:func:`mlenergy.store.tables.flatten_run`, or a row of
            ``RunStore.runs_frame()``).

    Returns:
        16 hex digits over every phase's duration, energy, tokens and power and the median
        ITL; two runs with the same key carry the same measurement.
    """
    parts = []
    has_energy = False
    for phase in PHASES:
        for name in MEASUREMENT_FIELDS:
            number = flat_number(flat.get(f"{phase}_{name}"))
            has_energy = has_energy or (name == "energy_j" and number is not None)
            parts.append("-" if number is None else f"{number:.12g}")
    itl = flat_number(flat.get("itl_p50_s"))
    parts.append("-" if itl is None else f"{itl:.12g}")
    return sha256_hex("|".join(parts))[:16] if has_energy else None
