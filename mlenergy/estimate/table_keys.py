"""Each distinct (model, GPU, precision) of a table of requests, resolved once.

Resolution (:func:`~mlenergy.estimate.configs.resolve_model_config`, the GPU catalog, the
weight precision) and the per-model features are the same for every row of a key, so the one
path (:mod:`~mlenergy.estimate.table`) works them out once per key and per process.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mlenergy.errors import UserError
from mlenergy.estimate.checks import RowErrors
from mlenergy.estimate.configs import resolve_model_config
from mlenergy.estimate.features import FEATURES, feature_row
from mlenergy.estimate.memory import MEMORY_KEYS, memory_row
from mlenergy.estimate.profile import ModelProfile, build_profile, weight_precision
from mlenergy.estimate.requests import EstimateRequests
from mlenergy.estimate.serving import ServingSetup
from mlenergy.models.architecture import ArchitectureSpec
from mlenergy.reference.gpus import GpuSpec, resolve_gpu

_UNIT_SETUP = ServingSetup(batch_size=1.0, input_tokens=1.0, output_tokens=1.0)
"""A placeholder workload: the per-model features do not depend on it."""


@dataclass(frozen=True)
class ModelOnGpu:
    """One distinct (model, GPU, precision) of a table, resolved once.

    Attributes:
        spec: Architecture.
        prof: Profile at the weight precision.
        gpu: GPU datasheet.
        features: Per-model features in the order of :data:`KEY_FEATURES` (the
            workload's are placeholders).
        note: The resolution's caveat (a variant's config used, an fp8 format assumed).
    """

    spec: ArchitectureSpec
    prof: ModelProfile
    gpu: GpuSpec
    features: np.ndarray
    note: str


KEY_FEATURES = tuple(dict.fromkeys((*FEATURES, *MEMORY_KEYS)))
"""Names of :attr:`ModelOnGpu.features`: the physics' features and the memory rule's."""
_RESOLVED: dict[tuple, ModelOnGpu] = {}
"""Resolved (model, GPU, precision, configs folder), kept for the process (bounded)."""
_RESOLVED_MAX = 4096


_PROFILES: dict[tuple[ArchitectureSpec, str], ModelProfile] = {}


def resolve_key(model: str, gpu: str | GpuSpec, precision: str, configs_dir) -> ModelOnGpu:
    """Resolve one (model, GPU, precision) (:func:`resolve_model_config`, the catalog).

    Each is resolved once per process (configs are read once too: ``configs._load_config``).

    Raises:
        UserError: No config, an unknown GPU or a precision that conflicts with the id.
    """
    key = (model, gpu, precision, str(configs_dir))
    try:
        return _RESOLVED[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable GPU spec: resolve it every time
        return resolve_uncached(model, gpu, precision, configs_dir)
    found = resolve_uncached(model, gpu, precision, configs_dir)
    if len(_RESOLVED) >= _RESOLVED_MAX:
        _RESOLVED.clear()
    _RESOLVED[key] = found
    return found


def resolve_uncached(model: str, gpu: str | GpuSpec, precision: str, configs_dir) -> ModelOnGpu:
    """:func:`resolve_key` without the cache."""
    resolved = resolve_model_config(model, configs_dir)
    spec = resolved.spec
    prec = weight_precision(resolved.fp8, precision, spec.quant_method)
    if isinstance(gpu, str) and not gpu.strip():
        raise UserError("gpu is empty", "Give a catalog GPU name or a spec file")
    gpu_spec = resolve_gpu(gpu)
    prof = _PROFILES.get((spec, prec))
    if prof is None:
        prof = _PROFILES.setdefault((spec, prec), build_profile(spec, prec))
    row = feature_row(prof, gpu_spec, _UNIT_SETUP)
    row.update(memory_row(spec, prof))
    vector = np.array([row[name] for name in KEY_FEATURES], dtype=float)
    vector.setflags(write=False)  # shared by every row and table of this key
    return ModelOnGpu(spec, prof, gpu_spec, vector, resolved.note)


def factorize(values: np.ndarray) -> tuple[np.ndarray, list]:
    """Codes and distinct values of a column (no pandas call for a single row)."""
    if len(values) == 1:
        return np.zeros(1, dtype=np.int64), [values[0]]
    codes, uniques = pd.factorize(values)
    return codes, list(uniques)


def resolve_keys(
    req: EstimateRequests, configs_dir: str | Path | None, errors: RowErrors
) -> tuple[np.ndarray, list[ModelOnGpu | None]]:
    """Each row's index into the distinct (model, GPU, precision), each resolved once."""
    parts = [factorize(col) for col in (req.model, req.gpu, req.precision)]
    combined = (parts[0][0] * len(parts[1][1]) + parts[1][0]) * len(parts[2][1]) + parts[2][0]
    if len(combined) == 1:
        first, codes = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    else:
        _, first, codes = np.unique(combined, return_index=True, return_inverse=True)
    keys: list[ModelOnGpu | None] = []
    key_err: list[str] = []
    for i in first:
        try:
            keys.append(resolve_key(req.model[i], req.gpu[i], req.precision[i], configs_dir))
            key_err.append("")
        except UserError as exc:
            keys.append(None)
            key_err.append(exc.message)
    messages = np.array(key_err, dtype=object)[codes]
    errors.flag(messages != "", messages)
    return codes, keys


def per_key(keys: list[ModelOnGpu | None], codes: np.ndarray, value, default) -> np.ndarray:
    """``value(key)`` of each row's key (``default`` for an unresolved one)."""
    return np.array([default if k is None else value(k) for k in keys])[codes]


def key_numbers(
    keys: list[ModelOnGpu | None], codes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's attention heads, routed experts (0: dense) and GPU memory (GiB)."""
    table = np.array(
        [
            (1.0, 0.0, math.inf)
            if k is None
            else (k.spec.num_heads, k.spec.num_experts or 0, k.gpu.memory_gb)
            for k in keys
        ],
        dtype=float,
    )[codes]
    return table[:, 0], table[:, 1], table[:, 2]


def key_features(keys: list[ModelOnGpu | None], codes: np.ndarray) -> dict[str, np.ndarray]:
    """The per-model feature columns of every row (an unresolved row takes a resolved one's)."""
    template = next((k.features for k in keys if k is not None), None)
    if template is None:
        return {name: np.ones(len(codes)) for name in KEY_FEATURES}
    if len(codes) == 1:  # one row: slices of its key's vector (read-only, never written)
        return {name: template[j : j + 1] for j, name in enumerate(KEY_FEATURES)}
    if len(keys) == 1:
        table = np.broadcast_to(template, (len(codes), len(template)))
    else:
        table = np.stack([template if k is None else k.features for k in keys])[codes]
    table = np.asfortranarray(table)  # each feature a contiguous column
    return {name: table[:, j] for j, name in enumerate(KEY_FEATURES)}
