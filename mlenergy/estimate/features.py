"""The physical model's inputs: one feature row per configuration, stacked into arrays."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from mlenergy.estimate.engines import engine_code
from mlenergy.estimate.power_model import lowest_clock_mhz
from mlenergy.estimate.profile import QUANTISED, ModelProfile
from mlenergy.estimate.serving import ServingSetup
from mlenergy.reference.gpus import GpuSpec


@dataclass(frozen=True, slots=True)
class Features:
    """The physics' inputs: one float64 array per feature, all of one length (one per row).

    Units as the names and comments say (bytes, FLOP, tokens, W, MHz); a row's workload
    columns are what :class:`~mlenergy.estimate.serving.ServingSetup` holds, its model and
    GPU columns what :func:`feature_row` derives. :meth:`columns` and :meth:`from_columns`
    are the one place the names meet a frame or a dict (calibration, the memory rule).
    """

    # model
    common_bytes: np.ndarray
    expert_bytes: np.ndarray
    n_moe_layers: np.ndarray
    num_experts: np.ndarray
    experts_per_token: np.ndarray
    dense_flops: np.ndarray  # matmul FLOPs per token at the dense precision's rate
    bf16_flops: (
        np.ndarray
    )  # matmul FLOPs per token of self-attention a quantised checkpoint keeps BF16
    expert_flops: np.ndarray
    kv_full: np.ndarray
    kv_window: np.ndarray
    window: np.ndarray
    attn_full: np.ndarray
    attn_window: np.ndarray
    ssm_bytes: np.ndarray
    ssm_flops: np.ndarray
    quant_common: np.ndarray
    quant_expert: np.ndarray
    quant_common_bytes: np.ndarray  # bytes of the scaled low-precision weights outside the experts
    quant_expert_bytes: np.ndarray  # same, one routed expert in one layer
    num_kv_heads: np.ndarray
    latent_kv: np.ndarray
    num_layers: np.ndarray
    hidden_size: np.ndarray
    expert_inter: np.ndarray  # intermediate width of one routed expert (0 for dense)
    n_mamba_layers: np.ndarray  # Mamba (SSM) layers of a hybrid (0 otherwise)
    unquantised_experts: (
        np.ndarray
    )  # 1.0 when the routed experts are not quantised (profile.QUANTISED)
    fp8_experts: np.ndarray  # 1.0 when the routed experts are fp8 on a GPU with fp8 tensor cores
    # gpu
    bandwidth: np.ndarray  # bytes/s
    peak_dense: np.ndarray  # FLOP/s at the spec clock
    peak_bf16: np.ndarray  # BF16 tensor FLOP/s at the spec clock (the rate of ``bf16_flops``)
    peak_expert: np.ndarray
    spec_clock: np.ndarray
    max_clock: np.ndarray
    min_clock: np.ndarray
    tdp: np.ndarray
    idle: np.ndarray  # W, NaN when unknown
    link: np.ndarray  # bytes/s
    # workload
    num_gpus: np.ndarray
    tp: np.ndarray
    ep: np.ndarray
    dp: np.ndarray
    pp: np.ndarray
    batch: np.ndarray
    input_tokens: np.ndarray
    visual_tokens: np.ndarray  # prompt tokens of a prompt that come from images or video
    output_tokens: np.ndarray
    engine: np.ndarray  # position of the row's engine profile in engines.PROFILES (its overheads)
    clock: np.ndarray  # requested SM clock in MHz, NaN = max
    power_limit: np.ndarray  # W per GPU, NaN = TDP

    def __len__(self) -> int:
        return len(self.batch)

    @classmethod
    def from_columns(cls, cols: Mapping[str, np.ndarray]) -> Features:
        """The features named in ``cols`` (other names are ignored; a missing one raises)."""
        return cls(*(cols[name] for name in FEATURES))

    def columns(self) -> dict[str, np.ndarray]:
        """One array per name of :data:`FEATURES` (the frame form)."""
        return {name: getattr(self, name) for name in FEATURES}

    def rows(self, idx: np.ndarray) -> Features:
        """The rows ``idx`` (an index array or a boolean mask)."""
        return Features(*(getattr(self, name)[idx] for name in FEATURES))

    @classmethod
    def concat(cls, parts: list[Features]) -> Features:
        """The rows of ``parts``, one after the other."""
        return cls(*(np.concatenate([getattr(p, name) for p in parts]) for name in FEATURES))

    def repeat(self, k: int) -> Features:
        """Each row ``k`` times in a row (row ``i`` becomes rows ``i k`` to ``i k + k - 1``)."""
        return Features(*(np.repeat(getattr(self, name), k) for name in FEATURES))

    def replace(self, **columns: np.ndarray) -> Features:
        """The same features with the named columns replaced."""
        return dataclasses.replace(self, **columns)


FEATURES = tuple(f.name for f in dataclasses.fields(Features))
"""The feature names, in :class:`Features`' order."""


