"""Many estimates at once: the batch CSV contract, vectorised with numpy.

Input columns: ``model``, ``gpu``, ``num_gpus``, ``tensor_parallel``, ``expert_parallel``,
``data_parallel``, ``pipeline_parallel`` (optional, default 1), ``precision``, ``task``
(optional), ``batch_size``, ``max_num_seqs``, ``input_tokens`` (may be empty: task default),
``output_tokens``, and optionally ``sm_clock_mhz`` or ``power_limit_w`` (per GPU, W). The
parallel layout must occupy ``num_gpus`` (derived when blank; see
:func:`~mlenergy.estimate.checks.check_layout`). Output: the input columns plus
``energy_per_token_j``,
``energy_per_token_j_lo``, ``energy_per_token_j_hi``, ``throughput_tokens_per_s``,
``avg_power_w``, ``error`` (empty when the row was estimated) and ``warning`` (caveats of an
estimated row, empty if none). An optional ``engine`` column picks the serving engine (blank:
the task's, see :mod:`~mlenergy.estimate.engines`); optional ``mode`` (``serving``, the
default, or ``offline``) and ``max_output_tokens`` (an offline job's generation cap) pick the
workload (:mod:`~mlenergy.estimate.offline`). A bad row keeps its place.

Models resolve as in the single path (:func:`~mlenergy.estimate.configs.resolve_model_config`)
and the memory fit is the one rule of :mod:`~mlenergy.estimate.memory`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from mlenergy.errors import UserError
from mlenergy.estimate.api import estimate, power_limit_message
from mlenergy.estimate.catalog import GpuSpec, resolve_gpu
from mlenergy.estimate.checks import (
    BATCH_CAP_TOLERANCE,
    check_layout,
    clock_power_error,
    mode_error,
)
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
from mlenergy.estimate.profile import build_profile
from mlenergy.estimate.serving import ServingSetup
from mlenergy.estimate.task_defaults import (
    TASK_INPUT_TOKENS,
    is_multimodal,
    task_input_tokens,
)

INPUT_COLUMNS = (
    "model",
    "gpu",
    "num_gpus",
    "tensor_parallel",
    "expert_parallel",
    "data_parallel",
    "pipeline_parallel",
    "precision",
    "task",
    "batch_size",
    "max_num_seqs",
    "input_tokens",
    "output_tokens",
)
OUTPUT_COLUMNS = (
    "energy_per_token_j",
    "energy_per_token_j_lo",
    "energy_per_token_j_hi",
    "throughput_tokens_per_s",
    "avg_power_w",
)
CONTROL_COLUMNS = ("sm_clock_mhz", "power_limit_w")
"""Optional input columns: a locked SM clock (MHz) or a power limit per GPU (W), not both."""
ENGINE_COLUMN = "engine"
"""Optional input column: the serving engine (blank: the task's, see
:mod:`~mlenergy.estimate.engines`). A row that takes a non-current engine from its task says
so in its ``warning``."""
MODE_COLUMNS = ("mode", "max_output_tokens")
"""Optional input columns: ``serving`` (blank) or ``offline``, and an offline job's cap."""
REQUIRED = ("model", "gpu", "batch_size", "output_tokens")
_INT_DEFAULTS = {
    "tensor_parallel": 1,
    "expert_parallel": 1,
    "data_parallel": 1,
    "pipeline_parallel": 1,
}


def _num(df: pd.DataFrame, col: str, default: float = np.nan) -> np.ndarray:
    if col not in df:
        return np.full(len(df), default, dtype=float)
    raw = df[col]
    vals = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    blank = raw.isna().to_numpy() | (raw.astype(str).str.strip() == "").to_numpy()
    return np.where(blank, default, vals)


def _row_modes(df: pd.DataFrame, out_tok: np.ndarray, flag) -> tuple:
    """Each row's mode and generation cap; bad values go to the row's ``error``.

    Returns:
        ``(offline, max_output_tokens)``: which rows are offline jobs, and their caps (NaN:
        none).
    """
    n = len(df)
    raw = df["mode"].fillna("").astype(str).to_numpy() if "mode" in df else np.full(n, "")
    modes = np.array([m.strip().lower() or "serving" for m in raw], dtype=object)
    cap = _num(df, "max_output_tokens")
    flag(_bad_number(df, "max_output_tokens"), "max_output_tokens is not a number")
    msgs = np.full(n, "", dtype=object)
    for i in np.flatnonzero((modes != "serving") | ~np.isnan(cap)):  # only rows that ask
        msgs[i] = mode_error(raw[i], None if np.isnan(cap[i]) else float(cap[i]), out_tok[i])
    flag(msgs != "", msgs)
    return modes == "offline", cap


