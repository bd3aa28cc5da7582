"""The one rule for a model's kind: ``dense``, ``moe`` or ``hybrid``.

* ``moe`` when the model routes tokens to experts (``is_moe``; when that flag is unknown, an
  architecture name containing ``moe``). MoE wins over hybrid.
* ``hybrid`` when state-space or recurrent layers sit beside attention: the parsed config says
  so (``recurrent_layers``), or the ``model_type`` is a known hybrid (:data:`HYBRID_MODEL_TYPES`),
  or the architecture's name contains ``mamba``, ``jamba``, ``zamba`` or ``hybrid`` (the model id
  counts for ``mamba``/``jamba``/``zamba`` when the architecture is unknown).
* ``dense`` otherwise.

:attr:`mlenergy.records.ModelInfo.kind` applies it to every record, so the estimator
(:attr:`mlenergy.models.architecture.ArchitectureSpec.kind`), the studies and the leaderboard
all read the same answer.
"""

from __future__ import annotations

from typing import Literal

ModelKind = Literal["dense", "moe", "hybrid"]

MODEL_KINDS: tuple[ModelKind, ...] = ("dense", "moe", "hybrid")

HYBRID_MODEL_TYPES = frozenset(
    {
        "nemotron_h",
        "jamba",
        "zamba",
        "zamba2",
        "bamba",
        "falcon_h1",
        "granitemoehybrid",
        "lfm2",
        "recurrent_gemma",
    }
)
"""Hugging Face ``model_type`` values of hybrid (state-space or recurrent + attention) models."""

_ARCH_MARKERS = ("mamba", "jamba", "zamba", "hybrid")
_ID_MARKERS = ("mamba", "jamba", "zamba")


def model_kind(
    architecture: str | None,
    is_moe: bool | None,
    model_id: str | None = None,
    recurrent_layers: bool | None = None,
) -> ModelKind:
    """The kind of one model (see the module docstring).

    Args:
        architecture: The config's ``model_type`` or an architecture label; may be None.
        is_moe: Whether it routes tokens to experts (None: unknown).
        model_id: The model id, consulted only when the architecture is unknown.
        recurrent_layers: Whether the parsed config has state-space/recurrent layers (None:
            not parsed).
    """
    norm = (architecture or "").strip().lower().replace("-", "_").replace(" ", "_")
    moe = ("moe" in norm) if is_moe is None else bool(is_moe)
    if moe:
        return "moe"
    if recurrent_layers or norm in HYBRID_MODEL_TYPES or any(m in norm for m in _ARCH_MARKERS):
        return "hybrid"
    if norm in ("", "unknown") and model_id and any(m in model_id.lower() for m in _ID_MARKERS):
        return "hybrid"
    return "dense"
