"""The plain values the submission rules read from one run, parsed or raw.

A :class:`RunFacts` is built either from a parsed :class:`~mlenergy.records.RunRecord`
(:func:`facts_from_record`) or from the raw JSON dict of a record that failed its schema
(:func:`facts_from_raw`), so a record with a schema error still gets every other problem
reported. A value that is missing or has the wrong type in a raw record is ``None`` (or
:data:`PRESENT` for a present-but-invalid text) and the rules needing it are skipped: the schema
error already names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mlenergy.records import RunRecord

PRESENT = "<invalid>"
"""Stands for a text field that is present in a raw record but not a string."""
COUNT_FIELDS = (
    "workload.batch_size",
    "workload.num_requests",
    "workload.input_tokens",
    "workload.output_tokens",
    "workload.max_num_seqs",
    "workload.steps",
    "workload.seq_len",
    "repeats",
    "warmup_runs",
    "model.total_params",
    "model.active_params",
)
"""Counts the rules bound (dotted paths in the record)."""
LATENCY_FIELDS = ("ttft_s", "itl_p50_s", "itl_p90_s", "itl_p99_s")
"""Per-phase latencies, in seconds."""


@dataclass(frozen=True)
class PhaseFacts:
    """One phase's figures (seconds, joules, watts, tokens, tokens/s); ``None`` when unknown."""

    name: str
    duration_s: float | None
    energy_j: float | None
    avg_power_w: float | None
    tokens: float | None
    energy_per_token_j: float | None
    throughput_tokens_per_s: float | None = None
    latency_s: float | None = None
    """The longest of the phase's latencies (TTFT, ITL percentiles), in seconds."""


@dataclass(frozen=True)
class RunFacts:
    """The values the rules read from one run (``None`` when missing or of the wrong type).

    Power in watts, energy in joules; ``cpu_packages`` counts the measured CPU packages
    (0 when the scope names none); ``counts`` maps :data:`COUNT_FIELDS` to their values;
    ``timeline_span_s`` is the ``(first, last)`` sample time of the power timeline.
    """

    status: str | None = "ok"
    energy_source: str | None = None
    idle_energy_source: str | None = None
    timeline_energy_source: str | None = None
    accelerator_model: str | None = None
    accelerator_count: int | None = 0
    accelerator_tdp_w: float | None = None
    driver_version: str | None = None
    cpu_model: str | None = None
    cpu_tdp_w: float | None = None
    cpu_packages: int = 0
    gpu_indices: int = 0
    torch: str | None = None
    engine: str | None = None
    zeus: str | None = None
    phases: tuple[PhaseFacts, ...] = ()
    checkpoint_energy: bool = False
    idle_avg_power_w: float | None = None
    dtype: str | None = None
    counts: Mapping[str, float | None] = field(default_factory=dict)
    timeline_span_s: tuple[float, float] | None = None
    checkpoint_max_s: float | None = None
    checkpoint_max_j: float | None = None


def facts_from_record(run: RunRecord) -> RunFacts:
    """The rule inputs of a parsed run record."""
    hw, sw = run.hardware, run.software
    timeline = run.power_timeline
    return RunFacts(
        status=run.status,
        energy_source=run.energy_source,
        idle_energy_source=run.idle.energy_source if run.idle else None,
        timeline_energy_source=timeline.energy_source if timeline else None,
        accelerator_model=hw.accelerator_model,
        accelerator_count=hw.accelerator_count,
        accelerator_tdp_w=hw.accelerator_tdp_w,
        driver_version=hw.driver_version,
        cpu_model=hw.cpu_model,
        cpu_tdp_w=hw.cpu_tdp_w,
        cpu_packages=len(run.scope.cpu_indices),
        gpu_indices=len(run.scope.gpu_indices),
        torch=sw.torch,
        engine=sw.engine,
        zeus=sw.zeus,
        phases=tuple(
            PhaseFacts(
                p.phase.value,
                p.duration_s,
                p.energy_j,
                p.avg_power_w,
                p.tokens,
                p.energy_per_token_j,
                p.throughput_tokens_per_s,
                _largest(p.ttft_s, p.itl_p50_s, p.itl_p90_s, p.itl_p99_s),
            )
            for p in run.phases
        ),
        checkpoint_max_s=_largest(*(c.duration_s for c in run.checkpoints)),
        checkpoint_max_j=_largest(*(c.energy_j for c in run.checkpoints)),
        checkpoint_energy=any(c.energy_j is not None for c in run.checkpoints),
        idle_avg_power_w=run.idle.avg_power_w if run.idle else None,
        dtype=run.model.dtype,
        counts=_counts(run.model_dump(include={"workload", "model", "repeats", "warmup_runs"})),
        timeline_span_s=(min(timeline.t_s), max(timeline.t_s))
        if timeline is not None and timeline.t_s
        else None,
    )


