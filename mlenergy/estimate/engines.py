"""Serving-engine profiles the estimator knows, and the profile a task label implies.

The same model on the same GPU serves at very different speeds under different serving
setups: the 2024 ML.ENERGY leaderboard's server (vLLM 0.5.4 behind its API server) spends
several times more host time per step than the 2026 one (vLLM 0.11.1), more again for each
extra GPU, and its MoE layers were far slower. The engine profile is therefore an input of an
estimate, like the GPU, and each profile carries its own overhead terms (:data:`OVERHEADS`):
the physical model reads them per row, so the 2024 engine is a profile, not a switch. The
current profile's terms are the neutral ones; the others' are fixed numbers or fitted by the
calibration (stored under the profile's name in ``coefficients.json``).

The profiles are data: ``engines.json`` next to this module, read through
:mod:`~mlenergy.estimate.registry`. Each is named for the setup it models, not for a vLLM
version: the same vLLM release run offline, or behind another front end, is another setup
(``mlenergy estimate engines`` lists them).

When no profile is given, the task decides: the leaderboard's tasks were each measured with
one setup, so a row labelled with a task of the 2024 campaign (``sharegpt-chat``, ``code``, or
their raw v2 labels ``llm_text_generation/chat`` and ``llm_text_generation/code``) is an
estimate for that campaign's setup. Every other task, and no task, means the current one.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlenergy.errors import UserError
from mlenergy.estimate.registry import read_catalog

OVERHEADS = ("host_slowdown", "worker_s", "moe_layer_s", "untuned_moe_tiles")
"""Overhead terms of a profile, in the physical model's units: ``host_slowdown`` multiplies
the host costs per step (step, layer and sequence costs; 1 = the current engine),
``worker_s`` is host time per step for each GPU of a replica beyond the first (s),
``moe_layer_s`` a cost per MoE layer per step beside the common one (s, before
``host_slowdown``), ``untuned_moe_tiles`` 1 when the engine's fused-MoE kernel pays the
expert-parallel tile switch (``moe_tile_s``), else 0."""
NEUTRAL_OVERHEADS: dict[str, float] = {
    "host_slowdown": 1.0,
    "worker_s": 0.0,
    "moe_layer_s": 0.0,
    "untuned_moe_tiles": 1.0,
}
"""The terms of a profile that adds nothing to the current engine's costs."""
FITTED = "fitted"
"""An overhead value that the calibration fits (``coefficients.json``, ``engine_overheads``)."""


@dataclass(frozen=True)
class EngineProfile:
    """One serving setup the estimator models (an entry of ``engines.json``).

    Attributes:
        name: The profile's name (what ``--engine`` takes and estimates report).
        software: The serving software of the setup, as a record's ``Software.engine`` says
            it (``vllm 0.11.1``).
        setup: What the profile models, in one sentence.
        includes: What its costs include and where they were fitted.
        overheads: Its overhead terms (:data:`OVERHEADS`): a number, or :data:`FITTED`.
        aliases: Other accepted names (lower case), including the profile's former names.
        tasks: Task labels measured only with this profile.
        offline_defaults: Whose offline scheduler defaults apply (``vllm-0.5``: 256
            sequences, no chunked prefill; ``vllm-0.11``: by GPU).
    """

    name: str
    software: str
    setup: str
    includes: str
    overheads: dict[str, float | str]
    aliases: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    offline_defaults: str = "vllm-0.11"

    def fitted_terms(self) -> tuple[str, ...]:
        """The overhead terms of this profile that the calibration fits."""
        return tuple(t for t in OVERHEADS if self.overheads[t] == FITTED)


def _profile(entry: dict) -> EngineProfile:
    overheads = {**NEUTRAL_OVERHEADS, **entry.get("overheads", {})}
    for term, value in overheads.items():
        if term not in OVERHEADS or not (value == FITTED or isinstance(value, int | float)):
            raise UserError(
                f"engine profile {entry.get('name')!r}: overhead {term}={value!r} is not known",
                f"Overheads are {', '.join(OVERHEADS)}, each a number or '{FITTED}'",
            )
    return EngineProfile(
        name=str(entry["name"]),
        software=str(entry["software"]),
        setup=str(entry["setup"]),
        includes=str(entry["includes"]),
        overheads=overheads,
        aliases=tuple(a.lower() for a in entry.get("aliases", ())),
        tasks=tuple(entry.get("tasks", ())),
        offline_defaults=str(entry.get("offline_defaults", "vllm-0.11")),
    )


PROFILES: tuple[EngineProfile, ...] = tuple(
    _profile(e) for e in read_catalog("engines")["profiles"]
)
"""Every engine profile; the first is the default."""

