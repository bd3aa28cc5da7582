"""Workloads to measure: prompt sources and the inference runner (prefill/decode sweep).

The training-step runner lives in :mod:`mlenergy.workloads.training`; the bench workflow that
``mlenergy bench`` and notebooks call (validate, preflight the store, sweep every model) in
:mod:`mlenergy.workloads.bench`.
"""

from __future__ import annotations

from mlenergy.workloads.inference import (
    InferenceSpec,
    is_out_of_memory,
    parse_batch_sizes,
    run_inference_sweep,
)
from mlenergy.workloads.prompts import PromptSet, PromptSource

__all__ = [
    "InferenceSpec",
    "PromptSet",
    "PromptSource",
    "is_out_of_memory",
    "parse_batch_sizes",
    "run_inference_sweep",
]
