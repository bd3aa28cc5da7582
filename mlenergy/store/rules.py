"""Provenance and physics rules of submitted runs, on plain values.

The rules read a :class:`RunFacts` (plain numbers and strings), built either from a parsed
:class:`~mlenergy.records.RunRecord` (:func:`facts_from_record`) or from the raw JSON dict of a
record that failed its schema (:func:`facts_from_raw`), so a record with a schema error still
gets every other problem reported. A value that is missing or has the wrong type in a raw
record is ``None`` (or :data:`PRESENT` for a present-but-invalid text) and the rules needing it
are skipped: the schema error already names it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from mlenergy.records import RunRecord, sha256_hex
from mlenergy.store.tables import PHASES

POWER_CEILING_FACTOR = 1.2
"""Average power may exceed the claimed devices' total TDP by at most this factor."""
POWER_FLOOR_FRACTION = 0.05
"""Average power must reach this fraction of the claimed devices' total TDP (the floor)."""
ENERGY_REL_TOL = 0.05
"""Allowed relative gap between ``energy_j`` and ``avg_power_w x duration_s``."""
PER_TOKEN_REL_TOL = 0.01
"""Allowed relative gap between ``energy_per_token_j`` and ``energy_j / tokens``."""
PRESENT = "<invalid>"
"""Stands for a text field that is present in a raw record but not a string."""

TdpLookup = Callable[[str], float | None]
"""Maps an accelerator name to its TDP in watts (``None`` if unknown)."""


@dataclass(frozen=True)
class PhaseFacts:
    """One phase's figures (seconds, joules, watts, tokens); ``None`` when unknown."""

    name: str
    duration_s: float | None
    energy_j: float | None
    avg_power_w: float | None
    tokens: float | None
    energy_per_token_j: float | None


@dataclass(frozen=True)
class RunFacts:
    """The values the rules read from one run (``None`` when missing or of the wrong type).

    Power in watts, energy in joules; ``cpu_packages`` counts the measured CPU packages
    (0 when the scope names none).
    """

    status: str | None = "ok"
    energy_source: str | None = None
    idle_energy_source: str | None = None
    timeline_energy_source: str | None = None
    accelerator_model: str | None = None
    accelerator_count: int | None = 0
    accelerator_tdp_w: float | None = None
    cpu_model: str | None = None
    cpu_tdp_w: float | None = None
    cpu_packages: int = 0
    torch: str | None = None
    engine: str | None = None
    zeus: str | None = None
    phases: tuple[PhaseFacts, ...] = ()
    checkpoint_energy: bool = False
    idle_avg_power_w: float | None = None


def facts_from_record(run: RunRecord) -> RunFacts:
    """The rule inputs of a parsed run record."""
    hw, sw = run.hardware, run.software
    return RunFacts(
        status=run.status,
        energy_source=run.energy_source,
        idle_energy_source=run.idle.energy_source if run.idle else None,
        timeline_energy_source=run.power_timeline.energy_source if run.power_timeline else None,
        accelerator_model=hw.accelerator_model,
        accelerator_count=hw.accelerator_count,
        accelerator_tdp_w=hw.accelerator_tdp_w,
        cpu_model=hw.cpu_model,
        cpu_tdp_w=hw.cpu_tdp_w,
        cpu_packages=len(run.scope.cpu_indices),
        torch=sw.torch,
        engine=sw.engine,
        zeus=sw.zeus,
        phases=tuple(
            PhaseFacts(
                p.phase.value,
                p.duration_s,
                p.energy_j,
                p.avg_power_w,
                p.tokens,
                p.energy_per_token_j,
            )
            for p in run.phases
        ),
        checkpoint_energy=any(c.energy_j is not None for c in run.checkpoints),
        idle_avg_power_w=run.idle.avg_power_w if run.idle else None,
    )


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else PRESENT


