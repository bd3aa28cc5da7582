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
from mlenergy.estimate.checks import (
    RowErrors,
    check_clock_power,
    check_parallel,
    check_values,
    expected_num_gpus,
    mode_error,
)
from mlenergy.estimate.coefficients import Coefficients, default_coefficients, interval_class
from mlenergy.estimate.engines import (
    CURRENT_ENGINE,
    engine_code,
    engine_note,
    old_offline_defaults,
    resolve_engine,
)
from mlenergy.estimate.features import Features
from mlenergy.estimate.host_bound import host_bound_mask, host_bound_note
from mlenergy.estimate.memory import (
    MEMORY_KEYS,
    MemoryFeatures,
    fit_verdict,
    memory_bytes,
    offline_kv_limit,
    usable_bytes,
)
from mlenergy.estimate.offline import predict_modes
from mlenergy.estimate.offline_scheduler import default_cap_note, row_schedulers
from mlenergy.estimate.prediction import PREDICTIONS, Prediction
from mlenergy.estimate.requests import EstimateRequests
from mlenergy.estimate.table_keys import (
    ModelOnGpu,
    factorize,
    key_features,
    key_numbers,
    per_key,
    resolve_keys,
)
from mlenergy.estimate.table_rows import EstimateTable
from mlenergy.estimate.task_defaults import is_multimodal, task_input_tokens
from mlenergy.records.parallel import DEGREES


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
    codes, uniques = factorize(keys)
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


@dataclass(frozen=True)
class PreparedTable:
    """Requests checked, resolved and featurised: the physics' inputs and what reports need.

    Attributes:
        errors: Each row's error so far.
        codes: Each row's index into ``keys``.
        keys: The distinct (model, GPU, precision) resolved (``None``: unresolved).
        offline: Which rows are offline jobs.
        max_output_tokens: Each offline job's cap (NaN: none).
        engines: Each row's engine profile.
        notes: Per row, the engine's caveat, the memory fit's and the KV-cache queue's.
        num_gpus: Each row's GPUs (derived where not given).
        input_tokens: Each row's prompt length (the task's default where not given).
        features: The physics' inputs (placeholders on bad rows).
        memory: The fit rule's per-model inputs and each row's concurrency cap.
        schedule: The offline scheduler's token budget and chunked prefill per row.
        queued: Per row, whether the offline default cap queued requests, the sequences
            decoding together and the replicas.
        gpu_names: Each row's catalog GPU name.
        memory_gb: Per-GPU memory in GB per row (empty without the fit check).
    """

    errors: RowErrors
    codes: np.ndarray
    keys: list[ModelOnGpu | None]
    offline: np.ndarray
    max_output_tokens: np.ndarray
    engines: np.ndarray
    notes: tuple[np.ndarray, np.ndarray, np.ndarray]
    num_gpus: np.ndarray
    input_tokens: np.ndarray
    features: Features
    memory: MemoryFeatures
    schedule: tuple[np.ndarray, np.ndarray]
    queued: tuple[np.ndarray, np.ndarray, np.ndarray]
    gpu_names: np.ndarray
    memory_gb: dict[str, np.ndarray]


