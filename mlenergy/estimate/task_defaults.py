"""Prompt lengths assumed per task when a configuration does not give one."""

from __future__ import annotations

from mlenergy.estimate.coefficients import default_coefficients
from mlenergy.estimate.engines import canonical_task

TASK_INPUT_TOKENS: dict[str, int] = {
    "lm-arena-chat": 250,
    "gpqa": 300,
    "sourcegraph-fim": 2000,
    "image-chat": 1200,
    "video-chat": 2000,
    "sharegpt-chat": 250,
    "code": 400,
}
"""Mean prompt length (tokens) assumed per task when ``input_tokens`` is not given.

Prompt lengths are not published with the reference measurements; these are typical means of
each workload. Multimodal tasks count the LLM tokens an image or a video leaves after the
vision encoder's 2x2 merge: about 1000 for a one-megapixel image, about 2000 for a sampled
clip (some ten temporal patches of ~200 tokens), which is also the mean context the measured
decode steps of the video-chat rows imply."""

DEFAULT_INPUT_TOKENS = 512


def has_value(value: object) -> bool:
    """True unless ``value`` is None, empty or NaN (a blank CSV cell)."""
    return value is not None and str(value).strip() not in ("", "nan", "NaN", "None")


def task_input_tokens(task: str | None) -> float:
    """Default mean prompt length (tokens) of a task: calibrated table, else built-in."""
    key = canonical_task(task)
    fitted = default_coefficients().task_input_tokens
    if key in fitted:
        return float(fitted[key])
    return float(TASK_INPUT_TOKENS.get(key, DEFAULT_INPUT_TOKENS))


MULTIMODAL_TASKS = ("image-chat", "video-chat")
"""Tasks whose prompts carry images or video."""


def is_multimodal(task: str | None) -> bool:
    """True for a task whose prompts carry images or video (:data:`MULTIMODAL_TASKS`)."""
    return canonical_task(task) in MULTIMODAL_TASKS
