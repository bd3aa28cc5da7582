"""The one estimator path: a table of requests in, a table of estimates out (vectorised).

A single estimate (:func:`~mlenergy.estimate.api.estimate`), a sweep and a batch CSV
(:mod:`~mlenergy.estimate.batch`) all call :func:`estimate_table`, so every rule (input
checks, defaults, engine resolution, memory fit, offline queueing, the prediction interval,
the host-bound rule) is applied once, by the same code, whatever the number of rows. A row
that cannot be estimated gets one error and keeps its place; its figures are NaN.

From a request to the formula: :mod:`~mlenergy.estimate.requests` (the inputs) ->
this module (checks, resolution, features) -> :mod:`~mlenergy.estimate.physics` (serving)
or :mod:`~mlenergy.estimate.offline` (an offline job).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from mlenergy.errors import UserError
from mlenergy.estimate.catalog import GpuSpec, resolve_gpu
from mlenergy.estimate.checks import mode_error
from mlenergy.estimate.coefficients import Coefficients, default_coefficients, interval_class
from mlenergy.estimate.configs import resolve_model_config
from mlenergy.estimate.engines import CURRENT_ENGINE, engine_note, is_legacy, resolve_engine
from mlenergy.estimate.features import feature_row
from mlenergy.estimate.host_bound import host_bound_mask, host_bound_note
from mlenergy.estimate.memory import (
    MEMORY_KEYS,
    fit_verdict,
    memory_bytes,
    memory_row,
    offline_kv_limit,
    usable_bytes,
)
from mlenergy.estimate.offline import predict_modes
from mlenergy.estimate.offline_scheduler import default_cap_note, row_schedulers
from mlenergy.estimate.physics import FEATURES
from mlenergy.estimate.prepare import weight_precision
from mlenergy.estimate.profile import ModelProfile, build_profile
from mlenergy.estimate.requests import EstimateRequests
from mlenergy.estimate.row_checks import RowErrors, check_clock_power, check_parallel, check_values
from mlenergy.estimate.serving import ServingSetup
from mlenergy.estimate.table_rows import EstimateTable
from mlenergy.estimate.task_defaults import is_multimodal, task_input_tokens
from mlenergy.models.architecture import ArchitectureSpec

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


def _resolve(model: str, gpu: str | GpuSpec, precision: str, configs_dir) -> ModelOnGpu:
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
        return _resolve_uncached(model, gpu, precision, configs_dir)
    found = _resolve_uncached(model, gpu, precision, configs_dir)
    if len(_RESOLVED) >= _RESOLVED_MAX:
        _RESOLVED.clear()
    _RESOLVED[key] = found
    return found


def _resolve_uncached(model: str, gpu: str | GpuSpec, precision: str, configs_dir) -> ModelOnGpu:
    """:func:`_resolve` without the cache."""
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


def _factorize(values: np.ndarray) -> tuple[np.ndarray, list]:
    """Codes and distinct values of a column (no pandas call for a single row)."""
    if len(values) == 1:
        return np.zeros(1, dtype=np.int64), [values[0]]
    codes, uniques = pd.factorize(values)
    return codes, list(uniques)


def _resolve_keys(
    req: EstimateRequests, configs_dir: str | Path | None, errors: RowErrors
) -> tuple[np.ndarray, list[ModelOnGpu | None]]:
    """Each row's index into the distinct (model, GPU, precision), each resolved once."""
    parts = [_factorize(col) for col in (req.model, req.gpu, req.precision)]
    combined = (parts[0][0] * len(parts[1][1]) + parts[1][0]) * len(parts[2][1]) + parts[2][0]
    if len(combined) == 1:
        first, codes = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    else:
        _, first, codes = np.unique(combined, return_index=True, return_inverse=True)
    keys: list[ModelOnGpu | None] = []
    key_err: list[str] = []
    for i in first:
        try:
            keys.append(_resolve(req.model[i], req.gpu[i], req.precision[i], configs_dir))
            key_err.append("")
        except UserError as exc:
            keys.append(None)
            key_err.append(exc.message)
    messages = np.array(key_err, dtype=object)[codes]
    errors.flag(messages != "", messages)
    return codes, keys


def _per_key(keys: list[ModelOnGpu | None], codes: np.ndarray, value, default) -> np.ndarray:
    """``value(key)`` of each row's key (``default`` for an unresolved one)."""
    return np.array([default if k is None else value(k) for k in keys])[codes]


