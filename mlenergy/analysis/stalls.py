"""Measurements the estimator's host-bound rule flags as likely stalled on the host.

The rule (:mod:`mlenergy.estimate.host_bound`, shipped with the coefficients) names the
configurations whose reference runs often sat at 25-45 ms per step with the GPU near idle
(about 300 W of 1000 W on one B200 with long-output or multimodal tasks): their energy per token
measures a host bottleneck of that campaign more than the model. Every view that shows such runs
marks them with :func:`host_bound_flags` and says why with :func:`host_bound_reason`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlenergy.estimate.calibration_report import HostBoundRule
from mlenergy.estimate.coefficients import default_coefficients
from mlenergy.estimate.host_bound import host_bound_mask


def default_rule() -> HostBoundRule | None:
    """The host-bound rule of the shipped coefficients (``None`` when they name none)."""
    return default_coefficients().host_bound_rule


def host_bound_flags(
    frame: pd.DataFrame,
    rule: HostBoundRule | None = None,
    gpu: str = "gpu",
    num_gpus: str = "num_gpus",
    task: str = "task",
) -> np.ndarray:
    """Which rows of ``frame`` the host-bound rule flags (by GPU, GPU count and task only).

    Args:
        frame: One row per measured configuration.
        rule: The rule (default: the shipped coefficients').
        gpu: Column of catalog GPU names (``B200``).
        num_gpus: Column of GPU counts.
        task: Column of task labels.
    """
    rule = default_rule() if rule is None else rule
    if frame.empty:
        return np.zeros(0, dtype=bool)
    return host_bound_mask(
        frame[gpu].to_numpy(), frame[num_gpus].to_numpy(), frame[task].to_numpy(), rule
    )


def host_bound_reason(rule: HostBoundRule | None = None) -> str:
    """Why flagged runs are suspect, in one sentence naming the configurations."""
    rule = default_rule() if rule is None else rule
    if rule is None:
        return "the shipped coefficients name no host-bound configurations"
    return (
        f"runs on {rule.describe()} are flagged by the estimator's host-bound rule "
        "(mlenergy/estimate/host_bound.py): in ML.ENERGY's v3 campaign such runs often sat at "
        "25-45 ms per step with the GPU near idle (about 300 W of a B200's 1000 W) whatever the "
        "batch, a host-side stall, so their energy per token measures the stall more than the "
        "model"
    )
