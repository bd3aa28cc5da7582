"""Near-duplicate runs: the same workload with every figure within 0.1% of another run.

A resubmitted measurement with energy x (1 + 1e-9), one more token or the duration x 1.0001
is the same measurement. Two runs are near duplicates when they share the workload's shape
(kind, batch size, input and output lengths) and the same figures are present, each within
:data:`NEAR_DUPLICATE_REL_TOL` of the other: every phase's duration, energy, tokens and power,
and the median inter-token latency. Genuine repeats of one configuration differ by far more
(run-to-run spread is about 1%), and so do different models or hardware.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mlenergy.store.tables import PHASES

NEAR_DUPLICATE_REL_TOL = 1e-3
"""Largest relative difference of every figure for two runs to be the same measurement."""
FIGURE_FIELDS = ("duration_s", "energy_j", "tokens", "avg_power_w")
"""Per-phase figures compared (flat columns ``<phase>_<field>``)."""
SHAPE_FIELDS = ("workload_kind", "batch_size", "input_tokens", "output_tokens")
"""Flat columns two near duplicates share exactly."""

Figures = tuple[float | None, ...]


def flat_number(value: Any) -> float | None:
    """A flat column's number (Python or NumPy) as float; ``None`` for missing, NaN or text."""
    if value is None or isinstance(value, bool | str):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def figures_of(flat: Mapping[str, Any]) -> Figures:
    """Every compared figure of a run's flat columns (``None`` where absent)."""
    values = [flat_number(flat.get(f"{p}_{f}")) for p in PHASES for f in FIGURE_FIELDS]
    values.append(flat_number(flat.get("itl_p50_s")))
    return tuple(values)


def shape_of(flat: Mapping[str, Any]) -> tuple[Any, ...]:
    """The workload shape two near duplicates share (``None`` where absent)."""
    out = []
    for name in SHAPE_FIELDS:
        value = flat.get(name)
        number = flat_number(value)
        out.append(number if number is not None else (value if isinstance(value, str) else None))
    return tuple(out)


def close(a: Figures, b: Figures, rel_tol: float = NEAR_DUPLICATE_REL_TOL) -> bool:
    """Whether the same figures are present in both and each pair is within ``rel_tol``."""
    if not any(x is not None for x in a):
        return False
    for x, y in zip(a, b, strict=True):
        if (x is None) != (y is None):
            return False
        if x is not None and y is not None and abs(x - y) > rel_tol * max(abs(x), abs(y)):
            return False
    return True


class NearDuplicateIndex:
    """Runs seen so far, by workload shape, to find near duplicates of a new one."""

    def __init__(self) -> None:
        self._by_shape: dict[tuple[Any, ...], list[tuple[Figures, str]]] = {}

    def add(self, flat: Mapping[str, Any], description: str) -> None:
        """Remember a run (its flat columns) under ``description`` (e.g. its id and model)."""
        figures = figures_of(flat)
        if any(x is not None for x in figures):
            self._by_shape.setdefault(shape_of(flat), []).append((figures, description))

    def find(self, flat: Mapping[str, Any]) -> str | None:
        """The description of a remembered run this one nearly duplicates, else ``None``."""
        figures = figures_of(flat)
        for other, description in self._by_shape.get(shape_of(flat), ()):
            if close(figures, other):
                return description
        return None
