"""Training-step mode: energy and time of one optimizer step (dense or MoE), per GPU physics.

Same hardware model and power terms as serving (:mod:`mlenergy.estimate.physics`), with the
work of a training step: 6 FLOPs per active weight per token (forward, input and weight
gradients) plus attention, weights read three times, an Adam update touching 16 bytes per
parameter (bf16 weights and grads, fp32 master and two moments), fully sharded data
parallelism (FSDP / ZeRO-3: weights, gradients and Adam states split over the data-parallel
ranks, weights all-gathered and gradients reduce-scattered each step) and tensor-parallel
activation all-reduces. Activations are stored without recomputation.

The reference data holds no training measurements, so the achieved tensor-core fraction is a
documented prior (``TRAIN_MFU_PRIOR``), not a fit: treat training estimates as first-order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlenergy.errors import UserError
from mlenergy.estimate.api import energy_source
from mlenergy.estimate.catalog import GpuSpec, resolve_gpu
from mlenergy.estimate.coefficients import Coefficients, default_coefficients
from mlenergy.estimate.configs import resolve_model
from mlenergy.estimate.physics import effective_bandwidth
from mlenergy.estimate.profile import build_profile, normalise_precision

TRAIN_MFU_PRIOR = 0.40
"""Achieved fraction of dense tensor peak in training matmuls (typical well-tuned MFU)."""
OPTIMIZER_BYTES_PER_PARAM = 16.0
"""Adam mixed precision: bf16 weight + bf16 grad + fp32 master + two fp32 moments."""
ACTIVATION_BYTES_PER_TOKEN_LAYER_HIDDEN = 34.0
"""Stored activations per token, layer and hidden unit without recomputation (bytes)."""


@dataclass(frozen=True)
class TrainingEstimate:
    """One training step (units in names; energy is GPU energy over all GPUs)."""

    model: str
    gpu: str
    num_gpus: int
    tensor_parallel: int
    data_parallel: int
    precision: str
    batch_size: int
    seq_len: int
    step_duration_s: float
    energy_per_step_j: float
    energy_per_token_j: float
    throughput_tokens_per_s: float
    avg_power_w: float
    mfu: float
    memory_gb_per_gpu: float
    energy_source: str

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form."""
        return asdict(self)


