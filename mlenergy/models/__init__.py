"""Models to benchmark: presets, hub ids, local folders and configs; their record description.

``load_model`` returns a :class:`LoadedModel` (the module, its config, tokenizer and
:class:`~mlenergy.records.ModelInfo`). A ``config.json`` is read by
:mod:`mlenergy.models.config_file` after the one strict check of its counts
(:mod:`mlenergy.models.config_values`, which the estimator applies too). Architecture and
parameter counts from a config alone live in :mod:`mlenergy.models.architecture` and
:mod:`mlenergy.models.parameters` (pure Python, no torch).
"""

from __future__ import annotations

from mlenergy.models.config_file import config_from_dict, read_config_file
from mlenergy.models.info import (
    config_dict,
    config_fingerprint,
    count_model_parameters,
    model_info_from_config,
    moe_shape,
    parameter_counts,
)
from mlenergy.models.loading import (
    LoadedModel,
    ModelSource,
    ResolvedSource,
    build_random,
    canonical_dtype,
    check_buildable,
    check_device,
    load_model,
    resolve_source,
)
from mlenergy.models.presets import PRESET_PREFIX, PRESETS, Preset, preset_config

__all__ = [
    "PRESETS",
    "PRESET_PREFIX",
    "LoadedModel",
    "ModelSource",
    "Preset",
    "ResolvedSource",
    "build_random",
    "canonical_dtype",
    "check_buildable",
    "check_device",
    "config_dict",
    "config_fingerprint",
    "config_from_dict",
    "count_model_parameters",
    "load_model",
    "model_info_from_config",
    "moe_shape",
    "parameter_counts",
    "preset_config",
    "read_config_file",
    "resolve_source",
]
