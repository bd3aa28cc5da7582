"""Measured serving runs as one tidy frame: one row per measured serving configuration.

Both sources of measurements are run records, the reference tables
(:func:`~mlenergy.reference.runs.read_reference`) and a store's own runs
(``RunStore.runs()``); :func:`measurements_from_records` turns either into the columns that
calibration, cross-validation and the planners read (units in the names). A run's figures are
its headline phase's (:func:`~mlenergy.records.metrics.headline_phase`: the whole request,
else decode), as in every view.

It describes each model with the estimator's config rule and each GPU with the catalog's one
matcher, so it sits above the estimator (see ``tests/test_layering.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from mlenergy.errors import UserError
from mlenergy.estimate.configs import resolve_model, resolve_model_config
from mlenergy.estimate.engines import CURRENT_ENGINE, LEGACY_ENGINE
from mlenergy.estimate.task_defaults import MULTIMODAL_TASKS
from mlenergy.records import PhaseResult, RunRecord
from mlenergy.records.metrics import headline_phase, mean_output_tokens
from mlenergy.reference import shipped_files
from mlenergy.reference.gpus import find_gpu
from mlenergy.reference.runs import (
    V2_ENGINE,
    V2_SUBMITTER,
    V3_SUBMITTER,
    leaderboard_folder,
    read_reference,
)

SOURCE_OF_SUBMITTER = {V3_SUBMITTER: "v3", V2_SUBMITTER: "v2"}
"""The ``source`` column: ``v3``/``v2`` for the reference tables, ``store`` for the rest."""


def config_id_for(model_id: str, configs_dir: str | Path | None = None) -> str:
    """The model id whose config describes ``model_id`` (``-FP8`` kept; variants mapped).

    Uses the estimator's one resolution rule
    (:func:`~mlenergy.estimate.configs.resolve_model_config`): e.g. ``...-Thinking-2507``
    maps to the ``...-Instruct-2507`` config, ``...-v2-VL-BF16`` to ``...-v2``. An id without
    a config (or no configs folder) is returned unchanged.

    Args:
        model_id: A model id as in the reference tables.
        configs_dir: Folder of ``<org>__<name>.json`` configs (default: the reference's).
    """
    try:
        resolved = resolve_model_config(model_id, configs_dir)
    except UserError:
        return model_id
    if resolved.path.suffix != ".json" or "__" not in resolved.path.stem:
        return model_id  # a path, not an id resolved under the configs folder
    out = resolved.path.stem.replace("__", "/", 1)
    return out + "-FP8" if resolved.fp8 else out


def model_group(model_id: str) -> str:
    """Grouping key for cross-validation: variants of one base model share a group.

    ``-FP8``, ``-Thinking``/``-Instruct`` and ``Meta-`` prefixes are folded, so that no
    architecture appears in both the fit and the test folds.
    """
    name = model_id.split("/")[-1]
    name = re.sub(r"-FP8$", "", name)
    name = re.sub(r"-(Instruct|Thinking)(-2507)?$", "", name)
    name = re.sub(r"^Meta-", "", name)
    name = re.sub(r"-VL-BF16$", "", name)
    return name.lower()


def architecture_family(config_id: str, is_moe: bool, configs_dir: str | Path | None) -> str:
    """``dense``, ``moe`` or ``hybrid`` (Mamba-Transformer) of a model, from its config.

    Args:
        config_id: Model id (or config path) resolved by the estimator's rule.
        is_moe: The record's MoE flag, used when no config resolves.
        configs_dir: Folder of model configs.
    """
    try:
        spec, _ = resolve_model(config_id, configs_dir)
    except UserError:
        return "moe" if is_moe else "dense"
    return spec.kind


def _serving_phase(rec: RunRecord) -> PhaseResult | None:
    """The headline phase when it has throughput and power above zero."""
    phase = headline_phase(rec)
    if phase is None:
        return None
    thr, power = phase.throughput_tokens_per_s, phase.avg_power_w
    return phase if thr and power and thr > 0 and power > 0 else None


def measurement_row(rec: RunRecord, configs_dir: str | Path | None = None) -> dict | None:
    """One measured GPU serving run in the calibration's columns, or ``None`` if not one.

    Only ``measured:`` inference runs on a catalog GPU whose headline phase (the request,
    else decode) has throughput and power qualify: serving measurements (``mlenergy bench
    --endpoint``, the reference, imported harness runs), not static batches of ``generate``
    (``workload.method == "static-batch"``), which the serving model does not describe. A
    prompt length tagged ``unknown`` (the reference tables) is NaN, so the task's default
    applies.
    """
    w, hw = rec.workload, rec.hardware
    if not rec.energy_source.startswith("measured:") or w.kind != "inference":
        return None
    if w.method == "static-batch":
        return None
    spec = find_gpu(hw.accelerator_model)
    if spec is None:
        return None
    gpu = spec.name
    phase = _serving_phase(rec)
    if phase is None or phase.energy_per_token_j is None:
        return None
    throughput, power = phase.throughput_tokens_per_s, phase.avg_power_w
    if throughput is None or power is None:  # _serving_phase keeps phases with both
        return None
    submitter = rec.submission.submitter if rec.submission else ""
    config_id = config_id_for(rec.model.model_id, configs_dir)
    unknown_prompt = rec.tags.get("input_tokens") == "unknown"
    return {
        "run_id": rec.run_id,
        "source": SOURCE_OF_SUBMITTER.get(submitter, "store"),
        "model_id": rec.model.model_id,
        "config_id": config_id,
        "gpu": gpu,
        "num_gpus": int(hw.accelerator_count or 1),
        "tensor_parallel": w.tensor_parallel,
        "expert_parallel": w.expert_parallel,
        "data_parallel": w.data_parallel,
        "pipeline_parallel": w.pipeline_parallel,
        "precision": rec.model.dtype or "bfloat16",
        "task": w.task or "",
        "batch_size": float(w.avg_batch_size or w.batch_size),
        "max_num_seqs": w.max_num_seqs,
        "input_tokens": float("nan") if unknown_prompt else float(w.input_tokens),
        "output_tokens": mean_output_tokens(rec),
        "energy_per_token_j": float(phase.energy_per_token_j),
        "throughput_tokens_per_s": float(throughput),
        "avg_power_w": float(power),
        "itl_s": phase.itl_p50_s,
        "kind": architecture_family(config_id, rec.model.is_moe, configs_dir),
        "legacy": rec.software.engine == V2_ENGINE,
        "engine": LEGACY_ENGINE if rec.software.engine == V2_ENGINE else CURRENT_ENGINE,
        "model_group": model_group(config_id),
    }


def measurements_from_records(
    records: Iterable[RunRecord], configs_dir: str | Path | None = None
) -> pd.DataFrame:
    """The measured GPU serving runs among ``records`` (see :func:`measurement_row`).

    Args:
        records: Run records (the reference's, a store's, or both).
        configs_dir: Folder of model configs (default: the reference's).

    Returns:
        One row per qualifying run; an empty frame when there are none.
    """
    rows = [row for rec in records if (row := measurement_row(rec, configs_dir)) is not None]
    return pd.DataFrame(rows)


def own_measurements(
    records: Iterable[RunRecord], configs_dir: str | Path | None = None
) -> pd.DataFrame:
    """:func:`measurements_from_records` without the reference's own runs (source ``store``).

    A store into which an older mlenergy copied the reference (``leaderboard
    import-reference``, now a no-op: the reference is read where it ships) holds the reference
    rows too; added to the reference they would count twice.
    """
    df = measurements_from_records(records, configs_dir)
    return df[df["source"] == "store"].reset_index(drop=True) if len(df) else df


def load_reference(
    root: str | Path | None = None, include_v2: bool = True, text_only: bool = False
) -> pd.DataFrame:
    """The reference serving measurements as one tidy frame (see the module docstring).

    Args:
        root: The reference folder (or its ``mlenergy-leaderboard`` subfolder); default
            :func:`~mlenergy.reference.reference_dir`.
        include_v2: Also load the 2024 v2 tables (older engine, flagged ``legacy``).
        text_only: Drop multimodal tasks (``image-chat``, ``video-chat``).

    Raises:
        UserError: The folder or its tables are missing.
    """
    folder = leaderboard_folder(root)
    key = (str(folder.resolve()), include_v2, text_only, _fingerprint(folder.parent))
    cached = _LOADED.get(key)
    if cached is None:
        configs = folder.parent / "model-configs"
        cached = measurements_from_records(read_reference(root, include_v2), configs)
        if text_only:
            cached = cached[~cached["task"].isin(MULTIMODAL_TASKS)].reset_index(drop=True)
        if len(_LOADED) >= _KEEP:
            _LOADED.pop(next(iter(_LOADED)))  # the oldest
        _LOADED[key] = cached
    return cached.copy()


_KEEP = 4
"""Frames :func:`load_reference` keeps (the option combinations in use)."""
_LOADED: dict[tuple[object, ...], pd.DataFrame] = {}
"""The last frames :func:`load_reference` read (about 1.5 s each), keyed by folder, options and
the folder's files (name, size, modification time), so a changed file is read again."""


def _fingerprint(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """Every data file of the reference ``folder``, with its size and modification time (ns).

    The files of :func:`shipped_files`: code and bytecode caches do not change the data.
    """
    out = []
    for name in shipped_files(folder):
        st = (folder / name).stat()
        out.append((str(name), st.st_size, st.st_mtime_ns))
    return tuple(out)
