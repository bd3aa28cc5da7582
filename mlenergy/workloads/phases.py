"""Summaries of measured repeats into prefill, decode and request phase results.

Scalars on a :class:`~mlenergy.records.PhaseResult` are means over repeats; each repeat is kept
(``*_repeats``) with a Student-t 95% confidence interval, from the run-to-run spread. The energy
per token carries that interval (``energy_per_token_j_ci95``) and is marked ``wide_interval``
when it reaches further than +-20% of the mean. Inter-token latency percentiles pool
every decode step of every repeat; time to first token is the mean prefill duration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mlenergy.measure.repeats import is_wide
from mlenergy.measure.resolve import summed
from mlenergy.records import GenerationInfo, Interval, Phase, PhaseResult, RepeatStats


@dataclass
class RepeatWindows:
    """One measured repeat: per-pass prefill and decode results and decode step times (s).

    Attributes:
        prefill: The prefill window's result, divided by its passes.
        decode: The decode window's result, divided by its passes (``None``: no decode).
        step_times_s: Every decode step's time in seconds, over all passes.
        prefill_passes: Prefill passes inside the window.
        decode_passes: Decode passes inside the window.
    """

    prefill: Any
    decode: Any | None
    step_times_s: list[float]
    prefill_passes: int = 1
    decode_passes: int = 1


@dataclass
class PointMeasurement:
    """What :func:`mlenergy.workloads.inference.measure_point` measured for one batch size.

    Attributes:
        repeats: Per repeat: prefill and decode window results and decode step times (s).
        expert_utilisation: Fraction of routed tokens per expert (MoE), else ``None``.
        generation: How it generated (backends, versions, warm-up seconds), for the record.
        prepared: The prepared generator (a
            :class:`~mlenergy.workloads.backends.PreparedPoint`), reused by later repeats.
    """

    repeats: list[RepeatWindows]
    expert_utilisation: tuple[float, ...] | None = None
    generation: GenerationInfo | None = None
    prepared: Any = None


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None

    return float(np.percentile(np.asarray(values, dtype=float), q))


def _stats(values: list[float | None]) -> RepeatStats | None:
    if not values or any(v is None for v in values):
        return None
    return RepeatStats.from_values([float(v) for v in values if v is not None])


def _mean_host(windows: list[Any]) -> dict[str, Any]:
    """Mean CPU package / DRAM energy measured beside the GPUs (nothing when not measured)."""
    values = [v for w in windows if (v := getattr(w, "host_energy_j", None)) is not None]
    if not values or len(values) < len(windows):
        return {}
    devices = [w.host_energy_by_device_j for w in windows]
    keys = set().union(*devices)
    return {
        "host_energy_j": sum(values) / len(values),
        "host_energy_by_device_j": {
            k: sum(d.get(k, 0.0) for d in devices) / len(devices) for k in keys
        },
    }


def phase_result(
    phase: Phase,
    durations: list[float],
    energies: list[float | None],
    tokens: int,
    by_device: list[dict[str, float]],
    **latency: Any,
) -> PhaseResult:
    """Summarise one phase over repeats (means as scalars, every repeat kept).

    The repeats are those of one run, or, for a between-runs record, one value per fresh run
    (:mod:`mlenergy.workloads.run_spread`): the interval follows whatever spread they carry.

    Args:
        phase: Which phase.
        durations: Seconds of each repeat.
        energies: Joules of each repeat (``None`` where a repeat has no figure).
        tokens: Tokens of one repeat.
        by_device: Joules per device of each repeat.
        **latency: Other :class:`~mlenergy.records.PhaseResult` fields (latencies, passes,
            host energy).
    """
    duration = sum(durations) / len(durations)
    energy_stats = _stats(energies)
    energy = energy_stats.mean if energy_stats is not None else None
    if energy is not None and energy < 0:
        energy = None
    noise: dict[str, Any] = {}
    if energy_stats is not None and energy_stats.ci95 is not None and tokens > 0:
        ci = energy_stats.ci95
        noise = {
            "energy_per_token_j_ci95": Interval(low=ci.low / tokens, high=ci.high / tokens),
            "wide_interval": is_wide(energy_stats),
        }
    devices: dict[str, float] = {}
    if energy is not None and by_device:
        keys = set().union(*by_device)
        devices = {k: sum(d.get(k, 0.0) for d in by_device) / len(by_device) for k in keys}
    return PhaseResult.from_totals(
        phase,
        duration,
        energy,
        tokens,
        energy_by_device_j=devices,
        energy_j_repeats=energy_stats,
        duration_s_repeats=_stats(list(durations)),
        **noise,
        **latency,
    )


def summarise_phases(
    repeats: list[RepeatWindows], batch_size: int, input_tokens: int, output_tokens: int
) -> tuple[PhaseResult, ...]:
    """Turn measured repeats into prefill, decode and request phase results."""
    pre_d = [r.prefill.duration_s for r in repeats]
    pre_e = [r.prefill.energy_j for r in repeats]
    steps = [t for r in repeats for t in r.step_times_s]
    ttft = sum(pre_d) / len(pre_d)
    itl = {
        "itl_p50_s": _percentile(steps, 50),
        "itl_p90_s": _percentile(steps, 90),
        "itl_p99_s": _percentile(steps, 99),
    }
    phases = [
        phase_result(
            Phase.PREFILL,
            pre_d,
            pre_e,
            batch_size * input_tokens,
            [r.prefill.energy_by_device_j for r in repeats],
            ttft_s=ttft,
            passes_per_window=max(r.prefill_passes for r in repeats),
            **_mean_host([r.prefill for r in repeats]),
        )
    ]
    req_w = [r.prefill for r in repeats]
    req_d, req_e, req_dev = (
        list(pre_d),
        list(pre_e),
        [r.prefill.energy_by_device_j for r in repeats],
    )
    if output_tokens > 1:
        dec_w = [r.decode for r in repeats if r.decode is not None]
        if len(dec_w) != len(repeats):
            raise ValueError("a repeat of a point with output tokens has no decode window")
        dec_d = [w.duration_s for w in dec_w]
        dec_e = [w.energy_j for w in dec_w]
        dec_dev = [w.energy_by_device_j for w in dec_w]
        phases.append(
            phase_result(
                Phase.DECODE,
                dec_d,
                dec_e,
                batch_size * (output_tokens - 1),
                dec_dev,
                passes_per_window=max(r.decode_passes for r in repeats),
                **_mean_host(dec_w),
                **itl,
            )
        )
        req_w = [summed(a, b) for a, b in zip(req_w, dec_w, strict=True)]
        req_d = [a + b for a, b in zip(pre_d, dec_d, strict=True)]
        req_e = [
            a + b if a is not None and b is not None else None
            for a, b in zip(pre_e, dec_e, strict=True)
        ]
        req_dev = [
            {k: a.get(k, 0.0) + b.get(k, 0.0) for k in set(a) | set(b)}
            for a, b in zip(req_dev, dec_dev, strict=True)
        ]
    phases.append(
        phase_result(
            Phase.REQUEST,
            req_d,
            req_e,
            batch_size * output_tokens,
            req_dev,
            ttft_s=ttft,
            **_mean_host(req_w),
            **itl,
        )
    )
    return tuple(phases)