CURRENT_ENGINE = PROFILES[0].name
"""The profile of the v3 measurements: the default."""
LEGACY_ENGINE = "leaderboard-v2-server"
"""The profile of the 2024 v2 measurements (the reference tables' ``legacy`` rows)."""

BY_NAME: dict[str, EngineProfile] = {p.name: p for p in PROFILES}
ENGINE_INDEX: dict[str, int] = {p.name: i for i, p in enumerate(PROFILES)}
"""Each profile's position in :data:`PROFILES` (the physical model's ``engine`` feature)."""
ENGINE_ALIASES: dict[str, str] = {
    **{p.name: p.name for p in PROFILES},
    **{alias: p.name for p in PROFILES for alias in p.aliases},
}
"""Accepted spellings (lower case) of each profile."""

_BLANK = ("", "nan", "none")
"""Engine cells that mean "not given" (an empty CSV cell may arrive as NaN)."""

TASK_ALIASES: dict[str, str] = dict(read_catalog("tasks")["aliases"])
"""Raw task labels of the v2 leaderboard (its tables and its task names ``chat`` / ``code``)
and the task they name (``task_defaults.json``). The v3 leaderboard's chat task is
``lm-arena-chat``."""

TASK_ENGINE: dict[str, str] = {t: p.name for p in PROFILES for t in p.tasks}
"""Tasks measured only with a profile other than :data:`CURRENT_ENGINE`."""


def fitted_overheads() -> list[tuple[str, str]]:
    """(profile, term) of every overhead term the calibration fits, in catalog order."""
    return [(p.name, t) for p in PROFILES for t in p.fitted_terms()]


def engine_code(engine: str) -> float:
    """The ``engine`` feature of a resolved profile: its position in :data:`PROFILES`."""
    return float(ENGINE_INDEX[engine])


def old_offline_defaults(engine: str) -> bool:
    """True when a profile's offline jobs get vLLM 0.5's scheduler defaults."""
    return BY_NAME[engine].offline_defaults == "vllm-0.5"


def canonical_task(task: str | None) -> str:
    """The task label in lower case, blanks stripped, v2 labels mapped (``""``: none)."""
    key = (task or "").strip().lower()
    return TASK_ALIASES.get(key, key)


def resolve_engine(engine: str | None, task: str | None = None) -> str:
    """The profile of an estimate: ``engine`` when given, else the task's, else the default.

    Args:
        engine: Profile name or alias (see :data:`ENGINE_ALIASES`); blank means "from the
            task".
        task: Workload label (see :data:`TASK_ENGINE`).

    Raises:
        UserError: ``engine`` is not a known profile (the message lists them).
    """
    key = (engine or "").strip().lower()
    if key in _BLANK:
        return TASK_ENGINE.get(canonical_task(task), CURRENT_ENGINE)
    if key not in ENGINE_ALIASES:
        known = ", ".join(p.name for p in PROFILES)
        raise UserError(
            f"unknown engine '{engine}'",
            f"Use one of {known} (see mlenergy estimate engines), or leave it blank to take "
            "the task's",
        )
    return ENGINE_ALIASES[key]


def engine_software(engine: str) -> str:
    """The serving software a profile models (``vllm 0.11.1``), for records."""
    return BY_NAME[engine].software


def engine_note(engine: str | None, task: str | None, resolved: str, mode: str = "serving") -> str:
    """The caveat of an estimate's engine profile (one line), else ``""``.

    Two cases carry one: a profile taken from the task (the task was measured with a setup
    other than the default), and a profile given by a vLLM version alias (``vllm-0.5``),
    which names a leaderboard's server setup, not every job run with that vLLM release.

    Args:
        engine: The profile as given (blank: taken from the task).
        task: Workload label.
        resolved: What :func:`resolve_engine` returned for them.
        mode: ``serving`` or ``offline`` (an offline job has no API server in front).
    """
    given = (engine or "").strip()
    key = given.lower()
    if key in _BLANK:
        if resolved == CURRENT_ENGINE:
            return ""
        return (
            f"engine {resolved} (the setup task '{canonical_task(task)}' was measured with); "
            "give an engine to override"
        )
    if not key.startswith("vllm"):
        return ""
    profile = BY_NAME[resolved]
    release = profile.software.removeprefix("vllm ").strip()
    offline = (
        "; an offline job has no API server in front, so it can run faster than this estimate"
        if mode == "offline"
        else ""
    )
    return (
        f"engine '{given}' is read as {resolved}: {profile.setup.split(':')[0]} "
        f"and its host costs, not any job run with vLLM {release}{offline}"
    )