def _key_numbers(
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


def _modes(req: EstimateRequests, errors: RowErrors) -> tuple[np.ndarray, np.ndarray]:
    """Which rows are offline jobs and each one's cap (NaN: none); bad ones to ``errors``."""
    modes = np.array([m.lower() or "serving" for m in req.mode], dtype=object)
    cap = req.max_output_tokens
    out_tok = req.output_tokens

    def message(i: int) -> str:
        return mode_error(req.mode[i], None if np.isnan(cap[i]) else float(cap[i]), out_tok[i])

    errors.flag_each((modes != "serving") | ~np.isnan(cap), message)
    return modes == "offline", cap


def _engines(
    req: EstimateRequests, offline: np.ndarray, errors: RowErrors
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's engine profile and its caveat; an unknown engine to ``errors``.

    The engine is the ``engine`` column, else the task's; each distinct (engine, task, mode)
    is resolved once.
    """
    modes = np.where(offline, "offline", "serving").astype(object)
    if len(offline) == 1:
        keys = np.array([f"{req.engine[0]}\x00{req.task[0]}\x00{modes[0]}"], dtype=object)
    else:
        joined = pd.Series(req.engine) + "\x00" + pd.Series(req.task) + "\x00" + modes
        keys = joined.to_numpy(dtype=object)
    codes, uniques = _factorize(keys)
    names, fails, notes = [], [], []
    for key in uniques:
        engine, task, mode = key.split("\x00")
        try:
            name, fail = resolve_engine(engine, task), ""
        except UserError as exc:
            name, fail = CURRENT_ENGINE, exc.message
        names.append(name)
        fails.append(fail)
        notes.append("" if fail else engine_note(engine, task, name, mode))
    fail_rows = np.array(fails, dtype=object)[codes]
    errors.flag(fail_rows != "", fail_rows)
    return np.array(names, dtype=object)[codes], np.array(notes, dtype=object)[codes]


def estimate_table(
    req: EstimateRequests,
    configs_dir: str | Path | None = None,
    coefficients: Coefficients | None = None,
) -> EstimateTable:
    """Estimate every request of the table (serving or offline); bad rows get an error.

    Args:
        req: The requests.
        configs_dir: Folder of ``<org>__<name>.json`` model configs.
        coefficients: Model coefficients (default: shipped).

    Returns:
        One entry per request in every column, in order.
    """
    coef = coefficients or default_coefficients()
    n = len(req)
    errors = RowErrors(n)
    errors.flag(req.bad_cells != "", req.bad_cells)
    codes, keys = _resolve_keys(req, configs_dir, errors)
    offline, max_out = _modes(req, errors)
    engines, engine_notes = _engines(req, offline, errors)

    tp, ep, dp, pp = (
        req.tensor_parallel,
        req.expert_parallel,
        req.data_parallel,
        req.pipeline_parallel,
    )
    ngpu = np.where(np.isnan(req.num_gpus), np.maximum(tp * pp * dp, ep), req.num_gpus)
    jobs, out_tok = req.batch_size, req.output_tokens
    task_codes, task_names = _factorize(req.task)
    task_len = np.array([task_input_tokens(t) for t in task_names], dtype=float)[task_codes]
    in_given = ~np.isnan(req.input_tokens)
    in_tok = np.where(in_given, req.input_tokens, task_len)
    visual = np.array([is_multimodal(t) for t in task_names], dtype=bool)[task_codes]
    cap = req.max_num_seqs
    check_values(errors, jobs, in_tok, out_tok, cap, offline)
    degrees = {
        "num_gpus": ngpu,
        "tensor_parallel": tp,
        "expert_parallel": ep,
        "data_parallel": dp,
        "pipeline_parallel": pp,
    }
    heads, experts, mem_gb = _key_numbers(keys, codes)
    check_parallel(errors, degrees, heads, experts)
    gpus = [None if k is None else k.gpu for k in keys]
    check_clock_power(errors, req.sm_clock_mhz, req.power_limit_w, gpus, codes)

    # An offline job's requests beyond max_num_seqs queue: that many decode together; with
    # none given, as many as vLLM's offline scheduler takes on the row's GPU by default.
    legacy = np.array([is_legacy(e) for e in engines], dtype=bool)
    budget, per_replica, chunked = row_schedulers(gpus, codes, legacy)
    replicas = np.where(dp >= 1, dp, 1.0)
    together = np.where(np.isnan(cap), per_replica * replicas, cap)
    defaulted = offline & np.isnan(cap) & (jobs > together)
    batch = np.where(offline & (together >= 1) & (jobs > together), together, jobs)

    good = errors.ok()
    feat = _features(keys, codes)
    fill = {
        "num_gpus": ngpu,
        "tp": tp,
        "ep": ep,
        "dp": dp,
        "pp": pp,
        "batch": batch,
        "input_tokens": in_tok,
        "visual_tokens": np.where(visual, in_tok, 0.0),
        "output_tokens": out_tok,
    }
    every = bool(good.all())  # then the placeholders of bad rows are not needed
    for name, arr in fill.items():
        feat[name] = arr if every else np.where(good, arr, 1.0)
    feat["clock"] = req.sm_clock_mhz if every else np.where(good, req.sm_clock_mhz, np.nan)
    feat["power_limit"] = req.power_limit_w if every else np.where(good, req.power_limit_w, np.nan)
    feat["legacy"] = legacy.astype(float)
    feat["seqs"] = np.where(good & ~np.isnan(cap), cap, feat["batch"])
    equal = np.isnan(max_out) | (max_out <= out_tok)
    queue_notes = offline_kv_limit(feat, mem_gb, offline & good, equal)
    feat["seqs"] = np.where(good & np.isnan(cap), feat["batch"], feat["seqs"])
    gpu_names = _per_key(keys, codes, lambda k: k.gpu.name, "").astype(object)
    memory, fit_warn = _memory_fit(feat, mem_gb, gpu_names, in_given, errors)

    good = errors.ok()
    pred = predict_modes(
        feat, coef, offline & good, max_out, np.where(good, jobs, 1.0), budget, chunked
    )

    def infeasible(i: int) -> str:
        return (
            f"power_limit {req.power_limit_w[i]:g} W is below the "
            f"{pred['min_clock_power_w'][i]:.0f} W this workload draws per GPU at the lowest SM "
            f"clock {pred['clock_mhz'][i]:.0f} MHz; raise --power-limit to at least "
            f"{math.ceil(pred['min_clock_power_w'][i]):.0f} W or lower the batch size"
        )

    errors.flag_each(pred["power_limit_infeasible"].astype(bool), infeasible)
    good = errors.ok()
    host = host_bound_mask(gpu_names, ngpu, req.task, coef.host_bound_rule)
    lo, hi = _interval(coef, keys, codes, host)

    key_notes = _per_key(keys, codes, lambda k: k.note, "").astype(object)
    noted = (engine_notes != "") | (key_notes != "") | (fit_warn != "") | (queue_notes != "")
    warnings = np.full(n, "", dtype=object)
    for i in np.flatnonzero(good & (noted | defaulted | host)):
        cap_note = ""
        if defaulted[i]:
            cap_note = default_cap_note(jobs[i], together[i], gpu_names[i], int(replicas[i]))
        notes = (engine_notes[i], key_notes[i], fit_warn[i], cap_note, queue_notes[i])
        notes += (host_bound_note(coef.host_bound_rule),) if host[i] else ()  # type: ignore[arg-type]
        warnings[i] = "; ".join(x for x in notes if x)
    return EstimateTable(
        requests=req,
        error=errors.messages,
        warning=warnings,
        keys=keys,
        codes=codes,
        engine=engines,
        offline=offline,
        input_tokens=in_tok,
        num_gpus=ngpu,
        prediction=pred,
        interval=(lo, hi),
        memory_gb=memory,
    )


def _features(keys: list[ModelOnGpu | None], codes: np.ndarray) -> dict[str, np.ndarray]:
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


def _memory_fit(
    f: dict[str, np.ndarray],
    mem_gb: np.ndarray,
    gpu_names: np.ndarray,
    in_given: np.ndarray,
    errors: RowErrors,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Apply the fit rule (:func:`~mlenergy.estimate.memory.fit_verdict`) to every clean row.

    Returns:
        Per-GPU memory in GB per row (``weights``, ``workspace``, ``kv_cache``, ``total``,
        ``usable``) and each row's warning (a KV cache at a task-default prompt length that
        may not fit).
    """
    weights, workspace, kv, per_seq = memory_bytes(f)
    usable = usable_bytes(mem_gb)
    warn = np.full(len(mem_gb), "", dtype=object)
    over = errors.ok() & ((weights + workspace + kv) > usable)
    for i in np.flatnonzero(over):
        error, fix, warning = fit_verdict(
            weights=float(weights[i]),
            workspace=float(workspace[i]),
            kv=float(kv[i]),
            per_seq=float(per_seq[i]),
            batch=float(f["batch"][i]),
            dp=float(f["dp"][i]),
            ctx=float(f["input_tokens"][i] + 0.5 * f["output_tokens"][i]),
            memory_gb=float(mem_gb[i]),
            gpu_name=str(gpu_names[i]),
            input_given=bool(in_given[i]),
        )
        if error:
            errors.messages[i] = f"{error}. {fix}"
        warn[i] = warning
    gb = {
        "weights": weights / 1e9,
        "workspace": workspace / 1e9,
        "kv_cache": kv / 1e9,
        "total": (weights + workspace + kv) / 1e9,
        "usable": usable / 1e9,
    }
    return gb, warn


def _interval(
    coef: Coefficients, keys: list[ModelOnGpu | None], codes: np.ndarray, host: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Multiplicative (low, high) factors of each row's 90% interval of energy per token.

    The quantiles of the row's GPU and architecture family where calibrated, else the common
    ones; the host-bound rule's own where it matches; widened by ``unseen_gpu_widen`` for a
    GPU absent from calibration.
    """
    per_key = [
        coef.interval_logs(False, interval_class(k.gpu.name, k.spec.kind) if k else None)
        for k in keys
    ]
    q05 = np.array([lo for lo, _ in per_key], dtype=float)[codes]
    q95 = np.array([hi for _, hi in per_key], dtype=float)[codes]
    h05, h95 = coef.interval_logs(True)
    calibrated = set(coef.calibrated_gpus)
    widen = _per_key(
        keys, codes, lambda k: 1.0 if k.gpu.name in calibrated else coef.unseen_gpu_widen, 1.0
    ).astype(float)
    lo = np.exp(np.where(host, h05, q05) * widen)
    hi = np.exp(np.where(host, h95, q95) * widen)
    return lo, hi