def obj(value: Any) -> Mapping[str, Any]:
    """``value`` if it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def num(value: Any) -> float | None:
    """``value`` as a float if it is a JSON number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else PRESENT


def _largest(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _counts(data: Mapping[str, Any]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for path in COUNT_FIELDS:
        value: Any = data
        for part in path.split("."):
            value = obj(value).get(part)
        out[path] = num(value)
    return out


def _span(timeline: Mapping[str, Any]) -> tuple[float, float] | None:
    times = timeline.get("t_s")
    if not isinstance(times, list | tuple):
        return None
    values = [v for v in (num(t) for t in times) if v is not None]
    return (min(values), max(values)) if values else None


def facts_from_raw(rec: Mapping[str, Any]) -> RunFacts:
    """The rule inputs of a raw run record dict (one that may fail its schema)."""
    hw, sw, scope = obj(rec.get("hardware")), obj(rec.get("software")), obj(rec.get("scope"))
    idle, timeline = obj(rec.get("idle")), obj(rec.get("power_timeline"))
    count = hw.get("accelerator_count", 0)
    cpus, gpus = scope.get("cpu_indices", ()), scope.get("gpu_indices", ())
    phases = rec.get("phases", ())
    checkpoints = rec.get("checkpoints", ())
    status = rec.get("status", "ok")
    return RunFacts(
        status=status if isinstance(status, str) else None,
        energy_source=_text(rec.get("energy_source")),
        idle_energy_source=_text(idle.get("energy_source")),
        timeline_energy_source=_text(timeline.get("energy_source")),
        accelerator_model=_text(hw.get("accelerator_model")),
        accelerator_count=count if isinstance(count, int) and not isinstance(count, bool) else None,
        accelerator_tdp_w=num(hw.get("accelerator_tdp_w")),
        driver_version=_text(hw.get("driver_version")),
        cpu_model=_text(hw.get("cpu_model")),
        cpu_tdp_w=num(hw.get("cpu_tdp_w")),
        cpu_packages=len(cpus) if isinstance(cpus, list | tuple) else 0,
        gpu_indices=len(gpus) if isinstance(gpus, list | tuple) else 0,
        torch=_text(sw.get("torch")),
        engine=_text(sw.get("engine")),
        zeus=_text(sw.get("zeus")),
        phases=tuple(
            PhaseFacts(
                str(p.get("phase", "?"))[:20],
                num(p.get("duration_s")),
                num(p.get("energy_j")),
                num(p.get("avg_power_w")),
                num(p.get("tokens")),
                num(p.get("energy_per_token_j")),
                num(p.get("throughput_tokens_per_s")),
                _largest(*(num(p.get(k)) for k in LATENCY_FIELDS)),
            )
            for p in (phases if isinstance(phases, list | tuple) else ())
            if isinstance(p, Mapping)
        ),
        checkpoint_energy=isinstance(checkpoints, list | tuple)
        and any(isinstance(c, Mapping) and c.get("energy_j") is not None for c in checkpoints),
        idle_avg_power_w=num(idle.get("avg_power_w")),
        dtype=_text(obj(rec.get("model")).get("dtype")),
        counts=_counts(rec),
        timeline_span_s=_span(timeline),
        checkpoint_max_s=_checkpoint_max(checkpoints, "duration_s"),
        checkpoint_max_j=_checkpoint_max(checkpoints, "energy_j"),
    )


def _checkpoint_max(checkpoints: Any, name: str) -> float | None:
    if not isinstance(checkpoints, list | tuple):
        return None
    return _largest(*(num(obj(c).get(name)) for c in checkpoints))