def _offline_queue(
    req: EstimateRequests,
    gpus: list,
    codes: np.ndarray,
    old_offline: np.ndarray,
    offline: np.ndarray,
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Sequences decoding together per row, the offline scheduler, and who queued.

    An offline job's requests beyond ``max_num_seqs`` queue: that many decode together; with
    none given, as many as vLLM's offline scheduler takes on the row's GPU by default.

    Returns:
        The batch per row; the scheduler's token budget and chunked prefill per row; whether
        the default cap queued requests, the sequences decoding together and the replicas.
    """
    jobs, cap = req.batch_size, req.max_num_seqs
    budget, per_replica, chunked = row_schedulers(gpus, codes, old_offline)
    replicas = np.where(req.data_parallel >= 1, req.data_parallel, 1.0)
    together = np.where(np.isnan(cap), per_replica * replicas, cap)
    defaulted = offline & np.isnan(cap) & (jobs > together)
    batch = np.where(offline & (together >= 1) & (jobs > together), together, jobs)
    return batch, (budget, chunked), (defaulted, together, replicas)


def _features(
    req: EstimateRequests,
    keys: list[ModelOnGpu | None],
    codes: np.ndarray,
    good: np.ndarray,
    fill: dict[str, np.ndarray],
    engines: np.ndarray,
) -> tuple[Features, MemoryFeatures]:
    """The physics' and the fit rule's inputs: the model's, then the row's.

    Bad rows get placeholders (1.0) that keep the arithmetic finite.
    """
    cols = key_features(keys, codes)
    every = bool(good.all())  # then the placeholders of bad rows are not needed
    for name, arr in fill.items():
        cols[name] = arr if every else np.where(good, arr, 1.0)
    cols["clock"] = req.sm_clock_mhz if every else np.where(good, req.sm_clock_mhz, np.nan)
    cols["power_limit"] = req.power_limit_w if every else np.where(good, req.power_limit_w, np.nan)
    cols["engine"] = np.array([engine_code(e) for e in engines], dtype=float)
    seqs = np.where(good & ~np.isnan(req.max_num_seqs), req.max_num_seqs, cols["batch"])
    memory = MemoryFeatures(**{name: cols[name] for name in MEMORY_KEYS}, seqs=seqs)
    return Features.from_columns(cols), memory


def _task_inputs(req: EstimateRequests) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Prompt tokens per row (the task's default where not given), given or not, multimodal.

    Returns:
        Mean prompt tokens, whether the request gave them, whether the task's prompts carry
        images or video.
    """
    task_codes, task_names = factorize(req.task)
    task_len = np.array([task_input_tokens(t) for t in task_names], dtype=float)[task_codes]
    in_given = ~np.isnan(req.input_tokens)
    in_tok = np.where(in_given, req.input_tokens, task_len)
    visual = np.array([is_multimodal(t) for t in task_names], dtype=bool)[task_codes]
    return in_tok, in_given, visual


def prepare_table(
    req: EstimateRequests, configs_dir: str | Path | None = None, check_fit: bool = True
) -> PreparedTable:
    """Check, resolve and featurise every request (the physics' inputs); bad rows get an error.

    Args:
        req: The requests.
        configs_dir: Folder of ``<org>__<name>.json`` model configs.
        check_fit: Apply the memory fit rule (the calibration featurises measured runs
            without it: they ran).
    """
    n = len(req)
    errors = RowErrors(n)
    errors.flag(req.bad_cells != "", req.bad_cells)
    codes, keys = resolve_keys(req, configs_dir, errors)
    offline, max_out = _modes(req, errors)
    engines, engine_notes = _engines(req, offline, errors)

    tp, ep, dp, pp = (getattr(req, name) for name in DEGREES)
    ngpu = np.where(np.isnan(req.num_gpus), expected_num_gpus(tp, ep, dp, pp), req.num_gpus)
    jobs, out_tok = req.batch_size, req.output_tokens
    in_tok, in_given, visual = _task_inputs(req)
    cap = req.max_num_seqs
    check_values(errors, jobs, in_tok, out_tok, cap, offline)
    degrees = {"num_gpus": ngpu, **{name: getattr(req, name) for name in DEGREES}}
    heads, experts, mem_gb = key_numbers(keys, codes)
    check_parallel(errors, degrees, heads, experts)
    gpus = [None if k is None else k.gpu for k in keys]
    check_clock_power(errors, req.sm_clock_mhz, req.power_limit_w, gpus, codes)

    old_offline = np.array([old_offline_defaults(e) for e in engines], dtype=bool)
    batch, schedule, queued = _offline_queue(req, gpus, codes, old_offline, offline)
    good = errors.ok()
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
    feat, mem = _features(req, keys, codes, good, fill, engines)
    equal = np.isnan(max_out) | (max_out <= out_tok)
    batch, queue_notes = offline_kv_limit(feat, mem, mem_gb, offline & good, equal)
    if batch is not feat.batch:
        feat = feat.replace(batch=batch)
    mem = mem.replace(seqs=np.where(good & np.isnan(cap), batch, mem.seqs))
    gpu_names = per_key(keys, codes, lambda k: k.gpu.name, "").astype(object)
    memory: dict[str, np.ndarray] = {}
    fit_warn = np.full(n, "", dtype=object)
    if check_fit:
        memory, fit_warn = _memory_fit(feat, mem, mem_gb, gpu_names, in_given, errors)
    return PreparedTable(
        errors=errors,
        codes=codes,
        keys=keys,
        offline=offline,
        max_output_tokens=max_out,
        engines=engines,
        notes=(engine_notes, fit_warn, queue_notes),
        num_gpus=ngpu,
        input_tokens=in_tok,
        features=feat,
        memory=mem,
        schedule=schedule,
        queued=queued,
        gpu_names=gpu_names,
        memory_gb=memory,
    )


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
    p = prepare_table(req, configs_dir)
    errors, codes, keys, jobs = p.errors, p.codes, p.keys, req.batch_size
    engine_notes, fit_warn, queue_notes = p.notes
    defaulted, together, replicas = p.queued
    gpu_names, ngpu, offline = p.gpu_names, p.num_gpus, p.offline
    n = len(req)
    good = errors.ok()
    pred = _predict_good(p, coef, good, jobs)

    def infeasible(i: int) -> str:
        return (
            f"power_limit {req.power_limit_w[i]:g} W is below the "
            f"{pred.min_clock_power_w[i]:.0f} W this workload draws per GPU at the lowest SM "
            f"clock {pred.clock_mhz[i]:.0f} MHz; raise --power-limit to at least "
            f"{math.ceil(pred.min_clock_power_w[i]):.0f} W or lower the batch size"
        )

    errors.flag_each(pred.power_limit_infeasible.astype(bool), infeasible)
    good = errors.ok()
    host = host_bound_mask(gpu_names, ngpu, req.task, coef.host_bound_rule)
    lo, hi = _interval(coef, keys, codes, host)

    key_notes = per_key(keys, codes, lambda k: k.note, "").astype(object)
    noted = (engine_notes != "") | (key_notes != "") | (fit_warn != "") | (queue_notes != "")
    warnings = np.full(n, "", dtype=object)
    for i in np.flatnonzero(good & (noted | defaulted | host)):
        cap_note = ""
        if defaulted[i]:
            cap_note = default_cap_note(jobs[i], together[i], gpu_names[i], int(replicas[i]))
        notes: tuple[str, ...] = (
            engine_notes[i],
            key_notes[i],
            fit_warn[i],
            cap_note,
            queue_notes[i],
        )
        rule = coef.host_bound_rule
        notes += (host_bound_note(rule),) if host[i] and rule is not None else ()
        warnings[i] = "; ".join(x for x in notes if x)
    return EstimateTable(
        requests=req,
        error=errors.messages,
        warning=warnings,
        keys=keys,
        codes=codes,
        engine=p.engines,
        offline=offline,
        input_tokens=p.input_tokens,
        num_gpus=ngpu,
        prediction=pred,
        interval=(lo, hi),
        memory_gb=p.memory_gb,
    )


def _predict_good(
    p: PreparedTable, coef: Coefficients, good: np.ndarray, jobs: np.ndarray
) -> Prediction:
    """The physics' prediction of the rows without error (NaN, and feasible, on the others).

    A row's prediction is its own (rows never mix), so the rows with an error are left out
    of the physics rather than evaluated on placeholders.
    """
    idx = np.flatnonzero(good)
    if len(idx) == len(good):
        return predict_modes(p.features, coef, p.offline, p.max_output_tokens, jobs, *p.schedule)
    out = {name: np.full(len(good), np.nan) for name in PREDICTIONS}
    out["power_limit_infeasible"] = np.zeros(len(good), dtype=bool)
    if len(idx):
        budget, chunked = p.schedule
        sub = predict_modes(
            p.features.rows(idx),
            coef,
            p.offline[idx],
            p.max_output_tokens[idx],
            jobs[idx],
            budget[idx],
            chunked[idx],
        )
        for name, v in sub.columns().items():
            out[name][idx] = v
    return Prediction(**out)


def _memory_fit(
    f: Features,
    m: MemoryFeatures,
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
    weights, workspace, kv, per_seq = memory_bytes(f, m)
    usable = usable_bytes(mem_gb)
    warn = np.full(len(mem_gb), "", dtype=object)
    over = errors.ok() & ((weights + workspace + kv) > usable)
    for i in np.flatnonzero(over):
        error, fix, warning = fit_verdict(
            weights=float(weights[i]),
            workspace=float(workspace[i]),
            kv=float(kv[i]),
            per_seq=float(per_seq[i]),
            batch=float(f.batch[i]),
            dp=float(f.dp[i]),
            ctx=float(f.input_tokens[i] + 0.5 * f.output_tokens[i]),
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
    logs = [
        coef.interval_logs(False, interval_class(k.gpu.name, k.spec.kind) if k else None)
        for k in keys
    ]
    q05 = np.array([lo for lo, _ in logs], dtype=float)[codes]
    q95 = np.array([hi for _, hi in logs], dtype=float)[codes]
    h05, h95 = coef.interval_logs(True)
    calibrated = set(coef.calibrated_gpus)
    widen = per_key(
        keys, codes, lambda k: 1.0 if k.gpu.name in calibrated else coef.unseen_gpu_widen, 1.0
    ).astype(float)
    lo = np.exp(np.where(host, h05, q05) * widen)
    hi = np.exp(np.where(host, h95, q95) * widen)
    return lo, hi
