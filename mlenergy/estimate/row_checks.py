"""Input checks of a table of requests, vectorised: one error per bad row, in its place.

Each rule is written once, here, over arrays; the message of a row that breaks it is
formatted only for that row. A row keeps its first error (the order of the checks below).
The rules themselves are stated in :mod:`~mlenergy.estimate.checks` (layout, clock and power,
mode) and the estimator's README.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mlenergy.estimate.checks import (
    BATCH_CAP_TOLERANCE,
    check_layout,
    clock_power_error,
    layout_mismatch,
)

Flag = Callable[[np.ndarray, "str | np.ndarray"], None]


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
        errors.flag_each(
            arr <= 0, lambda i, name=name, arr=arr: f"{name} must be > 0, got {arr[i]:g}"
        )
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
            errors.flag_each(
                bad,
                lambda i, name=name, arr=arr: f"{name} must be a whole number >= 1, got {arr[i]:g}",
            )
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
        layout_mismatch(n, tp, ep, dp, pp),
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
