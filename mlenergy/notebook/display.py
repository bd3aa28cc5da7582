"""HTML formatters registered by the IPython extension, by type, without importing the types.

A list of run records shows as one table; an estimate (``mlenergy.estimate.Estimate``), a plan
or result of ``mlenergy.optimize`` (pipeline plan and frontier, power-cap and power-limit
results), ``mlenergy.sweep``'s plan and a window result show as a
compact field table with units read from the field names (``_j`` joules, ``_s`` seconds...).
Types are registered by module and name (IPython resolves them when first seen), so a package
that is absent or not yet imported costs nothing and breaks nothing.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from mlenergy.records import RunRecord
from mlenergy.records.display import html_table, num_cell
from mlenergy.records.metrics import headline_phase

UNIT_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("_j_per_token", "J/token"),
    ("_per_token_j", "J/token"),
    ("_tokens_per_s", "tokens/s"),
    ("_per_s", "/s"),
    ("_mhz", "MHz"),
    ("_gb", "GB"),
    ("_ms", "ms"),
    ("_j", "J"),
    ("_s", "s"),
    ("_w", "W"),
)
"""Unit of a field from the end of its name (the project's naming rule)."""

FORMATTED_TYPES: tuple[tuple[str, str], ...] = (
    ("mlenergy.estimate.table_rows", "Estimate"),
    ("mlenergy.optimize.plan", "PipelinePlan"),
    ("mlenergy.optimize.frontier", "Frontier"),
    ("mlenergy.optimize.pipeline", "PipelineResult"),
    ("mlenergy.optimize.power_cap", "PowerCapResult"),
    ("mlenergy.optimize.power_limit_training", "PowerLimitOutcome"),
    ("mlenergy.sweep.plan", "Plan"),
    ("mlenergy.measure.window_result", "WindowResult"),
)
"""(module, class) pairs shown with :func:`fields_html`."""


def unit_of(name: str) -> str:
    """The unit a field name states (``energy_per_token_j`` -> ``J/token``), or ``""``.

    Interval bounds (``..._j_lo``, ``..._j_hi``) share their figure's unit.
    """
    for bound in ("_lo", "_hi", "_low", "_high"):
        name = name.removesuffix(bound)
    for suffix, unit in UNIT_SUFFIXES:
        if name.endswith(suffix):
            return unit
    return ""


def _fields(obj: Any) -> list[tuple[str, Any]]:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    if hasattr(obj, "model_dump"):
        return list(obj.model_dump().items())
    return list(vars(obj).items())


def _value_text(value: Any) -> str | None:
    """A short text of a scalar field; ``None`` for values too big for a compact table."""
    if value is None:
        return "n/a"
    if isinstance(value, bool | str | int):
        text = str(value)
        return text if len(text) <= 120 else text[:117] + "..."
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    if isinstance(value, dict) and len(value) <= 8:
        parts = [f"{k}={_value_text(v)}" for k, v in value.items()]
        return ", ".join(parts)
    if isinstance(value, list | tuple) and len(value) <= 6:
        return ", ".join(str(_value_text(v)) for v in value)
    shape = getattr(value, "shape", None)
    return f"({type(value).__name__} of shape {shape})" if shape is not None else None


def fields_html(obj: Any) -> str:
    """A field / value / unit table of a dataclass or pydantic object (big fields summarised)."""
    rows = []
    for name, value in _fields(obj):
        text = _value_text(value)
        if text is None:
            text = f"({type(value).__name__}, {len(value) if hasattr(value, '__len__') else '?'})"
        rows.append([name, text, unit_of(name)])
    source = getattr(obj, "energy_source", None)
    caption = type(obj).__name__ + (f" - energy source {source}" if source else "")
    return html_table(["field", "value", "unit"], rows, caption)


def runs_html(runs: list[RunRecord]) -> str:
    """Several runs: one row each, with their headline phase (else their first phase)."""
    header = [
        "run",
        "model",
        "task",
        "batch",
        "hardware",
        "time",
        "energy",
        "energy/token",
        "source",
    ]
    rows = []
    for r in runs:
        p = headline_phase(r) or (r.phases[0] if r.phases else None)
        rows.append(
            [
                r.run_id[:12],
                r.model.model_id,
                r.workload.task or r.workload.kind,
                str(r.workload.batch_size),
                r.hardware.accelerator_model or r.hardware.cpu_model or "",
                num_cell(p.duration_s if p else None, "s"),
                num_cell(p.energy_j if p else None, "J"),
                num_cell(p.energy_per_token_j if p else None, "J/token"),
                r.energy_source,
            ]
        )
    return html_table(header, rows, f"{len(runs)} run record(s)")


def list_html(obj: Any) -> str | None:
    """Lists and tuples of run records as one table; ``None`` (default display) otherwise."""
    if obj and all(isinstance(r, RunRecord) for r in obj):
        return runs_html(list(obj))
    return None


def register_formatters(ipython: Any) -> list[str]:
    """Register the HTML formatters on an IPython shell; return the type names registered."""
    html = ipython.display_formatter.formatters["text/html"]
    html.for_type(list, list_html)
    html.for_type(tuple, list_html)
    names = ["list", "tuple"]
    for module, name in FORMATTED_TYPES:
        html.for_type_by_name(module, name, fields_html)
        names.append(f"{module}.{name}")
    return names
