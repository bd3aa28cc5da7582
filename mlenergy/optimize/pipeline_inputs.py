"""What a pipeline frequency plan starts from: a profile and the power of a blocked GPU.

The profile is a measured CSV, a shipped Perseus profile (``perseus:<name>``) or the
estimator's (:func:`~mlenergy.optimize.estimated_profile.estimated_pipeline_profile`); the
blocking power is given, or the Perseus paper's A40 figure for a shipped profile, or the
estimator's for the GPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mlenergy.errors import UserError
from mlenergy.optimize.estimated_profile import (
    estimated_blocking_power_w,
    estimated_pipeline_profile,
)
from mlenergy.optimize.profile import PipelineProfile, read_profile_csv
from mlenergy.optimize.reference_profiles import (
    PERSEUS_A40_BLOCKING_W,
    is_perseus_name,
    load_perseus_profile,
)


def pipeline_inputs(
    profile: str | None, p_blocking_w: float | None, estimate: dict[str, Any] | None
) -> tuple[PipelineProfile, float]:
    """The profile of a pipeline plan and the power of a GPU blocked on communication (W).

    Args:
        profile: A profile CSV (``stage,instruction,frequency_mhz,time_s,energy_j``) or a
            shipped profile's name; ``None`` when the estimator makes it.
        p_blocking_w: Power of a GPU blocked on communication or idle, W (``None``: the
            shipped profile's figure, or the estimator's for the GPU).
        estimate: The keywords of
            :func:`~mlenergy.optimize.estimated_profile.estimated_pipeline_profile` (model,
            GPU, stages...) when the estimator makes the profile, else ``None``.

    Raises:
        UserError: Both or neither of a profile and an estimate; an estimate without its model
            or GPU; a profile CSV without a blocking power; a bad profile.
    """
    if (estimate is None) == (profile is None):
        raise UserError("give exactly one of --profile and --from-estimate", "Pass one of them")
    if profile is not None:
        shipped = is_perseus_name(profile)
        prof = load_perseus_profile(profile) if shipped else read_profile_csv(Path(profile))
        if p_blocking_w is None and shipped:
            p_blocking_w = PERSEUS_A40_BLOCKING_W
        if p_blocking_w is None:
            raise UserError("--p-blocking is required with --profile", "Pass the power in W")
        return prof, p_blocking_w
    assert estimate is not None
    missing = [k for k in ("model", "gpu") if not estimate.get(k)]
    if missing:
        raise UserError(
            f"--from-estimate needs --{' and --'.join(missing)}", "Pass the model and GPU"
        )
    prof = estimated_pipeline_profile(**estimate)
    if p_blocking_w is None:
        p_blocking_w = estimated_blocking_power_w(estimate["gpu"])
    return prof, p_blocking_w
