"""Input checks of one configuration: values, parallel layout, SM clock and power limit.

Each check names the offending field; :func:`check_workload` raises
:class:`~mlenergy.errors.UserError`, the other checks return the message so that the batch path can
put it in a row's ``error``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from mlenergy.errors import UserError

if TYPE_CHECKING:
    from mlenergy.estimate.catalog import GpuSpec
    from mlenergy.estimate.serving import ServingSetup
    from mlenergy.models.architecture import ArchitectureSpec

BATCH_CAP_TOLERANCE = 1.001
"""``batch_size`` may exceed ``max_num_seqs`` by this factor (rounding of measured averages)."""


def positive(name: str, value: float | None, allow_zero: bool = False) -> float:
    """``value`` as a float, or :class:`UserError` naming ``name`` unless > 0 (>= 0)."""
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UserError(f"{name} must be a number, got {value!r}") from None
    if math.isnan(v) or v < 0 or (v == 0 and not allow_zero):
        raise UserError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return v


def expected_num_gpus(tp: int, ep: int, dp: int, pp: int) -> int:
    """GPUs a parallel layout occupies: ``tp * pp * dp``, or ``ep`` when experts span more.

    Expert parallelism reuses the GPUs of the other degrees (as in vLLM, where the experts of
    each MoE layer are sharded over the ``tp * dp`` GPUs); the reference measurements record
    an expert-parallel run either as ``ep = tp * dp`` or as ``tp = dp = 1, ep = num_gpus``.
    In both cases the layout spans ``max(tp * pp * dp, ep)`` GPUs and the experts are sharded
    over all of them (``ep = num_gpus``).
    """
    return max(int(tp) * int(pp) * int(dp), int(ep))


def layout_mismatch(
    num_gpus: np.ndarray | float,
    tp: np.ndarray | float,
    ep: np.ndarray | float,
    dp: np.ndarray | float,
    pp: np.ndarray | float,
) -> np.ndarray | bool:
    """Whether a parallel layout is inconsistent with ``num_gpus`` (scalars or arrays).

    Rule (holds on every reference row): ``num_gpus == max(tp * pp * dp, ep)``; with
    ``ep > 1`` the experts are sharded over all GPUs, so ``ep == num_gpus`` and ``tp * pp * dp``
    divides it. :func:`check_layout` words the message.
    """
    dense = tp * pp * dp
    sharded = (ep > 1) & ((ep != num_gpus) | (np.mod(num_gpus, dense) != 0))
    return (num_gpus != np.maximum(dense, ep)) | sharded


def check_layout(num_gpus: float, tp: float, ep: float, dp: float, pp: float) -> str:
    """The error message of a parallel layout inconsistent with ``num_gpus`` ('' if none).

    Rule (holds on every reference row): ``num_gpus == max(tp * pp * dp, ep)``; with
    ``ep > 1`` the experts are sharded over all GPUs, so ``ep == num_gpus`` and ``tp * pp * dp``
    divides it.
    """
    if not layout_mismatch(num_gpus, tp, ep, dp, pp):
        return ""
    dense = tp * pp * dp
    if num_gpus != max(dense, ep):
        how = f"tensor_parallel x pipeline_parallel x data_parallel = {dense:g}"
        if ep > dense:
            how = f"expert_parallel = {ep:g} (above tp x pp x dp = {dense:g})"
        return f"num_gpus ({num_gpus:g}) does not match the parallel layout: {how}"
    return (
        f"expert_parallel ({ep:g}) must equal num_gpus ({num_gpus:g}), with "
        f"tp x pp x dp ({dense:g}) dividing it (experts are sharded over all GPUs)"
    )


def check_workload(w: ServingSetup, spec: ArchitectureSpec, gpu: GpuSpec) -> None:
    """Raise :class:`UserError` naming the field if the configuration is invalid."""
    positive("batch_size", w.batch_size)
    positive("input_tokens", w.input_tokens)
    positive("output_tokens", w.output_tokens)
    for name in ("num_gpus", "tensor_parallel", "expert_parallel", "data_parallel"):
        v = getattr(w, name)
        if int(v) != v or v < 1:
            raise UserError(f"{name} must be a whole number >= 1, got {v!r}")
    if w.max_num_seqs is not None:
        cap = positive("max_num_seqs", w.max_num_seqs)
        if int(cap) != cap:
            raise UserError(f"max_num_seqs must be a whole number >= 1, got {w.max_num_seqs!r}")
        if w.batch_size > cap * BATCH_CAP_TOLERANCE:
            raise UserError(
                f"batch_size ({w.batch_size:g}) exceeds max_num_seqs ({cap:g}), the engine's "
                "concurrency cap",
                "batch_size is the average number of sequences decoding together; keep it "
                "at or below max_num_seqs",
            )
    if int(w.pipeline_parallel) != w.pipeline_parallel or w.pipeline_parallel < 1:
        raise UserError(f"pipeline_parallel must be a whole number >= 1, got {w.pipeline_parallel}")
    if w.num_gpus % w.data_parallel:
        raise UserError(
            f"data_parallel ({w.data_parallel}) does not divide num_gpus ({w.num_gpus})"
        )
    layout = check_layout(
        w.num_gpus, w.tensor_parallel, w.expert_parallel, w.data_parallel, w.pipeline_parallel
    )
    if layout:
        raise UserError(layout, "Omit --num-gpus to derive it from the parallel degrees")
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
    message = clock_power_error(w.sm_clock_mhz, w.power_limit_w, gpu)
    if message:
        raise UserError(message)


def clock_power_error(sm_clock_mhz: float | None, power_limit_w: float | None, gpu: GpuSpec) -> str:
    """The error message of a bad SM clock or power limit for ``gpu`` ('' if none).

    Rules: the two are alternatives (a locked clock or a power limit, not both); the clock
    must lie in the GPU's ``min_sm_clock_mhz``..``max_sm_clock_mhz`` (lower bound 0 when the
    spec does not know it); the power limit is per GPU and must satisfy
    ``0 < power_limit <= tdp_w`` (NVIDIA allows limits between a board minimum and the maximum
    board power; the catalog knows the TDP only).
    """
    if sm_clock_mhz is not None and power_limit_w is not None:
        return (
            "sm_clock and power_limit are alternatives (a locked SM clock or a power limit); "
            "give only one"
        )
    if sm_clock_mhz is not None:
        lo = gpu.min_sm_clock_mhz or 0.0
        if math.isnan(sm_clock_mhz) or not lo <= sm_clock_mhz <= gpu.max_sm_clock_mhz:
            return (
                f"sm_clock {sm_clock_mhz:g} MHz is outside {gpu.name}'s range "
                f"{lo:g}-{gpu.max_sm_clock_mhz:g} MHz"
            )
    if power_limit_w is not None and (
        math.isnan(power_limit_w) or not 0 < power_limit_w <= gpu.tdp_w
    ):
        return (
            f"power_limit {power_limit_w:g} W is outside {gpu.name}'s allowed range "
            f"0 < power_limit <= {gpu.tdp_w:g} W (TDP per GPU)"
        )
    return ""


MODES = ("serving", "offline")
"""Workload modes: steady-state serving (the default) or an offline batch job."""


def mode_error(mode: str | None, max_output_tokens: float | None, output_tokens: float) -> str:
    """Why a mode and generation cap are invalid (``""`` if they are fine).

    Args:
        mode: ``serving``, ``offline`` or blank (serving).
        max_output_tokens: Generation cap (tokens) or ``None``.
        output_tokens: Mean output length (tokens).
    """
    name = (mode or "").strip().lower() or "serving"
    if name not in MODES:
        return f"mode must be serving or offline, got {mode!r}"
    if max_output_tokens is None:
        return ""
    if name != "offline":
        return "max_output_tokens applies to mode offline only (a cap of an offline job)"
    if math.isnan(max_output_tokens) or max_output_tokens <= 0:
        return f"max_output_tokens must be > 0, got {max_output_tokens!r}"
    if max_output_tokens < output_tokens:
        return (
            f"max_output_tokens ({max_output_tokens:g}) is below output_tokens "
            f"({output_tokens:g}): the cap must be at least the mean output length"
        )
    return ""


def check_mode(
    mode: str | None, max_output_tokens: float | str | None, output_tokens: float
) -> tuple[str, float | None]:
    """The mode (``serving`` or ``offline``) and the generation cap of an estimate.

    Raises:
        UserError: Unknown mode, a cap that is not a positive number, a cap below the mean
            output length, or a cap in serving mode (the message names the field).
    """
    cap = None
    if max_output_tokens is not None and str(max_output_tokens).strip() not in ("", "nan"):
        try:
            cap = float(max_output_tokens)
        except (TypeError, ValueError):
            raise UserError(
                f"max_output_tokens must be a number, got {max_output_tokens!r}"
            ) from None
    message = mode_error(mode, cap, float(output_tokens))
    if message:
        raise UserError(message)
    return (mode or "").strip().lower() or "serving", cap
