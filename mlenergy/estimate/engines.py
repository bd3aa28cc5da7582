"""Serving engines the estimator knows, and the engine a task label implies.

The same model on the same GPU serves at very different speeds under different serving
software: the 2024 engine of the ML.ENERGY v2 measurements (vLLM 0.5.4) spends several times
more host time per step than the current one (vLLM 0.11, the v3 measurements), and its MoE
layers were far slower (see ``legacy_slowdown`` and ``legacy_moe_layer_s`` in
:class:`~mlenergy.estimate.coefficients.Coefficients`). The engine is therefore an input of an
estimate, like the GPU.

When no engine is given, the task decides: the leaderboard's tasks were each measured with one
engine, so a row labelled with a task of the 2024 campaign (``sharegpt-chat``, ``code``, or
their raw v2 labels ``llm_text_generation/chat`` and ``llm_text_generation/code``) is an
estimate for that campaign's engine. Every other task, and no task, means the current engine.
"""

from __future__ import annotations

from mlenergy.errors import UserError

CURRENT_ENGINE = "vllm-0.11"
"""The engine of the v3 measurements (vLLM 0.11.1): the default."""
LEGACY_ENGINE = "vllm-0.5"
"""The engine of the 2024 v2 measurements (vLLM 0.5.4)."""

ENGINE_ALIASES: dict[str, str] = {
    "vllm-0.11": CURRENT_ENGINE,
    "vllm-0.11.1": CURRENT_ENGINE,
    "vllm": CURRENT_ENGINE,
    "current": CURRENT_ENGINE,
    "v3": CURRENT_ENGINE,
    "vllm-0.5": LEGACY_ENGINE,
    "vllm-0.5.4": LEGACY_ENGINE,
    "legacy": LEGACY_ENGINE,
    "v2": LEGACY_ENGINE,
}
"""Accepted spellings (lower case) of each engine."""

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
"""Tasks measured only with an engine other than :data:`CURRENT_ENGINE`."""


def canonical_task(task: str | None) -> str:
    """The task label in lower case, blanks stripped, v2 labels mapped (``""``: none)."""
    key = (task or "").strip().lower()
    return TASK_ALIASES.get(key, key)


def resolve_engine(engine: str | None, task: str | None = None) -> str:
    """The engine of an estimate: ``engine`` when given, else the task's, else the current one.

    Args:
        engine: Engine name or alias (see :data:`ENGINE_ALIASES`); blank means "from the task".
        task: Workload label (see :data:`TASK_ENGINE`).

    Raises:
        UserError: ``engine`` is not a known engine.
    """
    key = (engine or "").strip().lower()
    if key in _BLANK:
        return TASK_ENGINE.get(canonical_task(task), CURRENT_ENGINE)
    if key not in ENGINE_ALIASES:
        known = ", ".join(sorted({CURRENT_ENGINE, LEGACY_ENGINE}))
        raise UserError(
            f"unknown engine '{engine}'",
            f"Use one of {known} (or leave it blank to take the task's engine)",
        )
    return ENGINE_ALIASES[key]


def is_legacy(engine: str) -> bool:
    """True for the 2024 engine (the ``legacy`` feature of the physical model)."""
    return engine == LEGACY_ENGINE


def engine_note(engine: str | None, task: str | None, resolved: str) -> str:
    """The caveat of an estimate whose engine came from its task (one line), else ``""``.

    Args:
        engine: The engine as given (blank: taken from the task).
        task: Workload label.
        resolved: What :func:`resolve_engine` returned for them.
    """
    if (engine or "").strip().lower() not in _BLANK or resolved == CURRENT_ENGINE:
        return ""
    return (
        f"engine {resolved} (the engine task '{canonical_task(task)}' was measured with); "
        "give an engine to override"
    )
