"""An estimate request as a typed object: one dataclass per concern, each field documented once.

:class:`EstimateRequest` is one serving (or offline) configuration to estimate; its parallel
layout is a :class:`~mlenergy.records.parallel.ParallelLayout` and its clock or power setting a
:class:`GpuSettings`. The field names are the keywords of
:func:`~mlenergy.estimate.api.estimate`, the columns of the batch CSV
(:mod:`~mlenergy.estimate.batch`) and of the request table
(:class:`~mlenergy.estimate.requests.EstimateRequests`), and, dashed, the options of
``mlenergy estimate``; the docstring under a field is its option's help.

The request is not checked when it is made: every request goes through the checks of the one
estimate path (:mod:`~mlenergy.estimate.checks`), which name the field at fault.

>>> from mlenergy.estimate import EstimateRequest, ParallelLayout
>>> req = EstimateRequest(model="meta-llama/Llama-3.1-70B-Instruct", gpu="H100",
...                       batch_size=64, output_tokens=256,
...                       layout=ParallelLayout(tensor_parallel=4))
>>> req == EstimateRequest.of("meta-llama/Llama-3.1-70B-Instruct", "H100", 64, 256,
...                           tensor_parallel=4)
True
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass, field
from typing import Any

from mlenergy.dataclass_fields import flat_fields, is_dataclass_type
from mlenergy.records.parallel import ParallelLayout
from mlenergy.reference.gpus import GpuSpec

__all__ = ["EstimateRequest", "GpuSettings", "ParallelLayout"]


@dataclass(frozen=True, kw_only=True)
class GpuSettings:
    """The operating point of each GPU: a locked SM clock or a power limit, not both."""

    sm_clock_mhz: float | None = field(default=None, metadata={"cli": {"flags": ("--sm-clock",)}})
    """Locked SM clock in MHz, within the GPU's range (default: its maximum); excludes a power
    limit."""
    power_limit_w: float | None = field(
        default=None, metadata={"cli": {"flags": ("--power-limit",)}}
    )
    """Power limit per GPU in W, above 0 and at most its TDP (default: the TDP); the clock is
    lowered until the power fits."""


@dataclass(frozen=True, kw_only=True)
class EstimateRequest:
    """One serving configuration, or one offline job, to estimate.

    Make one with keywords, or from flat fields with :meth:`of` (the layout's and the GPU
    settings' fields beside the request's own, as the CLI and the batch CSV give them).
    """

    model: str
    """config.json path or model id."""
    gpu: str | GpuSpec
    """Catalog GPU name or alias, a YAML/JSON spec of a hypothetical GPU, or a GpuSpec."""
    task: str | None = None
    """Task label: the default prompt length and engine (image-chat and video-chat prompts are
    visual tokens, each costing the engine host time before its prefill)."""
    precision: str | None = None
    """Weight precision: bfloat16, float16, fp8, mxfp4 or nvfp4 (default: the checkpoint's)."""
    engine: str | None = None
    """Engine profile or alias (mlenergy estimate engines); default: the task's, else
    leaderboard-v3-server."""
    layout: ParallelLayout = field(default_factory=ParallelLayout)
    """How the model is spread over the GPUs."""
    batch_size: float
    """Sequences decoding together, all replicas (offline: the job's requests)."""
    input_tokens: float | None = None
    """Mean prompt tokens (default: the task's)."""
    output_tokens: float
    """Mean output tokens."""
    max_num_seqs: int | None = None
    """The engine's concurrency cap, all replicas: a serving batch may not exceed it; an offline
    job runs this many at a time, the rest queued (default: vLLM's offline default on the GPU,
    1024 or 256 per replica)."""
    settings: GpuSettings = field(default_factory=GpuSettings)
    """The GPUs' clock or power limit."""
    mode: str | None = None
    """serving (steady state, the default) or offline (batch-size requests started together,
    the batch shrinking as they end)."""
    max_output_tokens: float | None = None
    """Offline: generation cap (at least output-tokens); some sequences stop early (default:
    every sequence generates output-tokens)."""

    @classmethod
    def of(cls, *args: Any, **values: Any) -> EstimateRequest:
        """A request from a request and changes, or from flat fields.

        Args:
            *args: One :class:`EstimateRequest` (``values`` then replace its fields), or the
                fields without default in order: ``model``, ``gpu``, ``batch_size``,
                ``output_tokens``.
            **values: Fields by name, the layout's and the GPU settings' among them
                (``tensor_parallel=2``, ``sm_clock_mhz=1400``).

        Raises:
            TypeError: An unknown field, or a field without default missing.
        """
        if len(args) == 1 and isinstance(args[0], EstimateRequest):
            return cls.of(**{**args[0].flat(), **values})
        if len(args) > len(REQUIRED_FIELDS):
            raise TypeError(f"at most {len(REQUIRED_FIELDS)} positional fields, got {len(args)}")
        given = dict(zip(REQUIRED_FIELDS, args, strict=False))
        twice = sorted(set(given) & set(values))
        if twice:
            raise TypeError(f"fields given twice: {', '.join(twice)}")
        return _build(cls, {**given, **values})

    def flat(self) -> dict[str, Any]:
        """Every field by name, the nested ones' in place (the order of :data:`FIELDS`)."""
        return _flatten(self)


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


@functools.cache  # a class's fields do not change; reading its type hints costs ~0.2 ms
def _parts(cls: type) -> dict[str, type]:
    """The fields of ``cls`` that are dataclasses themselves, with their types."""
    hints = typing.get_type_hints(cls)
    return {
        f.name: hints[f.name] for f in dataclasses.fields(cls) if is_dataclass_type(hints[f.name])
    }


@functools.cache
def _flat_fields(cls: type) -> dict[str, tuple[Any, Any]]:
    """Every flat field of ``cls`` (nested dataclasses' in their place): its type and default."""
    return {f.name: (hint, f.default) for f, hint, _ in flat_fields(cls)}


def _build(cls: type, values: dict[str, Any]) -> Any:
    unknown = sorted(set(values) - set(_flat_fields(cls)))
    if unknown:
        raise TypeError(f"unknown request fields: {', '.join(unknown)}")
    parts = _parts(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in parts:
            names = _flat_fields(parts[f.name])
            kwargs[f.name] = _build(parts[f.name], {k: v for k, v in values.items() if k in names})
        elif f.name in values:
            kwargs[f.name] = values[f.name]
    return cls(**kwargs)


def _flatten(obj: Any) -> dict[str, Any]:
    """The fields of ``obj``, its parts' (layout, settings) in place.

    A value that is itself a dataclass but not a part (a :class:`GpuSpec` as ``gpu``) stays whole.
    """
    kind: type = type(obj)
    parts = _parts(kind)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        out.update(_flatten(value) if f.name in parts else {f.name: value})
    return out


def _holds_numbers(hint: Any) -> bool:
    return set(typing.get_args(hint) or (hint,)) - {type(None)} <= {int, float}


_FLAT = _flat_fields(EstimateRequest)
FIELDS: tuple[str, ...] = tuple(_FLAT)
"""Every field of a request, flat, in order: the keywords, the CSV and table columns."""
NUMBER_FIELDS: tuple[str, ...] = tuple(n for n, (hint, _) in _FLAT.items() if _holds_numbers(hint))
"""The fields that hold numbers, in order (a cell given but not a number is its row's error)."""
REQUIRED_FIELDS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(EstimateRequest) if _required(f)
)
"""The fields without default, in order (the positional arguments of ``EstimateRequest.of``)."""
INTEGER_FIELDS: tuple[str, ...] = tuple(
    n for n, (hint, _) in _FLAT.items() if int in (typing.get_args(hint) or (hint,))
)
"""The number fields that hold whole numbers (GPU counts, parallel degrees, the sequence cap)."""
TEXT_FIELDS: tuple[str, ...] = tuple(n for n in FIELDS if n not in NUMBER_FIELDS)
"""The fields that hold text (``gpu`` may also hold a :class:`GpuSpec`)."""
NUMBER_DEFAULTS: dict[str, float] = {
    n: float(d) if isinstance(d, int | float) else float("nan")
    for n, (_, d) in _FLAT.items()
    if n in NUMBER_FIELDS
}
"""Each number field's value when not given (the parallel degrees' 1; else NaN)."""