def dequantising(precision: str, gpu: GpuSpec, epilogue_scaled: bool) -> float:
    """1.0 when streaming weights of ``precision`` keeps the ALUs applying scales, else 0.0.

    Block-scaled fp8 (128 x 128 scales) is rescaled in the matmul's main loop. Per-tensor or
    per-channel fp8 scales (``epilogue_scaled``) are applied once, in the epilogue, on GPUs
    with fp8 tensor cores. MXFP4 and NVFP4 carry the block scales that Blackwell's tensor
    cores apply inside the multiply. Without tensor cores for the format (fp8 on Ampere,
    FP4 before Blackwell) vLLM's weight-only kernels dequantise every weight to BF16.

    Args:
        precision: Weight precision of the matmuls.
        gpu: The GPU.
        epilogue_scaled: The checkpoint's fp8 scales are per tensor or per channel.
    """
    if not gpu.native(precision):
        return 1.0
    if precision in ("mxfp4", "nvfp4"):
        return 0.0
    return 0.0 if precision == "fp8" and epilogue_scaled else 1.0


def feature_row(prof: ModelProfile, gpu: GpuSpec, w: ServingSetup) -> dict[str, float]:
    """Feature values (the fields of :class:`Features`) of one configuration."""
    deq_common = dequantising(prof.precision, gpu, prof.epilogue_scaled)
    deq_expert = dequantising(prof.expert_precision, gpu, prof.epilogue_scaled)
    return {
        "common_bytes": prof.common_bytes,
        "expert_bytes": prof.expert_bytes,
        "n_moe_layers": prof.n_moe_layers,
        "num_experts": prof.num_experts,
        "experts_per_token": prof.experts_per_token,
        "dense_flops": prof.dense_flops_per_token - prof.bf16_flops_per_token,
        "bf16_flops": prof.bf16_flops_per_token,
        "expert_flops": prof.expert_flops_per_token,
        "kv_full": prof.kv_full_bytes_per_token,
        "kv_window": prof.kv_window_bytes_per_token,
        "window": prof.window,
        "attn_full": prof.attn_full_flops,
        "attn_window": prof.attn_window_flops,
        "ssm_bytes": prof.ssm_state_bytes,
        "ssm_flops": prof.ssm_flops_per_token,
        "quant_common": prof.quant_common_elems * deq_common,
        "quant_expert": prof.quant_expert_elems * deq_expert,
        "quant_common_bytes": prof.quant_common_bytes * deq_common,
        "quant_expert_bytes": prof.quant_expert_bytes * deq_expert,
        "num_kv_heads": prof.num_kv_heads,
        "latent_kv": float(prof.latent_kv),
        "num_layers": prof.num_layers,
        "hidden_size": prof.hidden_size,
        "expert_inter": prof.expert_intermediate,
        "n_mamba_layers": prof.n_mamba_layers,
        # The block-scaled fp8 MoE path needs fp8 tensor cores; without them (Ampere) vLLM
        # runs weight-only kernels that dequantise to BF16, with no activation quantisation.
        "fp8_experts": float(
            prof.expert_precision == "fp8" and prof.n_moe_layers > 0 and gpu.native("fp8")
        ),
        # Unquantised routed experts: vLLM's Triton fused-MoE kernel picks its tile from the
        # tokens per step against the experts a GPU holds (see physics.py).
        "unquantised_experts": float(
            prof.expert_precision not in QUANTISED and prof.n_moe_layers > 0
        ),
        "bandwidth": gpu.memory_bandwidth_tb_s * 1e12,
        "peak_dense": gpu.peak_tflops(prof.precision) * 1e12,
        "peak_bf16": gpu.bf16_tflops * 1e12,
        "peak_expert": gpu.peak_tflops(prof.expert_precision) * 1e12,
        "spec_clock": gpu.clock_at_spec_mhz,
        "max_clock": gpu.max_sm_clock_mhz,
        "min_clock": lowest_clock_mhz(gpu.min_sm_clock_mhz, gpu.max_sm_clock_mhz),
        "tdp": gpu.tdp_w,
        "idle": np.nan if gpu.idle_power_w is None else gpu.idle_power_w,
        "link": gpu.interconnect_gb_s * 1e9,
        "num_gpus": w.num_gpus,
        "tp": w.tensor_parallel,
        "ep": w.expert_parallel,
        "dp": w.data_parallel,
        "pp": w.pipeline_parallel,
        "batch": w.batch_size,
        "input_tokens": w.input_tokens,
        "visual_tokens": w.visual_tokens,
        "output_tokens": w.output_tokens,
        "engine": engine_code(w.engine),
        "clock": np.nan if w.sm_clock_mhz is None else w.sm_clock_mhz,
        "power_limit": np.nan if w.power_limit_w is None else w.power_limit_w,
    }


def stack(rows: list[dict[str, float]]) -> Features:
    """Stack feature rows (:func:`feature_row`) into one float64 array per feature."""
    return Features(*(np.array([r[name] for r in rows], dtype=np.float64) for name in FEATURES))