def _join_notes(*notes: str) -> str:
    """Caveats joined with ``"; "`` (the ``warning`` column's format), blanks skipped."""
    return "; ".join(n for n in notes if n)


def _bad_number(df: pd.DataFrame, col: str) -> np.ndarray:
    """Rows whose ``col`` is non-blank but not a number."""
    if col not in df:
        return np.zeros(len(df), dtype=bool)
    raw = df[col]
    blank = raw.isna().to_numpy() | (raw.astype(str).str.strip() == "").to_numpy()
    return ~blank & np.isnan(pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float))


def estimate_frame(
    df: pd.DataFrame,
    configs_dir: str | Path | None = None,
    coefficients: Coefficients | None = None,
) -> pd.DataFrame:
    """Estimate every row of a batch frame; rows that cannot be estimated get ``error``.

    Args:
        df: Frame with the batch input columns (extra columns are kept).
        configs_dir: Folder of ``<org>__<name>.json`` model configs.
        coefficients: Model coefficients (default: shipped).

    Returns:
        A copy of ``df`` with the output columns, ``error`` and ``warning`` appended, same
        row order.
    """
    missing = [c for c in REQUIRED if c not in df]
    if missing:
        names = ", ".join(f"'{c}'" for c in missing)
        raise UserError(
            f"batch input lacks required column{'s' if len(missing) > 1 else ''} {names}",
            f"Required: {', '.join(REQUIRED)}; optional: "
            f"{', '.join(c for c in (*INPUT_COLUMNS, *CONTROL_COLUMNS) if c not in REQUIRED)}",
        )
    coef = coefficients or default_coefficients()
    n = len(df)
    err = np.full(n, "", dtype=object)

    def flag(mask: np.ndarray, message: str | np.ndarray) -> None:
        hit = mask & (err == "")
        if np.any(hit):
            err[hit] = message if isinstance(message, str) else message[hit]

    # Model / GPU / precision: resolved once per distinct combination.
    models = df["model"].fillna("").astype(str).str.strip().to_numpy()
    gpus = df["gpu"].fillna("").astype(str).str.strip().to_numpy()
    precs = (
        df["precision"].fillna("").astype(str).str.strip().to_numpy()
        if "precision" in df
        else np.full(n, "", dtype=object)
    )
    parts = [pd.factorize(col) for col in (models, gpus, precs)]
    combined = (parts[0][0] * len(parts[1][1]) + parts[1][0]) * len(parts[2][1]) + parts[2][0]
    _, first_idx, codes = np.unique(combined, return_index=True, return_inverse=True)
    uniques = [(models[i], gpus[i], precs[i]) for i in first_idx]
    key_rows: list[dict[str, float] | None] = []
    key_err: list[str] = []
    key_note: list[str] = []
    key_info: list[tuple] = []  # heads, experts, memory, gpu name, architecture family
    gpu_specs: list[GpuSpec | None] = []
    dummy = ServingSetup(batch_size=1.0, input_tokens=1.0, output_tokens=1.0)
    for model, gpu, prec in uniques:
        try:
            resolved = resolve_model_config(model, configs_dir)
            spec = resolved.spec
            gpu_spec = resolve_gpu(gpu)
            if not gpu:
                raise UserError("gpu is empty")
            prof = build_profile(spec, weight_precision(resolved.fp8, prec, spec.quant_method))
            row = feature_row(prof, gpu_spec, dummy)
            row.update(memory_row(spec, prof))
            key_rows.append(row)
            key_err.append("")
            key_note.append(resolved.note)
            key_info.append(
                (
                    spec.num_heads,
                    spec.num_experts or 0,
                    gpu_spec.memory_gb,
                    gpu_spec.name,
                    spec.kind,
                )
            )
            gpu_specs.append(gpu_spec)
        except UserError as exc:
            key_rows.append(None)
            key_err.append(exc.message)
            key_note.append("")
            key_info.append((1, 0, math.inf, "", ""))
            gpu_specs.append(None)
    key_err_arr = np.array(key_err, dtype=object)
    flag(key_err_arr[codes] != "", key_err_arr[codes])

    tp = _num(df, "tensor_parallel", 1)
    ep = _num(df, "expert_parallel", 1)
    dp = _num(df, "data_parallel", 1)
    pp = _num(df, "pipeline_parallel", 1)
    ngpu = _num(df, "num_gpus", np.nan)
    ngpu = np.where(np.isnan(ngpu), np.maximum(tp * pp * dp, ep), ngpu)  # expected_num_gpus
    batch = _num(df, "batch_size")
    out_tok = _num(df, "output_tokens")
    in_tok = _num(df, "input_tokens")
    in_given = ~np.isnan(in_tok)
    tasks = df["task"].fillna("").astype(str).to_numpy() if "task" in df else np.full(n, "")
    table = {t: task_input_tokens(t) for t in set(tasks) | set(TASK_INPUT_TOKENS)}
    task_codes, task_names = pd.factorize(tasks)
    task_len = np.array([table[t] for t in task_names], dtype=float)
    in_tok = np.where(np.isnan(in_tok), task_len[task_codes], in_tok)
    visual = np.array([is_multimodal(t) for t in task_names], dtype=bool)[task_codes]
    offline, max_out = _row_modes(df, out_tok, flag)
    engines, engine_err, engine_notes = _row_engines(df, tasks, offline)
    flag(engine_err != "", engine_err)

    for col in ("num_gpus", *_INT_DEFAULTS, "batch_size", "input_tokens", "output_tokens"):
        flag(_bad_number(df, col), f"{col} is not a number")
    for col, arr in (("batch_size", batch), ("output_tokens", out_tok)):
        flag(np.isnan(arr), f"{col} is missing")
        flag(arr <= 0, f"{col} must be > 0")
    flag(in_tok <= 0, "input_tokens must be > 0")
    cap = _num(df, "max_num_seqs", np.nan)
    flag(_bad_number(df, "max_num_seqs"), "max_num_seqs is not a number")
    flag(
        ~np.isnan(cap) & ((cap < 1) | (cap != np.round(cap))),
        "max_num_seqs must be a whole number >= 1",
    )
    flag(
        ~offline & ~np.isnan(cap) & (batch > cap * BATCH_CAP_TOLERANCE),
        "batch_size exceeds max_num_seqs (the engine's concurrency cap)",
    )
    # An offline job's requests beyond max_num_seqs queue: that many decode together; with
    # none given, as many as vLLM's offline scheduler takes on the row's GPU by default.
    jobs = batch
    legacy = np.array([is_legacy(e) for e in engines], dtype=bool)
    budget, per_replica, chunked = row_schedulers(gpu_specs, codes, legacy)
    replicas = np.where(dp >= 1, dp, 1.0)
    together = np.where(np.isnan(cap), per_replica * replicas, cap)
    defaulted = offline & np.isnan(cap) & (batch > together)
    batch = np.where(offline & (together >= 1) & (batch > together), together, batch)
    for col, arr in (
        ("num_gpus", ngpu),
        ("tensor_parallel", tp),
        ("expert_parallel", ep),
        ("data_parallel", dp),
        ("pipeline_parallel", pp),
    ):
        flag((arr < 1) | (arr != np.round(arr)), f"{col} must be a whole number >= 1")
    safe_dp = np.where(dp >= 1, dp, 1)
    flag(np.mod(ngpu, safe_dp) != 0, "data_parallel does not divide num_gpus")

    heads = np.array([k[0] for k in key_info], dtype=float)[codes]
    experts = np.array([k[1] for k in key_info], dtype=float)[codes]
    safe_tp = np.where(tp >= 1, tp, 1)
    bad_tp = np.mod(heads, safe_tp) != 0
    if np.any(bad_tp):
        msgs = np.full(n, "", dtype=object)
        for i in np.flatnonzero(bad_tp):
            msgs[i] = (
                f"tensor_parallel ({tp[i]:g}) does not divide num_attention_heads ({heads[i]:g})"
            )
        flag(bad_tp, msgs)
    layout_ok = np.isfinite(ngpu * tp * ep * dp * pp)
    for i in np.flatnonzero(layout_ok & (err == "")):
        message = check_layout(ngpu[i], tp[i], ep[i], dp[i], pp[i])
        if message:
            err[i] = message
    clock = _num(df, "sm_clock_mhz", np.nan)
    limit = _num(df, "power_limit_w", np.nan)
    for col in CONTROL_COLUMNS:
        flag(_bad_number(df, col), f"{col} is not a number")
    for i in np.flatnonzero(~(np.isnan(clock) & np.isnan(limit)) & (err == "")):
        spec = gpu_specs[codes[i]]
        if spec is not None:
            err[i] = clock_power_error(
                None if np.isnan(clock[i]) else float(clock[i]),
                None if np.isnan(limit[i]) else float(limit[i]),
                spec,
            )
    flag((ep > 1) & (experts == 0), "expert_parallel > 1 needs an MoE model")
    flag((experts > 0) & (ep > experts), "expert_parallel exceeds num_experts")

    # Assemble features for every row (bad rows get harmless placeholders).
    ok_key = np.array([r is not None for r in key_rows])
    template = next((r for r in key_rows if r is not None), None)
    feat: dict[str, np.ndarray] = {}
    if template is not None:
        for name in (*FEATURES, *MEMORY_KEYS):
            col = np.array([(r or template)[name] for r in key_rows], dtype=float)
            feat[name] = col[codes]
    good = (err == "") & ok_key[codes] if template is not None else np.zeros(n, dtype=bool)
    warn = np.full(n, "", dtype=object)
    result = df.copy()
    for col in OUTPUT_COLUMNS:
        result[col] = np.nan
    if template is not None:
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
        for name, arr in fill.items():
            feat[name] = np.where(good, arr, 1.0)
        feat["clock"] = np.where(good, clock, np.nan)
        feat["power_limit"] = np.where(good, limit, np.nan)
        feat["legacy"] = np.array([is_legacy(e) for e in engines], dtype=float)
        feat["seqs"] = np.where(good & ~np.isnan(cap), cap, feat["batch"])
        mem_gb = np.array([k[2] for k in key_info], dtype=float)[codes]
        equal = np.isnan(max_out) | (max_out <= out_tok)
        queue_notes = offline_kv_limit(feat, mem_gb, offline & good, equal)
        feat["seqs"] = np.where(good & np.isnan(cap), feat["batch"], feat["seqs"])
        _memory_fit(feat, key_info, codes, in_given, good, err, warn)
        for i in np.flatnonzero(defaulted):
            note = default_cap_note(jobs[i], together[i], key_info[codes[i]][3], int(replicas[i]))
            warn[i] = _join_notes(warn[i], note)
        for i in np.flatnonzero(queue_notes != ""):
            warn[i] = _join_notes(warn[i], queue_notes[i])
        for i in np.flatnonzero(engine_notes != ""):  # the engine profile's caveat
            warn[i] = _join_notes(engine_notes[i], warn[i])
        good &= err == ""
        for c in np.flatnonzero(np.array(key_note, dtype=object) != ""):  # variant config used
            rows = np.flatnonzero(codes == c)
            warn[rows] = [_join_notes(key_note[c], w) for w in warn[rows]]
        pred = predict_modes(
            feat, coef, offline & good, max_out, np.where(good, jobs, 1.0), budget, chunked
        )
        for i in np.flatnonzero(good & pred["power_limit_infeasible"]):
            err[i] = power_limit_message(
                float(limit[i]),
                float(pred["min_clock_power_w"][i]),
                {"clock_mhz": float(pred["clock_mhz"][i])},
            )
        good &= err == ""
        e = pred["energy_per_token_j"]
        names = np.array([key_info[c][3] for c in codes], dtype=object)
        widen = np.array(
            [1.0 if g in coef.calibrated_gpus else coef.unseen_gpu_widen for g in names]
        )
        rule = coef.host_bound_rule
        host = host_bound_mask(names, ngpu, tasks, rule)
        per_key = [coef.interval_logs(False, interval_class(k[3], k[4])) for k in key_info]
        q05 = np.array([lo for lo, _ in per_key], dtype=float)[codes]
        q95 = np.array([hi for _, hi in per_key], dtype=float)[codes]
        h05, h95 = coef.interval_logs(True)
        for i in np.flatnonzero(good & host):
            warn[i] = _join_notes(warn[i], host_bound_note(rule))  # type: ignore[arg-type]
        cols = {
            "energy_per_token_j": e,
            "energy_per_token_j_lo": e * np.exp(np.where(host, h05, q05) * widen),
            "energy_per_token_j_hi": e * np.exp(np.where(host, h95, q95) * widen),
            "throughput_tokens_per_s": pred["throughput_tokens_per_s"],
            "avg_power_w": pred["avg_power_w"],
        }
        for col, arr in cols.items():
            result[col] = np.where(good, arr, np.nan)
    result["error"] = err
    result["warning"] = np.where(good, warn, "")
    return result


