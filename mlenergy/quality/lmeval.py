"""Adapter to EleutherAI's lm-evaluation-harness (optional extra ``lmeval``).

``lm_eval`` is imported only when a task runs, so mlenergy works without it; asking for an
``lm-eval:<task>`` without the extra raises a :class:`~mlenergy.errors.UserError` that says how
to install it. Each metric of the harness becomes one :class:`QualityResult` with the harness's
standard error beside the value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from mlenergy.errors import UserError
from mlenergy.records import ModelInfo, QualityResult, Software

TASK_PREFIX = "lm-eval:"
"""Prefix of lm-eval tasks in ``--task`` (``lm-eval:hellaswag``)."""

_HIGHER_IS_BETTER_FALSE = {"perplexity", "word_perplexity", "byte_perplexity", "bits_per_byte"}


def require_lm_eval() -> Any:
    """Import and return ``lm_eval``; a :class:`UserError` naming the extra if it is missing."""
    try:
        import lm_eval
    except ImportError as exc:
        raise UserError(
            "lm-evaluation-harness is not installed",
            "install the optional extra: pip install 'mlenergy-lab[lmeval]'",
        ) from exc
    return lm_eval


def results_to_records(
    results: dict[str, Any],
    *,
    task: str,
    model: ModelInfo,
    software: Software,
    linked_run_ids: Sequence[str] = (),
    tags: dict[str, str] | None = None,
) -> list[QualityResult]:
    """Convert the ``results`` dict of ``lm_eval.simple_evaluate`` into quality records.

    Args:
        results: The harness output (``{"results": {task: {"acc,none": ..., ...}}, ...}``).
        task: The harness task name.
        model: The model evaluated.
        software: Software versions.
        linked_run_ids: Energy runs of the same model.
        tags: Free labels.

    Returns:
        One record per numeric metric (``*_stderr`` entries become the records' ``stderr``).
    """
    per_task = results.get("results", {}).get(task)
    if not per_task:
        raise UserError(f"lm-eval returned no results for task {task!r}", "check the task name")
    n_samples = results.get("n-samples", {}).get(task, {}).get("effective")
    records = []
    for key, value in sorted(per_task.items()):
        metric, _, filt = key.partition(",")
        if metric.endswith("_stderr") or not isinstance(value, int | float):
            continue
        if isinstance(value, bool) or not math.isfinite(float(value)):
            continue
        stderr = per_task.get(f"{metric}_stderr,{filt}" if filt else f"{metric}_stderr")
        stderr_ok = isinstance(stderr, int | float) and math.isfinite(float(stderr))
        records.append(
            QualityResult(
                model=model,
                software=software,
                task=f"{TASK_PREFIX}{task}",
                metric=metric,
                value=float(value),
                stderr=float(stderr) if stderr_ok and float(stderr) >= 0 else None,
                higher_is_better=metric not in _HIGHER_IS_BETTER_FALSE,
                num_samples=int(n_samples) if isinstance(n_samples, int) else None,
                dataset=f"lm-eval:{task}",
                linked_run_ids=tuple(linked_run_ids),
                tags={"filter": filt or "none", **(tags or {})},
            )
        )
    if not records:
        raise UserError(f"lm-eval returned no numeric metric for task {task!r}")
    return records


def evaluate_lm_eval(
    model_id: str,
    task: str,
    *,
    model: ModelInfo,
    software: Software,
    device: str = "cpu",
    dtype: str = "float32",
    batch_size: int = 8,
    limit: int | None = None,
    linked_run_ids: Sequence[str] = (),
) -> list[QualityResult]:
    """Run one lm-evaluation-harness task on a hub or local model.

    Args:
        model_id: Hub id or local path of a ``transformers`` checkpoint.
        task: Harness task name, e.g. ``hellaswag`` (without the ``lm-eval:`` prefix).
        model: The model's :class:`ModelInfo`.
        software: Software versions.
        device: Torch device.
        dtype: Weight dtype.
        batch_size: Harness batch size.
        limit: Evaluate at most this many samples (``None``: all).
        linked_run_ids: Energy runs of the same model.

    Returns:
        The quality records, one per metric.

    Raises:
        UserError: If the extra is missing or the harness fails on the input.
    """
    lm_eval = require_lm_eval()
    try:
        results = lm_eval.simple_evaluate(
            model="hf",
            model_args=f"pretrained={model_id},dtype={dtype}",
            tasks=[task],
            device=device,
            batch_size=batch_size,
            limit=limit,
        )
    except (KeyError, ValueError, OSError) as exc:
        raise UserError(f"lm-eval failed on task {task!r} for {model_id!r}: {exc}") from exc
    if results is None:  # non-zero ranks in distributed runs
        raise UserError("lm-eval returned no results", "run on a single process")
    return results_to_records(
        results,
        task=task,
        model=model,
        software=software,
        linked_run_ids=linked_run_ids,
        tags={"limit": str(limit)} if limit is not None else None,
    )
