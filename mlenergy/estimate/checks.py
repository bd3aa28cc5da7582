"""Input checks of a table of requests, vectorised: one error per bad row, in its place.

Each rule is written once, here, over arrays (values, parallel layout, SM clock and power
limit, mode); the message of a row that breaks it is formatted only for that row, naming the
offending field. A row keeps its first error (the order of the checks in
:func:`~mlenergy.estimate.table.prepare_table`). The rules are also stated in the estimator's
README.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from mlenergy.reference.gpus import GpuSpec

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


def _got(rule: str, values: np.ndarray) -> Callable[[int], str]:
    """The message of row ``i`` breaking ``rule``: the rule and the row's value."""
    return lambda i: f"{rule}, got {values[i]:g}"


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

    The rule is :func:`layout_mismatch`'s.
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


class RowErrors:
    """The error of every row (``""``: none so far); the first error of a row stays."""

    def __init__(self, n: int) -> None:
        self.messages = np.full(n, "", dtype=object)

    def ok(self) -> np.ndarray:
        """Rows without an error."""
        return self.messages == ""

    def flag(self, mask: np.ndarray, message: str | np.ndarray) -> None:
        """Give ``message`` (one for all, or one per row) to the rows of ``mask`` still clean."""
        if not mask.any():
            return
        hit = mask & (self.messages == "")
        if hit.any():
            self.messages[hit] = message if isinstance(message, str) else message[hit]

    def flag_each(self, mask: np.ndarray, message: Callable[[int], str]) -> None:
        """Like :meth:`flag` with a message made for each hit row by ``message(i)``."""
        if not mask.any():
            return
        for i in np.flatnonzero(mask & (self.messages == "")):
            text = message(int(i))
            if text:
                self.messages[i] = text


def check_values(
    errors: RowErrors,
    batch: np.ndarray,
    input_tokens: np.ndarray,
    output_tokens: np.ndarray,
    max_num_seqs: np.ndarray,
    offline: np.ndarray,
) -> None:
    """Lengths and the batch positive; the concurrency cap a whole number the batch respects.

    In serving mode ``batch_size`` may exceed ``max_num_seqs`` by
    :data:`~mlenergy.estimate.checks.BATCH_CAP_TOLERANCE` (rounding); an offline job's
    requests beyond it queue.
    """
    for name, arr in (("batch_size", batch), ("output_tokens", output_tokens)):
        errors.flag(np.isnan(arr), f"{name} is missing")
    for name, arr in (
        ("batch_size", batch),
        ("input_tokens", input_tokens),
        ("output_tokens", output_tokens),
    ):
        errors.flag_each(arr <= 0, _got(f"{name} must be > 0", arr))
    cap = max_num_seqs
    errors.flag_each(
        ~np.isnan(cap) & ((cap < 1) | (cap != np.round(cap))),
        lambda i: f"max_num_seqs must be a whole number >= 1, got {cap[i]:g}",
    )
    errors.flag_each(
        ~offline & ~np.isnan(cap) & (batch > cap * BATCH_CAP_TOLERANCE),
        lambda i: (
            f"batch_size ({batch[i]:g}) exceeds max_num_seqs ({cap[i]:g}), the engine's "
            "concurrency cap. batch_size is the average number of sequences decoding "
            "together; keep it at or below max_num_seqs"
        ),
    )


def check_parallel(
    errors: RowErrors,
    degrees: dict[str, np.ndarray],
    heads: np.ndarray,
    experts: np.ndarray,
) -> None:
    """The parallel layout: whole degrees, ``num_gpus`` as the layout spans, TP over heads.

    Args:
        errors: The rows' errors (filled in place).
        degrees: ``num_gpus``, ``tensor_parallel``, ``expert_parallel``, ``data_parallel`` and
            ``pipeline_parallel`` per row.
        heads: Attention heads of each row's model.
        experts: Routed experts of each row's model (0: dense).
    """
    stacked = np.stack(list(degrees.values()))
    fractional = (stacked < 1) | (stacked != np.round(stacked))
    if fractional.any():
        for (name, arr), bad in zip(degrees.items(), fractional, strict=True):
            errors.flag_each(bad, _got(f"{name} must be a whole number >= 1", arr))
    n, tp, ep, dp, pp = (
        degrees[k]
        for k in (
            "num_gpus",
            "tensor_parallel",
            "expert_parallel",
            "data_parallel",
            "pipeline_parallel",
        )
    )
    safe_dp = np.where(dp >= 1, dp, 1)
    errors.flag_each(
        np.mod(n, safe_dp) != 0,
        lambda i: f"data_parallel ({dp[i]:g}) does not divide num_gpus ({n[i]:g})",
    )
    errors.flag_each(
        np.asarray(layout_mismatch(n, tp, ep, dp, pp)),
        lambda i: (
            check_layout(n[i], tp[i], ep[i], dp[i], pp[i])
            + ". Omit --num-gpus to derive it from the parallel degrees"
        ),
    )
    safe_tp = np.where(tp >= 1, tp, 1)
    errors.flag_each(
        np.mod(heads, safe_tp) != 0,
        lambda i: (
            f"tensor_parallel ({tp[i]:g}) does not divide num_attention_heads ({heads[i]:g}). "
            "Pick a tensor-parallel degree that divides the number of attention heads"
        ),
    )
    errors.flag_each(
        (ep > 1) & (experts == 0),
        lambda i: f"expert_parallel ({ep[i]:g}) needs an MoE model",
    )
    errors.flag_each(
        (experts > 0) & (ep > experts),
        lambda i: f"expert_parallel ({ep[i]:g}) exceeds num_experts ({experts[i]:g})",
    )


def check_clock_power(
    errors: RowErrors, clock: np.ndarray, limit: np.ndarray, gpus: list, codes: np.ndarray
) -> None:
    """A locked SM clock or a power limit (not both), within the row's GPU's range.

    Args:
        errors: The rows' errors (filled in place).
        clock: SM clock per row (MHz; NaN: none).
        limit: Power limit per GPU per row (W; NaN: none).
        gpus: The distinct GPUs (``None``: unresolved), indexed by ``codes``.
        codes: Each row's index into ``gpus``.
    """

    def message(i: int) -> str:
        spec = gpus[codes[i]]
        if spec is None:
            return ""
        return clock_power_error(
            None if np.isnan(clock[i]) else float(clock[i]),
            None if np.isnan(limit[i]) else float(limit[i]),
            spec,
        )

    errors.flag_each(~(np.isnan(clock) & np.isnan(limit)), message)
