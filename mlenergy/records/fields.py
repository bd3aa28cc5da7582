"""The records' fields as Markdown tables, from the models and their docstrings.

``docs/records.md`` holds this output (``mlenergy schema fields``), so the documented schema is
the code's: a field added without a docstring line shows an empty meaning, and a test fails
when the document and the code disagree.
"""

from __future__ import annotations

import inspect
import re
import types
import typing

from pydantic import BaseModel

from mlenergy.records.base import Interval, RepeatStats
from mlenergy.records.generation import GenerationInfo
from mlenergy.records.host_bound import HostBound
from mlenergy.records.interval import IntervalBasis
from mlenergy.records.provenance import Hardware, ModelInfo, Software
from mlenergy.records.quality import QualityResult
from mlenergy.records.run import (
    IdleBaseline,
    MeasuredScope,
    PhaseResult,
    PowerTimeline,
    RunRecord,
    SubmissionInfo,
    TrainingCheckpoint,
    Workload,
)
from mlenergy.records.serving import EngineMetrics, Percentiles, ServingStats
from mlenergy.records.submission import Submission


def _models() -> list[type[BaseModel]]:
    return [
        RunRecord,
        ModelInfo,
        Workload,
        Hardware,
        Software,
        MeasuredScope,
        PhaseResult,
        RepeatStats,
        Interval,
        IdleBaseline,
        IntervalBasis,
        HostBound,
        PowerTimeline,
        TrainingCheckpoint,
        GenerationInfo,
        ServingStats,
        Percentiles,
        EngineMetrics,
        SubmissionInfo,
        QualityResult,
        Submission,
    ]


_ENTRY = re.compile(r"^(\w+)(?: \([^)]*\))?: (.*)$")


def docstring_attributes(model: type) -> dict[str, str]:
    """The ``Attributes:`` (or ``Args:``) section of a class docstring, name -> one line."""
    doc = inspect.getdoc(model) or ""
    out: dict[str, str] = {}
    current: str | None = None
    in_section = False
    for line in doc.splitlines():
        if line.strip() in ("Attributes:", "Args:"):
            in_section, current = True, None
            continue
        if in_section and line and not line.startswith(" "):
            in_section = False
        if not in_section:
            continue
        match = (
            _ENTRY.match(line.strip())
            if line.startswith("    ") and not line.startswith("        ")
            else None
        )
        if match:
            current = match.group(1)
            out[current] = match.group(2).strip()
        elif current and line.strip():
            out[current] += " " + line.strip()
    return out


def _type_name(annotation: object) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in args)
    if origin is typing.Literal:
        return " \\| ".join(f'"{a}"' if isinstance(a, str) else str(a) for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (tuple, list):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"map {_type_name(args[0])} -> {_type_name(args[1])}" if args else "map"
    if annotation is type(None):
        return "null"
    name = getattr(annotation, "__name__", str(annotation))
    return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(name, name)


def field_tables() -> str:
    """Markdown: one table per record model, a row per field (name, type, meaning)."""
    parts: list[str] = []
    for model in _models():
        described = docstring_attributes(model)
        summary = (inspect.getdoc(model) or "").split("\n\n")[0].replace("\n", " ")
        parts.append(
            f"### {model.__name__}\n\n{summary}\n\n| field | type | meaning |\n|---|---|---|"
        )
        for name, info in model.model_fields.items():
            meaning = described.get(name) or info.description or ""
            meaning = meaning.replace("|", "\\|")
            parts.append(f"| `{name}` | {_type_name(info.annotation)} | {meaning} |")
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"
