"""What the physical model predicts per row: a typed container of arrays, and the median step.

:func:`~mlenergy.estimate.physics.predict` fills it for serving,
:func:`~mlenergy.estimate.offline.predict_offline` for offline jobs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

MEDIAN_BLEND_WIDTH = 0.05
"""Width (in the fraction of steps carrying prompts) of the switch in :func:`median_step`."""


def median_step(t_decode: np.ndarray, t_mixed: np.ndarray, q_mixed: np.ndarray) -> np.ndarray:
    """Median step time (s), i.e. the median inter-token latency, of a decode/mixed mixture.

    A fraction ``q_mixed`` of the steps carries prompt tokens (``t_mixed``), the rest only
    decodes (``t_decode``); every step emits one token per sequence, so the median
    inter-token latency is the decode step while fewer than half the steps carry prompts and
    the mixed step beyond (large batches with short outputs). A logistic switch of width
    :data:`MEDIAN_BLEND_WIDTH` keeps it smooth for the fit.
    """
    w = 1.0 / (1.0 + np.exp(-(q_mixed - 0.5) / MEDIAN_BLEND_WIDTH))
    return t_decode + w * (t_mixed - t_decode)


@dataclass(frozen=True, slots=True)
class Prediction:
    """What the physics predicts per row (arrays of one length; energies per output token).

    Attributes:
        throughput_tokens_per_s: Output tokens per second, all GPUs.
        avg_power_w: Power summed over the GPUs (W).
        energy_per_token_j: GPU energy per output token (J).
        step_s: Mean step (inter-token latency, s); an offline job's mean decode step.
        clock_mhz: The SM clock the rows run at (after throttling to the power cap).
        energy_static_j: Idle power's share of ``energy_per_token_j``.
        energy_overhead_j: The always-on dynamic power and the per-sequence work's share.
        energy_compute_j: Tensor-core work's share.
        energy_memory_j: Memory traffic's (and dequantisation's) share.
        energy_prefill_j: The prompts' share (with ``energy_decode_j``, the total).
        energy_decode_j: The decoding's share.
        t_prefill_s: Prefill time spread per step (s).
        decode_step_s: A decode step without prompt tokens (s; NaN for an offline job).
        median_step_s: Median step time, the median inter-token latency (s;
            :func:`median_step`; NaN for an offline job).
        power_limit_infeasible: Rows whose power limit is below what the workload draws at
            the lowest SM clock (their power is the uncapped draw at that clock: report
            them as errors).
        min_clock_power_w: Per GPU, the draw at the lowest clock reached (W).
        job_duration_s: An offline job's wall time (s; NaN for serving).
        prefill_duration_s: The part of it spent prefilling (s; NaN for serving).
    """

    throughput_tokens_per_s: np.ndarray
    avg_power_w: np.ndarray
    energy_per_token_j: np.ndarray
    step_s: np.ndarray
    clock_mhz: np.ndarray
    energy_static_j: np.ndarray
    energy_overhead_j: np.ndarray
    energy_compute_j: np.ndarray
    energy_memory_j: np.ndarray
    energy_prefill_j: np.ndarray
    energy_decode_j: np.ndarray
    t_prefill_s: np.ndarray
    decode_step_s: np.ndarray
    median_step_s: np.ndarray
    power_limit_infeasible: np.ndarray
    min_clock_power_w: np.ndarray
    job_duration_s: np.ndarray
    prefill_duration_s: np.ndarray

    def columns(self) -> dict[str, np.ndarray]:
        """One array per field (the frame form)."""
        return {name: getattr(self, name) for name in PREDICTIONS}

    def replace(self, **columns: np.ndarray) -> Prediction:
        """The same prediction with the named columns replaced."""
        return dataclasses.replace(self, **columns)


PREDICTIONS = tuple(f.name for f in dataclasses.fields(Prediction))
"""The names of :class:`Prediction`'s columns, in order."""

BREAKDOWNS: dict[str, tuple[str, ...]] = {
    "by phase": ("prefill", "decode"),
    "by cause": ("compute", "memory", "static_idle", "overhead"),
}
"""The two splits of the energy per output token, as keys of ``Estimate.breakdown_j_per_token``:
each split's parts add up to the whole on their own; the two splits are never added together."""
