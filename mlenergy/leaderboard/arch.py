"""The leaderboard's architecture label: ``dense``, ``MoE`` or ``hybrid``.

The rule is :func:`mlenergy.records.model_kind.model_kind` (the one every record's
``ModelInfo.kind`` applies); this module spells it for the leaderboard and applies it to frame
cells. Used by the table column, the "Architecture" filter and the plots' hover text, so
a Mamba-Transformer hybrid such as Nemotron-H is called ``hybrid`` everywhere (as the
estimator's validation calls it) rather than ``dense``:

* ``MoE`` when the model routes tokens to experts (``ModelInfo.is_moe``; when that flag is
  missing, an architecture name containing ``moe``). MoE wins over hybrid, as in
  :attr:`mlenergy.models.architecture.ArchitectureSpec.kind`.
* ``hybrid`` when the architecture family mixes state-space / recurrent layers with attention:
  a known ``model_type`` (``nemotron_h``, ``jamba``, ``zamba2``, ``falcon_h1``...) or a name
  containing ``mamba``, ``jamba`` or ``hybrid`` (the model id counts for ``mamba``/``jamba``
  when the architecture is unknown).
* ``dense`` otherwise.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from mlenergy.records.model_kind import HYBRID_MODEL_TYPES, model_kind

__all__ = ["ARCH_KINDS", "HYBRID_MODEL_TYPES", "architecture_kind", "architecture_kinds"]

ARCH_KINDS: tuple[str, ...] = ("dense", "MoE", "hybrid")
"""The labels, in the order the filter offers them."""

_LABELS = {"dense": "dense", "moe": "MoE", "hybrid": "hybrid"}
"""The leaderboard's spelling of each kind of :func:`mlenergy.records.model_kind.model_kind`."""


def _flag(value: Any) -> bool | None:
    """A boolean from a record or frame cell; ``None`` when missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    if isinstance(value, str):
        low = value.strip().lower()
        return None if not low else low in ("true", "1", "yes")
    return bool(value)


def architecture_kind(architecture: Any, is_moe: Any = None, model_id: Any = None) -> str:
    """The leaderboard label of one model: ``dense``, ``MoE`` or ``hybrid``.

    Args:
        architecture: ``ModelInfo.architecture`` (Hugging Face ``model_type``, e.g.
            ``nemotron_h``, or a label such as ``Mamba-Transformer Hybrid``); may be missing.
        is_moe: ``ModelInfo.is_moe`` (``None``/NaN when unknown).
        model_id: Model id, consulted for ``mamba``/``jamba`` when the architecture is
            missing or ``unknown``.

    Returns:
        One of :data:`ARCH_KINDS`.
    """
    arch = None if _flag(architecture) is None else str(architecture)
    name = None if model_id is None or _flag(model_id) is None else str(model_id)
    return _LABELS[model_kind(arch, _flag(is_moe), name)]


def architecture_kinds(frame: pd.DataFrame) -> pd.Series:
    """:func:`architecture_kind` of every row of a flat runs frame (missing columns tolerated).

    Args:
        frame: Rows with ``architecture``, ``is_moe`` and ``model_id`` columns (any may be
            absent).

    Returns:
        Labels aligned with ``frame.index``.
    """
    n = len(frame)
    cols = [
        frame[c].tolist() if c in frame.columns else [None] * n
        for c in ("architecture", "is_moe", "model_id")
    ]
    cache: dict[tuple[Any, Any, Any], str] = {}
    out = []
    for key in zip(*cols, strict=True):
        try:
            kind = cache.get(key)
        except TypeError:  # an unhashable cell: classify without the cache
            out.append(architecture_kind(*key))
            continue
        if kind is None:
            kind = cache[key] = architecture_kind(*key)
        out.append(kind)
    return pd.Series(out, index=frame.index, dtype=object)