def estimate_training(
    model: str,
    gpu: str | GpuSpec,
    batch_size: int,
    seq_len: int,
    num_gpus: int | None = None,
    tensor_parallel: int = 1,
    data_parallel: int | None = None,
    precision: str | None = "bfloat16",
    sm_clock_mhz: float | None = None,
    configs_dir: str | Path | None = None,
    coefficients: Coefficients | None = None,
) -> TrainingEstimate:
    """Estimate one optimizer step of ``batch_size`` sequences of ``seq_len`` tokens.

    Args:
        model: Config path or model id.
        gpu: Catalog name, spec file or :class:`GpuSpec`.
        batch_size: Sequences per optimizer step (global).
        seq_len: Tokens per sequence.
        num_gpus: GPUs (default ``tensor_parallel * data_parallel``).
        tensor_parallel: Tensor-parallel degree.
        data_parallel: Data-parallel degree (default ``num_gpus / tensor_parallel``).
        precision: Compute precision of the matmuls (bfloat16 or fp8).
        sm_clock_mhz: Locked SM clock (default: maximum).
        configs_dir: Folder of model configs.
        coefficients: Hardware/power coefficients (default: shipped).

    Raises:
        UserError: Bad input or a step that does not fit in memory.
    """
    c = coefficients or default_coefficients()
    spec, fp8 = resolve_model(model, configs_dir)
    prec = "fp8" if fp8 else normalise_precision(precision)
    g = resolve_gpu(gpu)
    if batch_size < 1 or seq_len < 1:
        raise UserError("batch_size and seq_len must be >= 1 for a training step")
    if spec.num_heads % tensor_parallel:
        raise UserError(
            f"tensor_parallel ({tensor_parallel}) does not divide num_attention_heads "
            f"({spec.num_heads})"
        )
    n = num_gpus or tensor_parallel * (data_parallel or 1)
    dp = data_parallel or max(n // tensor_parallel, 1)
    if tensor_parallel * dp != n:
        raise UserError(
            f"tensor_parallel x data_parallel ({tensor_parallel * dp}) != num_gpus ({n})"
        )
    prof = build_profile(spec, prec)
    tokens = batch_size * seq_len
    tokens_gpu = tokens / dp
    params_gpu = prof.total_params / tensor_parallel  # parameters this GPU computes with
    state_gpu = params_gpu / dp  # fully sharded (FSDP / ZeRO-3) over data-parallel ranks
    act = ACTIVATION_BYTES_PER_TOKEN_LAYER_HIDDEN * tokens_gpu * prof.hidden_size
    act *= prof.num_layers / tensor_parallel
    mem_gb = (state_gpu * OPTIMIZER_BYTES_PER_PARAM + act) / 1e9
    if mem_gb > 0.95 * g.memory_gb:
        raise UserError(
            f"training step does not fit: {state_gpu * 16 / 1e9:.1f} GB weights/grads/Adam + "
            f"{act / 1e9:.1f} GB activations per GPU > {0.95 * g.memory_gb:.1f} GB usable",
            "Use more GPUs, a smaller batch or shorter sequences",
        )
    clock = float(sm_clock_mhz or g.max_sm_clock_mhz)
    speed = clock / g.clock_at_spec_mhz
    attn = (
        prof.attn_full_flops * seq_len / 2
        + prof.attn_window_flops * min(seq_len, prof.window or seq_len) / 2
    )
    flops_gpu = 3.0 * tokens_gpu * (prof.dense_flops_per_token + prof.expert_flops_per_token + attn)
    flops_gpu /= tensor_parallel
    t_comp = flops_gpu / (TRAIN_MFU_PRIOR * g.peak_tflops(prec) * 1e12 * speed)
    w_bytes = prof.weight_bytes / tensor_parallel
    t_mem = (3.0 * w_bytes + OPTIMIZER_BYTES_PER_PARAM * state_gpu) / effective_bandwidth(
        g.memory_bandwidth_tb_s * 1e12, c
    )
    p = c.overlap_p
    t_gpu = (t_mem**p + t_comp**p) ** (1.0 / p)
    link = c.eta_link * g.interconnect_gb_s * 1e9
    # FSDP: all-gather bf16 weights for forward and backward, reduce-scatter bf16 gradients.
    t_dp = 3.0 * 2.0 * params_gpu * (dp - 1) / dp / link if dp > 1 else 0.0
    t_tp = 0.0
    if tensor_parallel > 1:
        n_ar = 4.0 * prof.num_layers
        t_tp = n_ar * c.collective_s * np.log2(2.0 * tensor_parallel)
        t_tp += (
            n_ar
            * tokens_gpu
            * prof.hidden_size
            * 2.0
            * 2.0
            * (tensor_parallel - 1)
            / (tensor_parallel * link)
        )
    t_step = c.step_s + 3.0 * c.layer_s * prof.num_layers + t_gpu + t_tp + t_dp
    idle = g.idle_power_w if g.idle_power_w is not None else c.idle_frac * g.tdp_w
    r = clock / g.max_sm_clock_mhz
    volt = c.voltage_floor + (1.0 - c.voltage_floor) * r
    u_comp = min(t_comp / t_step, 1.0)
    u_busy = min((t_mem + t_tp + t_dp) / t_step, 1.0)
    power_gpu = idle + (g.tdp_w - idle) * (
        c.p_base * r + c.p_comp * u_comp * r * volt * volt + c.p_mem * u_busy
    )
    power_gpu = min(power_gpu, g.tdp_w)
    energy = power_gpu * n * t_step
    peak = g.peak_tflops(prec) * 1e12
    mfu = flops_gpu / (t_step * peak)
    return TrainingEstimate(
        model=str(model),
        gpu=g.name,
        num_gpus=n,
        tensor_parallel=tensor_parallel,
        data_parallel=dp,
        precision=prec,
        batch_size=int(batch_size),
        seq_len=int(seq_len),
        step_duration_s=t_step,
        energy_per_step_j=energy,
        energy_per_token_j=energy / tokens,
        throughput_tokens_per_s=tokens / t_step,
        avg_power_w=power_gpu * n,
        mfu=mfu,
        memory_gb_per_gpu=mem_gb,
        energy_source=energy_source(),
    )