def facts_from_raw(obj: Mapping[str, Any]) -> RunFacts:
    """The rule inputs of a raw run record dict (one that may fail its schema)."""
    hw, sw, scope = _obj(obj.get("hardware")), _obj(obj.get("software")), obj.get("scope")
    idle, timeline = obj.get("idle"), obj.get("power_timeline")
    count = hw.get("accelerator_count", 0)
    cpus = _obj(scope).get("cpu_indices", ())
    phases = obj.get("phases", ())
    checkpoints = obj.get("checkpoints", ())
    return RunFacts(
        status=obj.get("status", "ok") if isinstance(obj.get("status", "ok"), str) else None,
        energy_source=_text(obj.get("energy_source")),
        idle_energy_source=_text(_obj(idle).get("energy_source")),
        timeline_energy_source=_text(_obj(timeline).get("energy_source")),
        accelerator_model=_text(hw.get("accelerator_model")),
        accelerator_count=count if isinstance(count, int) and not isinstance(count, bool) else None,
        accelerator_tdp_w=_num(hw.get("accelerator_tdp_w")),
        cpu_model=_text(hw.get("cpu_model")),
        cpu_tdp_w=_num(hw.get("cpu_tdp_w")),
        cpu_packages=len(cpus) if isinstance(cpus, list | tuple) else 0,
        torch=_text(sw.get("torch")),
        engine=_text(sw.get("engine")),
        zeus=_text(sw.get("zeus")),
        phases=tuple(
            PhaseFacts(
                str(p.get("phase", "?")),
                _num(p.get("duration_s")),
                _num(p.get("energy_j")),
                _num(p.get("avg_power_w")),
                _num(p.get("tokens")),
                _num(p.get("energy_per_token_j")),
            )
            for p in (phases if isinstance(phases, list | tuple) else ())
            if isinstance(p, Mapping)
        ),
        checkpoint_energy=isinstance(checkpoints, list | tuple)
        and any(isinstance(c, Mapping) and c.get("energy_j") is not None for c in checkpoints),
        idle_avg_power_w=_num(_obj(idle).get("avg_power_w")),
    )


def rel_gap(a: float, b: float) -> float:
    """Relative difference of two numbers (0 when both are 0)."""
    scale = max(abs(a), abs(b))
    return 0.0 if scale == 0 else abs(a - b) / scale


def source_problems(where: str, facts: RunFacts) -> list[str]:
    """No energy figure may come from emulated test devices."""
    return [
        f"{where}.{label}: {value!r} comes from emulated test devices"
        for label, value in (
            ("energy_source", facts.energy_source),
            ("idle.energy_source", facts.idle_energy_source),
            ("power_timeline.energy_source", facts.timeline_energy_source),
        )
        if value is not None and value.startswith("emulated:")
    ]


def provenance_problems(where: str, facts: RunFacts) -> list[str]:
    """Successful run, CPU model, torch/engine and Zeus versions, at least one energy figure."""
    problems: list[str] = []
    if facts.status is not None and facts.status != "ok":
        problems.append(f"{where}.status: only successful runs can be submitted")
    if facts.accelerator_count == 0 and not facts.cpu_model:
        problems.append(f"{where}.hardware.cpu_model: required for a CPU-only run")
    source = facts.energy_source or ""
    if source.split(":", 1)[0] in ("measured", "modelled") and not (facts.torch or facts.engine):
        problems.append(
            f"{where}.software.torch: required for a measured or modelled run "
            "(or software.engine for a serving engine)"
        )
    if source.startswith("measured:zeus") and not facts.zeus:
        problems.append(f"{where}.software.zeus: required for a Zeus measurement")
    if (
        facts.status == "ok"
        and not any(p.energy_j is not None for p in facts.phases)
        and not facts.checkpoint_energy
    ):
        problems.append(f"{where}.phases: no energy figure (every energy_j is null)")
    return problems


def power_limits(
    where: str, facts: RunFacts, tdp_lookup: TdpLookup | None
) -> tuple[tuple[float, float, str] | None, list[str]]:
    """Return ``(floor_w, ceiling_w, description)`` for the claimed hardware, and problems.

    ``None`` limits when the hardware is unknown (with a problem) or not readable (raw record
    with a schema error there: no problem, the schema error names it).
    """
    count = facts.accelerator_count
    if count is None:
        return None, []
    cpu_packages = max(1, facts.cpu_packages)
    if count > 0:
        name = facts.accelerator_model or ""
        tdp = facts.accelerator_tdp_w
        if tdp is None and tdp_lookup is not None:
            try:
                tdp = tdp_lookup(name)
            except Exception:  # a catalog failure must not hide the other problems
                tdp = None
        if tdp is None or not tdp > 0:
            return None, [
                f"{where}.hardware: unknown accelerator {name!r}: add accelerator_tdp_w (watts)"
            ]
        total = count * tdp
        ceiling = total * POWER_CEILING_FACTOR
        if facts.cpu_packages and facts.cpu_tdp_w:
            ceiling += cpu_packages * facts.cpu_tdp_w * POWER_CEILING_FACTOR
        return (POWER_FLOOR_FRACTION * total, ceiling, f"{count} x {name} (TDP {tdp:g} W)"), []
    if facts.cpu_tdp_w is None:
        return None, [f"{where}.hardware.cpu_tdp_w: a CPU-only run needs the CPU TDP in watts"]
    total = cpu_packages * facts.cpu_tdp_w
    return (
        POWER_FLOOR_FRACTION * total,
        total * POWER_CEILING_FACTOR,
        f"CPU {facts.cpu_model or '?'} (TDP {facts.cpu_tdp_w:g} W)",
    ), []