def _row_engines(
    df: pd.DataFrame, tasks: np.ndarray, offline: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: engine, error of a bad engine name, and the engine's caveat.

    The engine is the ``engine`` column, else the task's; errors and notes are ``""`` when
    none (:func:`~mlenergy.estimate.engines.engine_note` says which profiles carry a note).
    Each distinct (engine, task, mode) triple is resolved once.
    """
    given = df[ENGINE_COLUMN].fillna("").astype(str) if ENGINE_COLUMN in df else ""
    modes = np.where(offline, "offline", "serving")
    keys = pd.DataFrame({"engine": given, "task": tasks, "mode": modes})
    codes, uniques = pd.factorize(keys["engine"] + "\x00" + keys["task"] + "\x00" + keys["mode"])
    names, errors, notes = [], [], []
    for key in uniques:
        engine, task, mode = key.split("\x00")
        try:
            name, error = resolve_engine(engine, task), ""
        except UserError as exc:
            name, error = CURRENT_ENGINE, exc.message
        names.append(name)
        errors.append(error)
        notes.append("" if error else engine_note(engine, task, name, mode))
    return tuple(np.array(v, dtype=object)[codes] for v in (names, errors, notes))


def _memory_fit(
    f: dict[str, np.ndarray],
    key_info: list[tuple[int, int, float, str]],
    codes: np.ndarray,
    in_given: np.ndarray,
    good: np.ndarray,
    err: np.ndarray,
    warn: np.ndarray,
) -> None:
    """Apply the fit rule to every good row: fill ``err`` (cannot run) or ``warn`` in place."""
    mem_gb = np.array([k[2] for k in key_info], dtype=float)[codes]
    weights, workspace, kv, per_seq = memory_bytes(f)
    usable = usable_bytes(mem_gb)
    over = good & ((weights + workspace + kv) > usable)
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
            gpu_name=key_info[codes[i]][3],
            input_given=bool(in_given[i]),
        )
        if error:
            err[i] = f"{error}. {fix}"
        warn[i] = warning


def estimate_csv(
    in_path: str | Path,
    out_path: str | Path,
    configs_dir: str | Path | None = None,
    coefficients: Coefficients | None = None,
) -> pd.DataFrame:
    """Read a batch CSV, estimate every row and write the output CSV atomically."""
    src = Path(in_path)
    if not src.is_file():
        raise UserError(f"batch file '{src}' does not exist", "Check the --batch path")
    try:
        df = pd.read_csv(src, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise UserError(
            f"batch file '{src}' is empty",
            f"Give a header row with at least {', '.join(REQUIRED)} and one row per estimate",
        ) from None
    except pd.errors.ParserError as exc:
        raise UserError(f"batch file '{src}' is not a valid CSV ({exc})") from None
    if df.empty:
        raise UserError(f"batch file '{src}' has a header but no rows", "Add one row per estimate")
    result = estimate_frame(df, configs_dir, coefficients)
    dst = Path(out_path)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    result.to_csv(tmp, index=False)
    tmp.replace(dst)
    return result


def row_estimates(
    result: pd.DataFrame,
    configs_dir: str | Path | None = None,
    coefficients: Coefficients | None = None,
) -> list:  # -> list[Estimate]
    """:class:`~mlenergy.estimate.api.Estimate` s of the rows of a batch result without error.

    Each good row is estimated again by :func:`~mlenergy.estimate.api.estimate` (the single
    path), so that ``--batch --save`` stores the same records as the single ``--save``; a row
    that the single path rejects is left out.

    Args:
        result: The frame returned by :func:`estimate_frame`.
        configs_dir: Folder of model configs.
        coefficients: Model coefficients (default: shipped).
    """

    def val(row: dict, col: str, cast: type = float) -> object:
        v = row.get(col)
        if v is None or str(v).strip() in ("", "nan", "NaN", "None"):
            return None
        return cast(float(v)) if cast is int else cast(v)

    out = []
    for row in result[result["error"] == ""].to_dict("records"):
        try:
            est = estimate(
                model=str(row["model"]).strip(),
                gpu=str(row["gpu"]).strip(),
                batch_size=val(row, "batch_size"),
                output_tokens=val(row, "output_tokens"),
                input_tokens=val(row, "input_tokens"),
                task=val(row, "task", str),
                precision=val(row, "precision", str),
                num_gpus=val(row, "num_gpus", int),
                tensor_parallel=val(row, "tensor_parallel", int) or 1,
                expert_parallel=val(row, "expert_parallel", int) or 1,
                data_parallel=val(row, "data_parallel", int) or 1,
                pipeline_parallel=val(row, "pipeline_parallel", int) or 1,
                sm_clock_mhz=val(row, "sm_clock_mhz"),
                power_limit_w=val(row, "power_limit_w"),
                max_num_seqs=val(row, "max_num_seqs", int),
                engine=val(row, ENGINE_COLUMN, str),
                mode=val(row, "mode", str),
                max_output_tokens=val(row, "max_output_tokens"),
                configs_dir=configs_dir,
                coefficients=coefficients,
            )
        except UserError:  # the row's checks differ from the single path's: not saved
            continue
        out.append(est)
    return out
