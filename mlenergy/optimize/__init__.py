"""Spend fewer joules: pipeline clocks, power limits and site power caps.

Pipeline frequency plans on lowtime (:func:`plan_pipeline`), the power limit Zeus's own selectors
choose, and the most tokens per second under a site power cap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mlenergy.optimize.pipeline import PipelineResult, plan_pipeline, write_pipeline_outputs
    from mlenergy.optimize.profile import (
        ClockOption,
        PipelineProfile,
        read_profile_csv,
        write_profile_csv,
    )

# Imported on first use: the planner pulls in lowtime and scikit-learn, which the light
# commands under ``mlenergy optimize`` (power-limit, power-cap) never need.
_LAZY = {
    "PipelineResult": "pipeline",
    "plan_pipeline": "pipeline",
    "write_pipeline_outputs": "pipeline",
    "ClockOption": "profile",
    "PipelineProfile": "profile",
    "read_profile_csv": "profile",
    "write_profile_csv": "profile",
}

__all__ = [
    "ClockOption",
    "PipelineProfile",
    "PipelineResult",
    "plan_pipeline",
    "read_profile_csv",
    "write_pipeline_outputs",
    "write_profile_csv",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
