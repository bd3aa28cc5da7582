"""Input checks of one configuration: values, parallel layout, SM clock and power limit.

Each check names the offending field and returns its message (``""``: none); the one path
(:mod:`~mlenergy.estimate.row_checks`) applies them to a table of requests and puts the
message in the row's error.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from mlenergy.estimate.catalog import GpuSpec

BATCH_CAP_TOLERANCE = 1.001
"""``batch_size`` may exceed ``max_num_seqs`` by this factor (rounding of measured averages)."""


def expected_num_gpus(
    tp: np.ndarray | float, ep: np.ndarray | float, dp: np.ndarray | float, pp: np.ndarray | float
) -> np.ndarray | float:
    """GPUs a parallel layout occupies: ``tp * pp * dp``, or ``ep`` when experts span more.

    Expert parallelism reuses the GPUs of the other degrees (as in vLLM, where the experts of
    each MoE layer are sharded over the ``tp * dp`` GPUs); the reference measurements record
    an expert-parallel run either as ``ep = tp * dp`` or as ``tp = dp = 1, ep = num_gpus``.
    In both cases the layout spans ``max(tp * pp * dp, ep)`` GPUs and the experts are sharded
    over all of them (``ep = num_gpus``).
    """
    return np.maximum(tp * pp * dp, ep)


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
