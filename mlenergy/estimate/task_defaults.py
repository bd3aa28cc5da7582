"""Task labels' defaults: the prompt length assumed when a request gives none.

Also which tasks are multimodal. The values are data (``task_defaults.json``, read through
:mod:`~mlenergy.estimate.registry`).
"""

from __future__ import annotations

from mlenergy.estimate.coefficients import default_coefficients
from mlenergy.estimate.engines import canonical_task
from mlenergy.estimate.registry import read_catalog

_TASKS = read_catalog("tasks")

TASK_INPUT_TOKENS: dict[str, int] = {str(k): int(v) for k, v in _TASKS["input_tokens"].items()}
"""Mean prompt length (tokens) assumed per task when ``input_tokens`` is not given (see
``task_defaults.json`` for where the numbers come from)."""

DEFAULT_INPUT_TOKENS = int(_TASKS["default_input_tokens"])
"""Mean prompt length (tokens) of a task the catalog does not list, or of no task."""


def has_value(value: object) -> bool:
    """True unless ``value`` is None, empty or NaN (a blank CSV cell)."""
    return value is not None and str(value).strip() not in ("", "nan", "NaN", "None")


def task_input_tokens(task: str | None) -> float:
    """Default mean prompt length (tokens) of a task: calibrated table, else the catalog's."""
    key = canonical_task(task)
    fitted = default_coefficients().task_input_tokens
    if key in fitted:
        return float(fitted[key])
    return float(TASK_INPUT_TOKENS.get(key, DEFAULT_INPUT_TOKENS))


MULTIMODAL_TASKS: tuple[str, ...] = tuple(_TASKS["multimodal"])
"""Tasks whose prompts carry images or video."""


def is_multimodal(task: str | None) -> bool:
    """True for a task whose prompts carry images or video (:data:`MULTIMODAL_TASKS`)."""
    return canonical_task(task) in MULTIMODAL_TASKS
