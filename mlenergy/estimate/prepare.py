"""Resolve, check and featurise one configuration: the path every single estimate takes.

Resolves the model (:mod:`~mlenergy.estimate.configs`) and the GPU (catalog or spec file),
checks the input (naming the bad field) and whether the configuration fits in memory (the
rule is in :mod:`~mlenergy.estimate.memory`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from mlenergy.errors import UserError
from mlenergy.estimate.catalog import GpuSpec, resolve_gpu
from mlenergy.estimate.checks import check_workload
from mlenergy.estimate.configs import ResolvedModel, resolve_model_config
from mlenergy.estimate.features import feature_row
from mlenergy.estimate.memory import (
    fit_verdict,
    memory_bytes,
    memory_row,
    offline_kv_limit,
    usable_bytes,
)
from mlenergy.estimate.offline_scheduler import (
    OfflineScheduler,
    default_cap_note,
    offline_scheduler,
)
from mlenergy.estimate.profile import ModelProfile, build_profile, normalise_precision
from mlenergy.estimate.serving import ServingSetup
from mlenergy.models.architecture import ArchitectureSpec


def check_memory(
    spec: ArchitectureSpec,
    prof: ModelProfile,
    gpu: GpuSpec,
    w: ServingSetup,
) -> tuple[dict[str, float], str]:
    """Apply the engine's fit rule (:mod:`mlenergy.estimate.memory`) to one configuration.

    Args:
        spec: Architecture.
        prof: Its profile at the weight precision.
        gpu: The GPU.
        w: The workload (``max_num_seqs`` sizes the sampler workspace, default the batch;
            ``input_tokens_given`` decides error or warning for the KV cache).

    Returns:
        Per-GPU memory in GB (``weights``, ``workspace``, ``kv_cache``, ``total``,
        ``usable``) and a warning (empty if none).

    Raises:
        UserError: Weights and workspace do not fit, or (prompt length given) the KV cache of
            ``batch_size`` sequences does not fit; the message carries the arithmetic.
    """
    f = {**feature_row(prof, gpu, w), **memory_row(spec, prof)}
    f["seqs"] = w.batch_size if w.max_num_seqs is None else w.max_num_seqs
    weights, workspace, kv, per_seq = (float(x) for x in memory_bytes(f))
    error, fix, warning = fit_verdict(
        weights=weights,
        workspace=workspace,
        kv=kv,
        per_seq=per_seq,
        batch=w.batch_size,
        dp=w.data_parallel,
        ctx=w.input_tokens + 0.5 * w.output_tokens,
        memory_gb=gpu.memory_gb,
        gpu_name=gpu.name,
        input_given=w.input_tokens_given,
    )
    if error:
        raise UserError(error, fix)
    gb = {
        "weights": weights / 1e9,
        "workspace": workspace / 1e9,
        "kv_cache": kv / 1e9,
        "total": (weights + workspace + kv) / 1e9,
        "usable": float(usable_bytes(gpu.memory_gb)) / 1e9,
    }
    return gb, warning


def weight_precision(fp8_id: bool, precision: str | None, stored: str | None = None) -> str:
    """Weight precision of a row: ``precision``, else what the checkpoint stores.

    Empty (or ``auto``) ``precision``: fp8 for a ``-FP8`` id or a checkpoint whose
    ``quantization_config`` says ``quant_method: fp8`` (DeepSeek-V3/R1 ship fp8 weights, and
    vLLM serves them so) or ``fbgemm_fp8`` (Meta's fp8 checkpoints),
    else bfloat16 (gpt-oss style ``mxfp4`` checkpoints are handled by the profile).
    A ``-FP8`` id means fp8 weights: its precision must be empty or ``fp8``.

    Args:
        fp8_id: The model id ends in ``-FP8``.
        precision: The requested precision (may be empty).
        stored: The checkpoint's ``quant_method`` (None if unquantised).

    Raises:
        UserError: A ``-FP8`` id with another precision (conflicting precision).
    """
    p = (precision or "").strip()
    if p.lower() == "auto":  # vLLM's --dtype auto: what the checkpoint stores
        p = ""
    if fp8_id:
        if p and normalise_precision(p) != "fp8":
            raise UserError(
                f"precision '{p}' conflicts with the model's -FP8 weights",
                "Omit --precision or give fp8 for a -FP8 model (or drop the -FP8 suffix)",
            )
        return "fp8"
    if not p and stored in ("fp8", "fbgemm_fp8"):
        return "fp8"
    return normalise_precision(p or None)


@dataclass(frozen=True)
class Prepared:
    """One resolved, validated, featurised configuration.

    Attributes:
        spec: Architecture.
        prof: Profile at the weight precision.
        gpu: GPU datasheet.
        features: Feature row of :data:`~mlenergy.estimate.physics.FEATURES`.
        memory_gb: Per-GPU memory in GB (empty when the fit was not checked).
        warnings: Caveats of the estimate (variant config used, KV cache at a task-default
            prompt length that may not fit).
    """

    spec: ArchitectureSpec
    prof: ModelProfile
    gpu: GpuSpec
    features: dict[str, float]
    memory_gb: dict[str, float]
    warnings: tuple[str, ...]


def _resolve_checked(
    model: str,
    gpu: str | GpuSpec,
    workload: ServingSetup,
    precision: str | None,
    configs_dir: str | Path | None,
) -> tuple[ResolvedModel, ModelProfile, GpuSpec]:
    """Resolve the model and GPU, check the workload and profile the weights.

    Raises:
        UserError: Any invalid input, naming the field.
    """
    resolved = resolve_model_config(model, configs_dir)
    spec = resolved.spec
    prec = weight_precision(resolved.fp8, precision, spec.quant_method)
    gpu_spec = resolve_gpu(gpu)
    check_workload(workload, spec, gpu_spec)
    return resolved, _profile(spec, prec), gpu_spec


def prepare_config(
    model: str,
    gpu: str | GpuSpec,
    workload: ServingSetup,
    precision: str | None = None,
    configs_dir: str | Path | None = None,
    check_fit: bool = True,
) -> Prepared:
    """Resolve, validate, check the memory fit of and featurise one configuration.

    Raises:
        UserError: Any invalid input, naming the field, or a configuration that does not fit.
    """
    resolved, prof, gpu_spec = _resolve_checked(model, gpu, workload, precision, configs_dir)
    spec = resolved.spec
    warnings = [resolved.note] if resolved.note else []
    memory: dict[str, float] = {}
    if check_fit:
        memory, warning = check_memory(spec, prof, gpu_spec, workload)
        warnings += [warning] if warning else []
    feat = feature_row(prof, gpu_spec, workload)
    return Prepared(spec, prof, gpu_spec, feat, memory, tuple(warnings))


def offline_setup(
    model: str,
    gpu: str | GpuSpec,
    workload: ServingSetup,
    precision: str | None = None,
    configs_dir: str | Path | None = None,
    equal_lengths: bool = True,
) -> tuple[ServingSetup, list[str], OfflineScheduler]:
    """An offline job's setup: no more sequences together than the engine and its memory take.

    With no ``max_num_seqs`` given, vLLM's offline scheduler takes as many sequences at a
    time as its default on the GPU allows (:mod:`~mlenergy.estimate.offline_scheduler`), and
    the rest queue. The engine also admits a waiting request only when its KV cache fits
    (vLLM's scheduler), so a job of more requests than fit at once runs as many as fit and
    queues the rest (as beyond ``max_num_seqs``: :mod:`~mlenergy.estimate.offline`). With
    ``equal_lengths`` (no generation cap above the mean) a batch's sequences grow together to
    ``I + O`` tokens, which must fit (:func:`~mlenergy.estimate.memory.offline_kv_limit`).

    Returns:
        The setup (its ``batch_size`` the sequences decoding together), notes on what
        limited it (none when every request runs at once, or when not even one fits: the
        memory check of :func:`prepare_config` then reports why), and the scheduler limits.

    Raises:
        UserError: Invalid input (as :func:`prepare_config`).
    """
    resolved, prof, gpu_spec = _resolve_checked(model, gpu, workload, precision, configs_dir)
    spec = resolved.spec
    scheduler = offline_scheduler(gpu_spec, workload.legacy_engine)
    notes = []
    if workload.max_num_seqs is None:
        cap = scheduler.max_num_seqs * workload.data_parallel
        if workload.batch_size > cap:
            replicas = workload.data_parallel
            notes.append(default_cap_note(workload.batch_size, cap, gpu_spec.name, replicas))
            workload = replace(workload, batch_size=cap)
    f = {**feature_row(prof, gpu_spec, workload), **memory_row(spec, prof)}
    f["seqs"] = workload.batch_size if workload.max_num_seqs is None else workload.max_num_seqs
    arrays = {k: np.atleast_1d(np.asarray(v, dtype=float)) for k, v in f.items()}
    one = np.array([True])
    note = offline_kv_limit(arrays, np.array([gpu_spec.memory_gb]), one, one & equal_lengths)[0]
    notes += [note] if note else []
    return replace(workload, batch_size=float(arrays["batch"][0])), notes, scheduler


def prepare(
    model: str,
    gpu: str | GpuSpec,
    workload: ServingSetup,
    precision: str | None = None,
    configs_dir: str | Path | None = None,
    check_fit: bool = True,
) -> tuple[ArchitectureSpec, ModelProfile, GpuSpec, dict[str, float]]:
    """:func:`prepare_config` as a tuple ``(spec, profile, gpu, features)``.

    Raises:
        UserError: Any invalid input, naming the field, or a configuration that does not fit.
    """
    p = prepare_config(model, gpu, workload, precision, configs_dir, check_fit)
    return p.spec, p.prof, p.gpu, p.features


_PROFILE_CACHE: dict[tuple[ArchitectureSpec, str], ModelProfile] = {}


def _profile(spec: ArchitectureSpec, precision: str) -> ModelProfile:
    key = (spec, precision)
    prof = _PROFILE_CACHE.get(key)
    if prof is None:
        prof = build_profile(spec, precision)
        _PROFILE_CACHE[key] = prof
    return prof
