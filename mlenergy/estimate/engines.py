"""Serving-engine profiles the estimator knows, and the profile a task label implies.

The same model on the same GPU serves at very different speeds under different serving
setups: the 2024 ML.ENERGY leaderboard's server (vLLM 0.5.4 behind its API server) spends
several times more host time per step than the 2026 one (vLLM 0.11.1), more again for each
extra GPU, and its MoE layers were far slower (``legacy_slowdown``, ``legacy_worker_s`` and
``legacy_moe_layer_s`` in :class:`~mlenergy.estimate.coefficients.Coefficients`). The engine
profile is therefore an input of an estimate, like the GPU. Each profile is named for the
setup it models, not for a vLLM version: the same vLLM release run offline, or behind
another front end, is another setup (:data:`PROFILES` says what each includes;
``mlenergy estimate engines`` lists them).

When no profile is given, the task decides: the leaderboard's tasks were each measured with
one setup, so a row labelled with a task of the 2024 campaign (``sharegpt-chat``, ``code``, or
their raw v2 labels ``llm_text_generation/chat`` and ``llm_text_generation/code``) is an
estimate for that campaign's setup. Every other task, and no task, means the current one.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlenergy.errors import UserError


@dataclass(frozen=True)
class EngineProfile:
    """One serving setup the estimator models.

    Attributes:
        name: The profile's name (what ``--engine`` takes and estimates report).
        software: The serving software of the setup, as a record's ``Software.engine`` says
            it (``vllm 0.11.1``).
        setup: What the profile models, in one sentence.
        includes: What its costs include and where they were fitted.
        legacy: Whether the physical model's 2024-engine terms apply.
        aliases: Other accepted names (lower case), including the profile's former names.
    """

    name: str
    software: str
    setup: str
    includes: str
    legacy: bool
    aliases: tuple[str, ...] = ()


PROFILES: tuple[EngineProfile, ...] = (
    EngineProfile(
        name="leaderboard-v3-server",
        software="vllm 0.11.1",
        setup=(
            "the ML.ENERGY leaderboard v3 (2026) serving setup: vLLM 0.11.1 behind its "
            "OpenAI-compatible API server, requests arriving continuously (steady state)"
        ),
        includes=(
            "chunked prefill with 8192 batched tokens per step, CUDA graphs, async "
            "scheduling; requests sampled with top-p 0.95 at temperature 0.8 (the "
            "campaign's client default), so the sampler works through every sequence's "
            "whole vocabulary each step, a cost a greedy job does not pay; per-step, per-layer, "
            "per-MoE-layer and per-sequence host costs and "
            "the API server's front-end work as fitted on the v3 H100 and B200 runs; the "
            "Triton fused-MoE kernel's untuned default tiles for expert-parallel BF16 experts"
        ),
        legacy=False,
        aliases=("vllm-0.11", "vllm-0.11.1", "vllm", "current", "v3"),
    ),
    EngineProfile(
        name="leaderboard-v2-server",
        software="vllm 0.5.4",
        setup=(
            "the ML.ENERGY leaderboard v2 (2024) serving setup: vLLM 0.5.4 behind its API "
            "server on H100, requests arriving continuously (steady state)"
        ),
        includes=(
            "the v3 profile's costs with every host cost multiplied by legacy_slowdown, "
            "a host cost per step for each GPU of a replica beyond the first "
            "(legacy_worker_s) and an extra cost per MoE layer (legacy_moe_layer_s), fitted "
            "on the 2024 H100 runs; "
            "not vLLM 0.5 in general: its host costs are those of that server, and an offline "
            "vLLM 0.5 job can run several times faster"
        ),
        legacy=True,
        aliases=("vllm-0.5", "vllm-0.5.4", "legacy", "v2"),
    ),
)
"""Every engine profile; the first is the default."""

CURRENT_ENGINE = PROFILES[0].name
"""The profile of the v3 measurements: the default."""
LEGACY_ENGINE = PROFILES[1].name
"""The profile of the 2024 v2 measurements."""

BY_NAME: dict[str, EngineProfile] = {p.name: p for p in PROFILES}
ENGINE_ALIASES: dict[str, str] = {
    **{p.name: p.name for p in PROFILES},
    **{alias: p.name for p in PROFILES for alias in p.aliases},
}
"""Accepted spellings (lower case) of each profile."""

_BLANK = ("", "nan", "none")
"""Engine cells that mean "not given" (an empty CSV cell may arrive as NaN)."""

TASK_ALIASES: dict[str, str] = {
    "llm_text_generation/chat": "sharegpt-chat",
    "llm_text_generation/code": "code",
    "chat": "sharegpt-chat",
}
"""Raw task labels of the v2 leaderboard (its tables and its task names ``chat`` / ``code``)
and the task they name. The v3 leaderboard's chat task is ``lm-arena-chat``."""

TASK_ENGINE: dict[str, str] = {
    "sharegpt-chat": LEGACY_ENGINE,
    "code": LEGACY_ENGINE,
}
"""Tasks measured only with a profile other than :data:`CURRENT_ENGINE`."""


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


def is_legacy(engine: str) -> bool:
    """True for the 2024 profile (the ``legacy`` feature of the physical model)."""
    return BY_NAME[engine].legacy


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
    key = (engine or "").strip().lower()
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
        f"engine '{engine.strip()}' is read as {resolved}: {profile.setup.split(':')[0]} "
        f"and its host costs, not any job run with vLLM {release}{offline}"
    )
