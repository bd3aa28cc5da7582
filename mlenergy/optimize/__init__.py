"""Spend fewer joules: pipeline clocks, power limits and site power caps.

Pipeline frequency plans on lowtime (:func:`plan_pipeline`), the power limit Zeus's own selectors
choose, and the most tokens per second under a site power cap.
"""

from __future__ import annotations

from mlenergy.optimize.pipeline import PipelineResult, plan_pipeline, write_pipeline_outputs
from mlenergy.optimize.profile import (
    ClockOption,
    PipelineProfile,
    read_profile_csv,
    write_profile_csv,
)

__all__ = [
    "ClockOption",
    "PipelineProfile",
    "PipelineResult",
    "plan_pipeline",
    "read_profile_csv",
    "write_pipeline_outputs",
    "write_profile_csv",
]
