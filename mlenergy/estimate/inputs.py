"""Turn user inputs (model, GPU, parallelism, batch, lengths) into the physical model's arrays.

Resolves models (config path or id under a configs folder, ``-FP8`` suffix), GPUs (catalog or
spec file), task defaults for missing prompt lengths, checks the input (naming the bad field)
and whether the configuration fits in memory.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from mlenergy.errors import UserError
from mlenergy.estimate.catalog import GpuSpec, resolve_gpu
from mlenergy.estimate.physics import FEATURES
from mlenergy.estimate.profile import ModelProfile, build_profile, normalise_precision
from mlenergy.models.architecture import ArchitectureSpec

TASK_INPUT_TOKENS: dict[str, int] = {
    "lm-arena-chat": 250,
    "gpqa": 300,
    "sourcegraph-fim": 2000,
    "image-chat": 1200,
    "video-chat": 4000,
    "sharegpt-chat": 250,
    "code": 400,
}
"""Mean prompt length (tokens) assumed per task when ``input_tokens`` is not given.

Prompt lengths are not published with the reference measurements; these are typical means of
each workload (multimodal tasks count image/video tokens as prompt tokens)."""

DEFAULT_INPUT_TOKENS = 512
MEMORY_UTILISATION = 0.95
"""Fraction of device memory available to weights and KV cache."""


@dataclass(frozen=True)
class Workload:
    """One configuration to estimate.

    Attributes:
        batch_size: Average number of sequences decoding together (all replicas).
        input_tokens: Mean prompt length in tokens.
        output_tokens: Mean output length in tokens.
        num_gpus: GPUs used.
        tensor_parallel: Tensor-parallel degree.
        expert_parallel: Expert-parallel degree (>1: experts sharded over all GPUs).
        data_parallel: Data-parallel replicas.
        pipeline_parallel: Pipeline stages.
        sm_clock_mhz: Locked SM clock in MHz (``None``: the GPU's maximum).
        power_limit_w: Power limit per GPU in watts (``None``: TDP).
        legacy_engine: True for the older serving engine of the v2 measurements.
    """

    batch_size: float
    input_tokens: float
    output_tokens: float
    num_gpus: int = 1
    tensor_parallel: int = 1
    expert_parallel: int = 1
    data_parallel: int = 1
    pipeline_parallel: int = 1
    sm_clock_mhz: float | None = None
    power_limit_w: float | None = None
    legacy_engine: bool = False


def default_configs_dir() -> Path | None:
    """``<reference>/model-configs`` when the reference data is present, else ``None``."""
    from mlenergy.estimate.reference import reference_dir

    ref = reference_dir()
    return ref / "model-configs" if ref is not None else None


@lru_cache(maxsize=512)
def _load_config(path: str) -> ArchitectureSpec:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"model config '{p}' is not valid JSON ({exc.msg})") from None
    return ArchitectureSpec.from_config(data)


def resolve_model(
    model: str, configs_dir: str | Path | None = None
) -> tuple[ArchitectureSpec, bool]:
    """Return the architecture of ``model`` and whether its id asks for FP8 weights.

    Args:
        model: A path to a ``config.json`` (or a folder holding one), or a model id resolved
            as ``<configs_dir>/<org>__<name>.json``; a trailing ``-FP8`` selects the base
            model's config with FP8 weights.
        configs_dir: Folder of ``<org>__<name>.json`` configs (default: the reference's).

    Raises:
        UserError: The config cannot be found or is incomplete (names the field).
    """
    text = str(model).strip()
    if not text:
        raise UserError("model is empty", "Give a config.json path or a model id")
    p = Path(text)
    if p.is_dir() and (p / "config.json").is_file():
        p = p / "config.json"
    if p.suffix == ".json" or p.is_file():
        if not p.is_file():
            raise UserError(f"model config '{p}' does not exist", "Check the --model path")
        return _load_config(str(p.resolve())), False
    fp8 = text.upper().endswith("-FP8")
    base = text[: -len("-FP8")] if fp8 else text
    folder = Path(configs_dir) if configs_dir else default_configs_dir()
    if folder is None:
        raise UserError(
            f"model '{text}' is an id but no configs folder is known",
            "Pass --configs-dir or a path to a config.json",
        )
    candidate = folder / (base.replace("/", "__") + ".json")
    if not candidate.is_file():
        raise UserError(
            f"model '{text}': no config '{candidate.name}' in {folder}",
            "Put the model's config.json there as <org>__<name>.json or pass its path",
        )
    return _load_config(str(candidate.resolve())), fp8


def _positive(name: str, value: float | None, allow_zero: bool = False) -> float:
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UserError(f"{name} must be a number, got {value!r}") from None
    if math.isnan(v) or v < 0 or (v == 0 and not allow_zero):
        raise UserError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return v


def check_workload(w: Workload, spec: ArchitectureSpec, gpu: GpuSpec) -> None:
    """Raise :class:`UserError` naming the field if the configuration is invalid."""
    _positive("batch_size", w.batch_size)
    _positive("input_tokens", w.input_tokens, allow_zero=True)
    _positive("output_tokens", w.output_tokens)
    for name in ("num_gpus", "tensor_parallel", "expert_parallel", "data_parallel"):
        v = getattr(w, name)
        if int(v) != v or v < 1:
            raise UserError(f"{name} must be a whole number >= 1, got {v!r}")
    if int(w.pipeline_parallel) != w.pipeline_parallel or w.pipeline_parallel < 1:
        raise UserError(f"pipeline_parallel must be a whole number >= 1, got {w.pipeline_parallel}")
    if w.num_gpus % w.data_parallel:
        raise UserError(
            f"data_parallel ({w.data_parallel}) does not divide num_gpus ({w.num_gpus})"
        )
    if spec.num_heads % w.tensor_parallel:
        raise UserError(
            f"tensor_parallel ({w.tensor_parallel}) does not divide num_attention_heads "
            f"({spec.num_heads})",
            "Pick a tensor-parallel degree that divides the number of attention heads",
        )
    if w.expert_parallel > 1 and not spec.is_moe:
        raise UserError(f"expert_parallel ({w.expert_parallel}) needs an MoE model")
    if spec.is_moe and w.expert_parallel > (spec.num_experts or 1):
        raise UserError(
            f"expert_parallel ({w.expert_parallel}) exceeds num_experts ({spec.num_experts})"
        )
    if w.sm_clock_mhz is not None:
        lo = gpu.min_sm_clock_mhz or 0.0
        if not lo <= w.sm_clock_mhz <= gpu.max_sm_clock_mhz:
            raise UserError(
                f"sm_clock {w.sm_clock_mhz:g} MHz is outside {gpu.name}'s range "
                f"{lo:g}-{gpu.max_sm_clock_mhz:g} MHz"
            )
    if w.power_limit_w is not None and w.power_limit_w <= 0:
        raise UserError(f"power_limit must be > 0 W, got {w.power_limit_w}")


def memory_need_gb(prof: ModelProfile, w: Workload) -> tuple[float, float, float]:
    """Per-GPU memory need in GB: (weights, KV cache and state, total).

    The KV cache holds every sequence at its mean steady-state context ``I + O/2``.
    """
    a = w.num_gpus / w.data_parallel
    shards = w.num_gpus if w.expert_parallel > 1 else a
    experts = prof.expert_bytes * prof.num_experts * prof.n_moe_layers
    weights = (prof.common_bytes + prof.embedding_bytes) / a + experts / shards
    ctx = w.input_tokens + 0.5 * w.output_tokens
    ctx_w = min(ctx, prof.window) if prof.window else ctx
    tp_eff = max(a / w.pipeline_parallel, 1.0)
    kv_shard = (1.0 if prof.latent_kv else min(tp_eff, prof.num_kv_heads)) * w.pipeline_parallel
    br = w.batch_size / w.data_parallel
    kv = br * (prof.kv_full_bytes_per_token * ctx + prof.kv_window_bytes_per_token * ctx_w)
    kv = kv / kv_shard + br * prof.ssm_state_bytes / a
    return weights / 1e9, kv / 1e9, (weights + kv) / 1e9


def check_memory(prof: ModelProfile, gpu: GpuSpec, w: Workload) -> None:
    """Raise :class:`UserError` with the memory arithmetic if the configuration does not fit."""
    weights, kv, total = memory_need_gb(prof, w)
    usable = gpu.memory_gb * MEMORY_UTILISATION
    if total > usable:
        ctx = w.input_tokens + 0.5 * w.output_tokens
        raise UserError(
            f"batch_size {w.batch_size:g} does not fit: per GPU {weights:.1f} GB weights + "
            f"{kv:.1f} GB KV cache ({w.batch_size / w.data_parallel:g} sequences x "
            f"{ctx:.0f} tokens mean context) = {total:.1f} GB > {usable:.1f} GB usable of "
            f"{gpu.memory_gb:g} GB on {gpu.name}",
            "Lower the batch size or the lengths, or use more GPUs",
        )


def feature_row(prof: ModelProfile, gpu: GpuSpec, w: Workload) -> dict[str, float]:
    """Feature values (see :data:`~mlenergy.estimate.physics.FEATURES`) of one configuration."""
    return {
        "common_bytes": prof.common_bytes,
        "expert_bytes": prof.expert_bytes,
        "n_moe_layers": prof.n_moe_layers,
        "num_experts": prof.num_experts,
        "experts_per_token": prof.experts_per_token,
        "dense_flops": prof.dense_flops_per_token,
        "expert_flops": prof.expert_flops_per_token,
        "kv_full": prof.kv_full_bytes_per_token,
        "kv_window": prof.kv_window_bytes_per_token,
        "window": prof.window,
        "attn_full": prof.attn_full_flops,
        "attn_window": prof.attn_window_flops,
        "ssm_bytes": prof.ssm_state_bytes,
        "ssm_flops": prof.ssm_flops_per_token,
        "quant_common": prof.quant_common_elems,
        "quant_expert": prof.quant_expert_elems,
        "num_kv_heads": prof.num_kv_heads,
        "latent_kv": float(prof.latent_kv),
        "num_layers": prof.num_layers,
        "hidden_size": prof.hidden_size,
        "bandwidth": gpu.memory_bandwidth_tb_s * 1e12,
        "peak_dense": gpu.peak_tflops(prof.precision) * 1e12,
        "peak_expert": gpu.peak_tflops(prof.expert_precision) * 1e12,
        "spec_clock": gpu.clock_at_spec_mhz,
        "max_clock": gpu.max_sm_clock_mhz,
        "min_clock": gpu.min_sm_clock_mhz or 0.3 * gpu.max_sm_clock_mhz,
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
        "output_tokens": w.output_tokens,
        "legacy": float(w.legacy_engine),
        "clock": np.nan if w.sm_clock_mhz is None else w.sm_clock_mhz,
        "power_limit": np.nan if w.power_limit_w is None else w.power_limit_w,
    }


def stack(rows: list[dict[str, float]]) -> dict[str, np.ndarray]:
    """Stack feature rows into one float64 array per feature."""
    return {name: np.array([r[name] for r in rows], dtype=np.float64) for name in FEATURES}


def has_value(value: object) -> bool:
    """True unless ``value`` is None, empty or NaN (a blank CSV cell)."""
    return value is not None and str(value).strip() not in ("", "nan", "NaN", "None")


def task_input_tokens(task: str | None) -> float:
    """Default mean prompt length (tokens) of a task: calibrated table, else built-in."""
    from mlenergy.estimate.physics import default_coefficients

    key = (task or "").strip()
    fitted = default_coefficients().task_input_tokens
    if key in fitted:
        return float(fitted[key])
    return float(TASK_INPUT_TOKENS.get(key, DEFAULT_INPUT_TOKENS))


def input_tokens_for(task: str | None, input_tokens: float | str | None) -> float:
    """The prompt length: ``input_tokens`` when given, else the task default (tokens)."""
    if has_value(input_tokens):
        return _positive("input_tokens", input_tokens, allow_zero=True)
    return task_input_tokens(task)


def prepare(
    model: str,
    gpu: str | GpuSpec,
    workload: Workload,
    precision: str | None = None,
    configs_dir: str | Path | None = None,
    check_fit: bool = True,
) -> tuple[ArchitectureSpec, ModelProfile, GpuSpec, dict[str, float]]:
    """Resolve, validate and featurise one configuration.

    Raises:
        UserError: Any invalid input, naming the field, or a configuration that does not fit.
    """
    spec, fp8 = resolve_model(model, configs_dir)
    prec = "fp8" if fp8 else normalise_precision(precision)
    if fp8 and precision and normalise_precision(precision) not in ("fp8", "bfloat16"):
        prec = normalise_precision(precision)
    gpu_spec = resolve_gpu(gpu)
    check_workload(workload, spec, gpu_spec)
    prof = _profile(spec, prec)
    if check_fit:
        check_memory(prof, gpu_spec, workload)
    return spec, prof, gpu_spec, feature_row(prof, gpu_spec, workload)


_PROFILE_CACHE: dict[tuple[ArchitectureSpec, str], ModelProfile] = {}


def _profile(spec: ArchitectureSpec, precision: str) -> ModelProfile:
    key = (spec, precision)
    prof = _PROFILE_CACHE.get(key)
    if prof is None:
        prof = build_profile(spec, precision)
        _PROFILE_CACHE[key] = prof
    return prof
