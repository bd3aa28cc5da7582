"""Typed, frozen records that travel through mlenergy: runs, quality results, submissions.

This package imports nothing else of mlenergy. Units are in field names (joules, seconds,
watts, tokens) and every energy figure carries an ``energy_source`` label.
"""

from __future__ import annotations

from mlenergy.records.base import (
    ENERGY_SOURCE_PATTERN,
    SCHEMA_VERSION,
    EnergySource,
    FrozenModel,
    Interval,
    RepeatStats,
    canonical_json,
    sha256_hex,
)
from mlenergy.records.generation import GenerationInfo
from mlenergy.records.host_bound import HOST_BOUND_MARK, HostBound
from mlenergy.records.interval import IntervalBasis, interval_label
from mlenergy.records.provenance import Hardware, ModelInfo, Software
from mlenergy.records.quality import QualityResult
from mlenergy.records.run import (
    IdleBaseline,
    MeasuredScope,
    Phase,
    PhaseResult,
    PowerTimeline,
    RunRecord,
    SubmissionInfo,
    TrainingCheckpoint,
    Workload,
    interval_basis,
    new_run_id,
    utc_now,
)
from mlenergy.records.schema import export_schemas
from mlenergy.records.serving import EngineMetrics, Percentiles, ServingStats
from mlenergy.records.submission import Submission

__all__ = [
    "ENERGY_SOURCE_PATTERN",
    "HOST_BOUND_MARK",
    "SCHEMA_VERSION",
    "EnergySource",
    "EngineMetrics",
    "FrozenModel",
    "GenerationInfo",
    "Hardware",
    "HostBound",
    "IdleBaseline",
    "Interval",
    "IntervalBasis",
    "MeasuredScope",
    "ModelInfo",
    "Percentiles",
    "Phase",
    "PhaseResult",
    "PowerTimeline",
    "QualityResult",
    "RepeatStats",
    "RunRecord",
    "ServingStats",
    "Software",
    "Submission",
    "SubmissionInfo",
    "TrainingCheckpoint",
    "Workload",
    "canonical_json",
    "export_schemas",
    "interval_basis",
    "interval_label",
    "new_run_id",
    "sha256_hex",
    "utc_now",
]
