"""Time and power of training work on one GPU at an SM clock: the step and each instruction.

A fully sharded training step (:func:`~mlenergy.estimate.training.estimate_training`) and a
pipeline stage's forward or backward of one microbatch
(:func:`~mlenergy.estimate.training.estimate_pipeline_stages`,
:mod:`~mlenergy.estimate.training_pipeline`) are the same kind of work: matmul FLOPs at the
achieved tensor fraction :data:`TRAIN_MFU_PRIOR` (scaling with the clock), bytes streamed at
the effective bandwidth, tensor-parallel activation all-reduces and data-parallel weight and
gradient traffic over the links, and fixed host costs; memory, links and host costs do not
scale with the clock. Power is :mod:`~mlenergy.estimate.power_model`'s, and a GPU whose draw
would pass its TDP runs at the lower clock that fits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mlenergy.estimate.coefficients import Coefficients
from mlenergy.estimate.power_model import (
    gpu_power,
    idle_power_w,
    lowest_clock_mhz,
    settled_clock,
)
from mlenergy.estimate.roofline import effective_bandwidth, soft_max
from mlenergy.reference.gpus import GpuSpec

TRAIN_MFU_PRIOR = 0.40
"""Achieved fraction of dense tensor peak in training matmuls (typical well-tuned MFU)."""


@dataclass(frozen=True)
class TrainingWork:
    """One GPU's work in a training step or instruction.

    Attributes:
        flops: Matmul and attention FLOPs.
        mem_bytes: Bytes streamed from memory (weights read, optimizer update).
        tp_all_reduces: Tensor-parallel activation all-reduces (0 without tensor parallelism).
        tp_bytes: Ring bytes of one all-reduce per GPU.
        tp: Tensor-parallel degree.
        dp_bytes: Data-parallel bytes per GPU over the links (FSDP all-gathers and
            reduce-scatters; 0 when none).
        host_s: Fixed costs (per step, per layer), in seconds.
    """

    flops: float
    mem_bytes: float
    tp_all_reduces: float
    tp_bytes: float
    tp: int
    dp_bytes: float
    host_s: float


def work_at_clock(
    c: Coefficients, g: GpuSpec, prec: str, w: TrainingWork, clock: float
) -> tuple[float, float]:
    """(time s, uncapped power per GPU W) of ``w`` at SM clock ``clock`` (MHz)."""
    speed = clock / g.clock_at_spec_mhz
    t_comp = w.flops / (TRAIN_MFU_PRIOR * g.peak_tflops(prec) * 1e12 * speed)
    t_mem = w.mem_bytes / effective_bandwidth(g.memory_bandwidth_tb_s * 1e12, c)
    t_gpu = float(soft_max(t_mem, t_comp, c.overlap_p))  # the serving roofline's overlap
    link = c.eta_link * g.interconnect_gb_s * 1e9
    t_dp = w.dp_bytes / link
    t_tp = 0.0
    if w.tp_all_reduces:
        t_tp = w.tp_all_reduces * (c.collective_s * np.log2(2.0 * w.tp) + w.tp_bytes / link)
    t = w.host_s + t_gpu + t_tp + t_dp
    power = gpu_power(
        idle_power_w(g.idle_power_w, g.tdp_w, c),
        g.tdp_w,
        clock / g.max_sm_clock_mhz,
        min(t_comp / t, 1.0),
        min((t_mem + t_tp + t_dp) / t, 1.0),
        c,
    )
    return t, float(power.total)


def work_at_locked_clock(
    c: Coefficients, g: GpuSpec, prec: str, w: TrainingWork, clock: float
) -> tuple[float, float]:
    """(time s, power per GPU W) of ``w`` with the SM clock locked at ``clock`` (MHz).

    Over the GPU's TDP the driver runs it at the highest lower clock whose draw fits
    (:func:`~mlenergy.estimate.power_model.settled_clock`), as when serving; the power is
    then at most the TDP.
    """
    low = lowest_clock_mhz(g.min_sm_clock_mhz, g.max_sm_clock_mhz)
    clock = settled_clock(lambda clk: work_at_clock(c, g, prec, w, clk)[1], clock, low, g.tdp_w)
    t, power = work_at_clock(c, g, prec, w, clock)
    return t, min(power, g.tdp_w)


def instruction_work(
    c: Coefficients,
    flops_gpu: float,
    weight_bytes: float,
    layers: int,
    tokens: int,
    hidden: int,
    tp: int,
) -> TrainingWork:
    """A stage's forward or backward of one microbatch on one GPU.

    Args:
        c: Coefficients (``layer_s``).
        flops_gpu: FLOPs on this GPU.
        weight_bytes: Weight bytes read on this GPU.
        layers: Layers of the stage.
        tokens: Tokens of the microbatch.
        hidden: Hidden size.
        tp: Tensor-parallel degree (two bf16 activation all-reduces per layer, ring).
    """
    return TrainingWork(
        flops=flops_gpu,
        mem_bytes=weight_bytes,
        tp_all_reduces=2.0 * layers if tp > 1 else 0.0,
        tp_bytes=tokens * hidden * 2.0 * 2.0 * (tp - 1) / tp,
        tp=tp,
        dp_bytes=0.0,
        host_s=c.layer_s * layers,
    )