def phase_problems(
    at: str, phase: PhaseFacts, limits: tuple[float, float, str] | None
) -> list[str]:
    """Energy = power x duration (5%), power within the limits, energy/token = energy/tokens."""
    energy, duration = phase.energy_j, phase.duration_s
    if energy is None or duration is None:
        return []
    if duration <= 0:
        return [f"{at}.duration_s: must be positive when energy_j is given"]
    problems: list[str] = []
    power = energy / duration
    if phase.avg_power_w is not None:
        implied = phase.avg_power_w * duration
        gap = rel_gap(energy, implied)
        if gap > ENERGY_REL_TOL:
            problems.append(
                f"{at}.energy_j: {energy:.6g} J differs from avg_power_w x duration_s "
                f"= {implied:.6g} J by {gap:.1%} (limit {ENERGY_REL_TOL:.0%})"
            )
    if limits is not None:
        floor, ceiling, desc = limits
        if not (floor <= power <= ceiling and power > 0):
            problems.append(
                f"{at}: average power {power:.4g} W is outside the plausible range "
                f"[{floor:.4g}, {ceiling:.4g}] W for {desc}"
            )
    if phase.energy_per_token_j is not None and phase.tokens is not None:
        if phase.tokens <= 0:
            problems.append(f"{at}.energy_per_token_j: given but tokens is 0")
        else:
            expected = energy / phase.tokens
            gap = rel_gap(phase.energy_per_token_j, expected)
            if gap > PER_TOKEN_REL_TOL:
                problems.append(
                    f"{at}.energy_per_token_j: {phase.energy_per_token_j:.6g} J differs from "
                    f"energy_j / tokens = {expected:.6g} J by {gap:.1%}"
                )
    return problems


def check_facts(where: str, facts: RunFacts, tdp_lookup: TdpLookup | None = None) -> list[str]:
    """Every provenance, physics and energy-source rule of one run; return its problems."""
    problems = source_problems(where, facts) + provenance_problems(where, facts)
    limits, limit_problems = power_limits(where, facts, tdp_lookup)
    problems.extend(limit_problems)
    for i, phase in enumerate(facts.phases):
        problems.extend(phase_problems(f"{where}.phases[{i}] ({phase.name})", phase, limits))
    idle_w = facts.idle_avg_power_w
    if limits is not None and idle_w is not None and idle_w > limits[1]:
        problems.append(
            f"{where}.idle.avg_power_w: {idle_w:.4g} W exceeds {limits[1]:.4g} W for {limits[2]}"
        )
    return problems


def check_run(run: RunRecord, where: str, tdp_lookup: TdpLookup | None = None) -> list[str]:
    """Check one parsed run's provenance, physics and energy source; return its problems."""
    return check_facts(where, facts_from_record(run), tdp_lookup)


def check_raw_run(
    obj: Mapping[str, Any], where: str, tdp_lookup: TdpLookup | None = None
) -> list[str]:
    """The same rules on a raw run dict that failed its schema (readable values only)."""
    return check_facts(where, facts_from_raw(obj), tdp_lookup)


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
            number = _figure(flat.get(f"{phase}_{name}"))
            has_energy = has_energy or (name == "energy_j" and number is not None)
            parts.append("-" if number is None else f"{number:.12g}")
    itl = _figure(flat.get("itl_p50_s"))
    parts.append("-" if itl is None else f"{itl:.12g}")
    return sha256_hex("|".join(parts))[:16] if has_energy else None


def _figure(value: Any) -> float | None:
    """A number (Python or NumPy) as float; ``None`` for missing, NaN or non-numbers."""
    if value is None or isinstance(value, bool | str):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number
