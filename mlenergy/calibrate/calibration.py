"""Fit the physical model's few global coefficients on measurements.

Robust (Cauchy-loss) least squares in log space on throughput, average power, energy per token
(their ratio, so that it is not right by two wrong halves cancelling) and, where measured, the
median inter-token latency (the median step: the decode step alone unless most steps carry
prompts, which separates decode physics from prefill stalls). Coefficients are global (not
per model, not per GPU), so that they transfer to unseen models and chips.

Rows flagged by the host-bound rule of the coefficients (an input-based rule, see
:mod:`~mlenergy.estimate.host_bound` and :func:`fit_weights`) weigh less in the fit; they are
still predicted and reported, and get their own prediction interval.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlenergy.errors import UserError
from mlenergy.estimate.calibration_report import HostBoundRule
from mlenergy.estimate.coefficients import (
    Coefficients,
    default_coefficients,
    interval_class,
    overhead_name,
)
from mlenergy.estimate.engines import CURRENT_ENGINE, LEGACY_ENGINE, fitted_overheads
from mlenergy.estimate.features import Features
from mlenergy.estimate.host_bound import MIN_HOST_BOUND_ROWS, host_bound_mask
from mlenergy.estimate.physics import predict
from mlenergy.estimate.requests import EstimateRequests
from mlenergy.estimate.table import PreparedTable, prepare_table
from mlenergy.estimate.task_defaults import (
    TASK_INPUT_TOKENS,
    has_value,
)

OVERHEAD_BOUNDS: dict[str, tuple[float, float]] = {
    "host_slowdown": (1.0, 10.0),
    "moe_layer_s": (1e-7, 1e-3),
    "worker_s": (1e-7, 5e-2),
}
"""Bounds of the engine profiles' fitted overhead terms (``engines.json``)."""


def _overheads(*terms: str) -> dict[str, tuple[float, float]]:
    """Bounds of every profile's fitted ``terms``, named ``<profile>.<term>``."""
    return {
        overhead_name(p, t): OVERHEAD_BOUNDS[t]
        for t in terms
        for p, u in fitted_overheads()
        if u == t
    }


# (name, lower bound, upper bound) of fitted coefficients; fitted in log space.
BOUNDS: dict[str, tuple[float, float]] = {
    "eta_mem": (0.2, 1.0),
    # Decode-only matmuls (a few hundred rows at most per replica): at least half of peak.
    # Left free the fit runs lower, using the compute-power term (u_comp grows as eta_comp
    # falls) for the large-batch power it lacks; fitted on time alone it lands at 0.5.
    "eta_comp": (0.5, 1.0),
    "eta_prefill": (0.05, 1.0),
    "step_s": (1e-5, 0.05),
    "layer_s": (1e-7, 5e-4),
    "moe_layer_s": (1e-7, 1e-3),
    "seq_s": (1e-7, 5e-4),
    "collective_s": (1e-6, 2e-4),
    "all_to_all_s": (1e-6, 5e-4),
    "p_base": (0.01, 1.0),
    "p_comp": (0.01, 1.5),
    "p_mem": (0.01, 1.5),
    **_overheads("host_slowdown"),
    "mem_ceiling": (3e12, 1e15),
    "moe_ceiling": (1e12, 1e15),
    "p_quant": (1e-3, 3.0),
    "prefill_layer_s": (1e-7, 2e-3),
    "mamba_prefill_s": (1e-7, 5e-3),
    "visual_token_s": (1e-9, 2e-4),
    **_overheads("moe_layer_s", "worker_s"),
    "fp8_moe_layer_s": (1e-7, 1e-3),
    "moe_tile_s": (1e-7, 1e-3),
    "seq_busy": (1e-3, 1.0),
    "moe_min_cols": (64.0, 1e5),
}

PRIORS: dict[str, tuple[float, float]] = {"eta_mem": (1.0, 1.0)}
"""Weak priors ``name: (centre, weight)``: a residual ``sqrt(weight) * log(value / centre)``.

They only settle directions the data leave flat. With measurements from a single GPU the
achieved fraction of datasheet bandwidth (``eta_mem``) and the GPU-independent streaming
ceiling (``mem_ceiling``, and ``moe_ceiling`` for the routed experts) are not separable (one
datasheet bandwidth gives one effective bandwidth), and the split the optimiser stops at
decided how the fit transferred to another GPU. The prior picks the split that the two-GPU
data choose anyway (``eta_mem`` = 1: the losses of latency-bound decode kernels sit in the
ceilings, not in a fraction of the pin rate); against the hundreds of data residuals it is
too weak to move an identified value."""

HOST_BOUND_WEIGHT = 0.1
"""Fit weight of rows matched by the host-bound rule (relative to 1)."""
LOSS = "cauchy"
"""Robust loss of the fit (``scipy.optimize.least_squares``)."""
LOSS_SCALE = 0.25
"""Residual (log) at which the robust loss starts to flatten."""
ITL_WEIGHT = 1.0
"""Weight of the inter-token-latency residuals relative to throughput and power."""
ENERGY_WEIGHT = 1.0
"""Weight of the energy-per-token residuals relative to throughput and power."""


def featurise(
    df: pd.DataFrame, configs_dir: str | Path | None = None
) -> tuple[Features, np.ndarray]:
    """Feature arrays for the rows of a reference-like frame, by the estimator's one path.

    The rows go through :func:`~mlenergy.estimate.table.prepare_table` (the checks and
    features of every estimate) without the memory fit rule: the runs were measured, so they
    fitted. A row the estimator refuses (no config, a layout it does not take) is left out.

    Args:
        df: Frame with ``config_id`` (or ``model_id``), ``gpu``, parallelism columns,
            ``precision``, ``task``, ``batch_size``, ``output_tokens`` and optionally
            ``input_tokens`` and ``legacy`` (the 2024 engine).
        configs_dir: Folder of model configs.

    Returns:
        The features of the rows that could be prepared, and their row positions.
    """
    prepared = _prepare(df, configs_dir)
    keep = np.flatnonzero(prepared.errors.ok())
    if not len(keep):
        raise UserError("no reference row could be prepared", "Check --reference and configs")
    return prepared.features.rows(keep), keep


def _prepare(df: pd.DataFrame, configs_dir: str | Path | None) -> PreparedTable:
    """The rows of a reference-like frame through the one path, without the fit rule."""
    model = df["config_id"] if "config_id" in df else df["model_id"]
    if "model_id" in df and "config_id" in df:
        model = df["config_id"].where(df["config_id"].fillna("").astype(str) != "", df["model_id"])
    legacy = df["legacy"].fillna(False).astype(bool) if "legacy" in df else False
    columns = ["gpu", "precision", "task", "batch_size", "output_tokens", "input_tokens"]
    columns += ["num_gpus", "tensor_parallel", "expert_parallel", "data_parallel"]
    columns += ["pipeline_parallel"]
    frame = df[[c for c in columns if c in df]].copy()
    frame["model"] = model
    frame["engine"] = np.where(legacy, LEGACY_ENGINE, CURRENT_ENGINE)
    return prepare_table(EstimateRequests.from_frame(frame), configs_dir, check_fit=False)


def row_errors(df: pd.DataFrame, configs_dir: str | Path | None = None) -> np.ndarray:
    """Why each row of a reference-like frame cannot be estimated (``""``: it can)."""
    return _prepare(df, configs_dir).errors.messages


def host_bound(df: pd.DataFrame, rule: HostBoundRule | None = None) -> np.ndarray:
    """Rows matched by the host-bound rule (inputs only).

    Args:
        df: Rows with ``gpu``, ``num_gpus`` and ``task``.
        rule: The rule (default: the shipped coefficients', the rule of the reference data).
    """
    rule = rule if rule is not None else default_coefficients().host_bound_rule
    n = len(df)
    gpu = df["gpu"].astype(str).to_numpy() if "gpu" in df else np.full(n, "")
    ngpu = df["num_gpus"].to_numpy(float) if "num_gpus" in df else np.zeros(n)
    task = df["task"].fillna("").astype(str).to_numpy() if "task" in df else np.full(n, "")
    return host_bound_mask(gpu, ngpu, task, rule)


def fit_weights(df: pd.DataFrame) -> np.ndarray | None:
    """Fit weights: every model group weighs the same; host-bound rows weigh less."""
    if "model_group" not in df:
        return None
    w = group_weights(df["model_group"])
    return w * np.where(host_bound(df), HOST_BOUND_WEIGHT, 1.0)


def itl_targets(df: pd.DataFrame) -> np.ndarray | None:
    """Measured median inter-token latency (s) of rows where it is a median step time.

    The v2 (legacy engine) tables publish a mean time per output token that includes
    prefill stalls, so their rows get NaN (not fitted).
    """
    if "itl_s" not in df:
        return None
    itl = pd.to_numeric(df["itl_s"], errors="coerce").to_numpy(float)
    legacy = df["legacy"].fillna(False).astype(bool).to_numpy() if "legacy" in df else False
    itl = np.where(legacy | ~(itl > 0), np.nan, itl)
    return itl if np.isfinite(itl).any() else None


LEGACY_COEFFICIENTS = tuple(
    overhead_name(p, t) for p, t in fitted_overheads() if p == LEGACY_ENGINE
)
"""Coefficients of the 2024 engine profile: only rows measured with it identify them."""


def unidentified(feat: Features, start: Coefficients | None = None) -> set[str]:
    """Coefficients that no row of ``feat`` can move; the fit keeps their start values.

    A coefficient is unidentified when setting it to either end of its :data:`BOUNDS` changes
    no prediction (throughput, power or median step) of any row: its feature is zero on every
    row, as the 2024-engine coefficients are without 2024-engine rows, the 2024 MoE cost
    without a 2024 MoE run, or the Mamba prefill cost without a hybrid. Left free such a
    coefficient is not merely useless: the bounded trust-region solver moves variables with
    a zero gradient away from their bounds, so it drifts (a cross-validation fold without
    Mixtral once left the 2024 MoE cost at ten times its fitted value) and slows the fit.

    Args:
        feat: Feature arrays of the rows to fit (see :func:`featurise`).
        start: The fit's starting coefficients (default: the code defaults).
    """
    if not len(feat):
        return set(BOUNDS)
    base = start or Coefficients()
    keys = ("throughput_tokens_per_s", "avg_power_w", "median_step_s")
    ref = predict(feat, base)
    out: set[str] = set()
    for name, (lo, hi) in BOUNDS.items():
        moved = False
        for value in (lo, hi):
            got = predict(feat, base.replace(**{name: value}))
            if any(
                not np.allclose(getattr(got, k), getattr(ref, k), rtol=1e-12, atol=0.0)
                for k in keys
            ):
                moved = True
                break
        if not moved:
            out.add(name)
    return out


def fit(
    feat: Features,
    throughput: np.ndarray,
    power: np.ndarray,
    start: Coefficients | None = None,
    weights: np.ndarray | None = None,
    tasks: np.ndarray | None = None,
    itl: np.ndarray | None = None,
) -> Coefficients:
    """Fit :data:`BOUNDS` coefficients to measured throughput (tokens/s) and power (W).

    Args:
        feat: Feature arrays (see :func:`featurise`).
        throughput: Measured output throughput in tokens per second.
        power: Measured average power in watts (sum over GPUs).
        start: Starting coefficients (default: the code defaults, ``Coefficients()``, so that a
            fit never starts from coefficients fitted on other rows: the fit has flat
            directions along which the start would carry over).
        weights: Per-row weights (default: all rows weigh the same).
        tasks: Per-row task label of rows whose prompt length is unknown (``""`` for rows
            with a known length). The mean prompt length of each task is fitted too.
        itl: Measured median inter-token latency in seconds (NaN where unknown), fitted to
            the median step time (:func:`~mlenergy.estimate.prediction.median_step`).

    Returns:
        The fitted coefficients.
    """
    from scipy.optimize import least_squares

    base = start or Coefficients()
    held = unidentified(feat, base)  # once: each look costs two predictions per coefficient
    names = [n for n in BOUNDS if n not in held]
    lo = np.log([BOUNDS[n][0] for n in names])
    hi = np.log([BOUNDS[n][1] for n in names])
    x0 = np.clip(np.log([float(getattr(base, n)) for n in names]), lo + 1e-9, hi - 1e-9)
    n_names = len(names)
    task_names: list[str] = []
    task_idx = np.full(len(throughput), -1)
    if tasks is not None:
        task_names = sorted({t for t in tasks if t})
        lookup = {t: i for i, t in enumerate(task_names)}
        task_idx = np.array([lookup.get(t, -1) for t in tasks])
        t0 = np.array(
            [
                max(float(np.median(feat.input_tokens[task_idx == i])), 20.0)
                for i in range(len(task_names))
            ]
        )
        # A fitted length may only shorten the built-in default: longer "effective" prompts
        # would stand in for other costs and make measured configurations look too big for
        # memory (KV cache at the mean context).
        cap = np.array(
            [float(TASK_INPUT_TOKENS.get(t, v)) for t, v in zip(task_names, t0, strict=True)]
        )
        lo = np.concatenate([lo, np.full(len(task_names), np.log(10.0))])
        hi = np.concatenate([hi, np.log(np.maximum(cap, 20.0))])
        x0 = np.concatenate([x0, np.clip(np.log(t0), lo[n_names:] + 1e-9, hi[n_names:] - 1e-9)])
    n_coef = len(names)
    priored = [n for n in PRIORS if n in names]
    prior_idx = np.array([names.index(n) for n in priored], dtype=int)
    prior_log = np.log([PRIORS[n][0] for n in priored])
    prior_w = np.sqrt([PRIORS[n][1] for n in priored])
    w = np.ones_like(throughput) if weights is None else np.sqrt(weights)
    log_thr, log_pow = np.log(throughput), np.log(power)
    log_itl: np.ndarray | None = None
    w_itl: np.ndarray | None = None
    if itl is not None and bool(np.isfinite(itl).any()):
        log_itl = np.log(np.where(np.isfinite(itl), itl, 1.0))
        w_itl = np.where(np.isfinite(itl), w, 0.0) * ITL_WEIGHT

    def with_tasks(x: np.ndarray) -> Features:
        if not task_names:
            return feat
        lengths = np.exp(x[n_coef:])
        in_tok = np.where(task_idx >= 0, lengths[np.maximum(task_idx, 0)], feat.input_tokens)
        return feat.replace(input_tokens=in_tok)

    def residuals(x: np.ndarray) -> np.ndarray:
        c = base.replace(**dict(zip(names, np.exp(x[:n_coef]), strict=True)))
        out = predict(with_tasks(x), c)
        r1 = np.log(out.throughput_tokens_per_s) - log_thr
        r2 = np.log(out.avg_power_w) - log_pow
        parts = [w * r1, w * r2, ENERGY_WEIGHT * w * (r2 - r1)]
        if w_itl is not None and log_itl is not None:
            parts.append(w_itl * (np.log(out.median_step_s) - log_itl))
        if prior_idx.size:
            parts.append(prior_w * (x[prior_idx] - prior_log))
        return np.concatenate(parts)

    # Cauchy loss: residuals beyond ~0.25 (log) count less and less, so that runs the
    # physics cannot explain (host-bound campaigns, engine stalls) do not bend it.
    sol = least_squares(residuals, x0, bounds=(lo, hi), loss=LOSS, f_scale=LOSS_SCALE)
    fitted: dict[str, object] = dict(
        zip(names, (float(v) for v in np.exp(sol.x[:n_coef])), strict=True)
    )
    if task_names:
        table = dict(base.task_input_tokens)
        table.update(
            {t: round(float(v)) for t, v in zip(task_names, np.exp(sol.x[n_coef:]), strict=True)}
        )
        fitted["task_input_tokens"] = table
    return base.replace(**fitted)


def group_weights(groups: pd.Series) -> np.ndarray:
    """Row weights giving every group the same total weight (big groups do not dominate)."""
    counts = groups.map(groups.value_counts())
    return (1.0 / counts.to_numpy(dtype=float)) * len(groups) / groups.nunique()


def calibrate(
    df: pd.DataFrame,
    configs_dir: str | Path | None = None,
    start: Coefficients | None = None,
    fit_tasks: bool = False,
) -> tuple[Coefficients, pd.DataFrame]:
    """Fit coefficients on a measurement frame and attach the in-sample fit statistics.

    Returns:
        The coefficients (with ``calibrated_gpus`` and ``fit_info``) and the rows used.
    """
    feat, keep = featurise(df, configs_dir)
    used = df.iloc[keep].reset_index(drop=True)
    wts = fit_weights(used)
    tasks = None
    if fit_tasks:
        explicit = used["input_tokens"].map(has_value) if "input_tokens" in used else False
        tasks = np.where(explicit, "", used["task"].fillna("").astype(str))
    coef = fit(
        feat,
        used["throughput_tokens_per_s"].to_numpy(float),
        used["avg_power_w"].to_numpy(float),
        start=start,
        weights=wts,
        tasks=tasks,
        itl=itl_targets(used),
    )
    gpus = tuple(sorted(set(used["gpu"])))
    coef = coef.replace(
        calibrated_gpus=gpus,
        host_bound_rule=coef.host_bound_rule or default_coefficients().host_bound_rule,
        fit_info={"rows": len(used), "models": int(used["model_group"].nunique())},
    )
    return coef, used


def coefficient_table(c: Coefficients) -> list[tuple[str, float]]:
    """(name, value) pairs of the numeric coefficients, for display."""
    return [
        (f.name, float(getattr(c, f.name)))
        for f in fields(c)
        if isinstance(getattr(c, f.name), int | float)
    ]


def interval_quantiles(rows: pd.DataFrame) -> dict[str, Any]:
    """Prediction-interval quantiles from cross-validated rows.

    Two classes are kept apart. The common interval (``log_q05``, ``log_q95``) comes from the
    rows outside the host-bound rule (:func:`host_bound`). The host-bound rows
    get their own (``log_q05_host``, ``log_q95_host``), or none when fewer than
    :data:`~mlenergy.estimate.host_bound.MIN_HOST_BOUND_ROWS` were cross-validated.

    Args:
        rows: Cross-validated rows with ``log_ratio_energy`` (log of measured over predicted
            energy per token) and the ``gpu``, ``num_gpus`` and ``task`` inputs.
    """
    logs = rows["log_ratio_energy"].to_numpy(float)
    hb = host_bound(rows)
    common = logs[~hb] if (~hb).any() else logs
    out: dict[str, Any] = {
        "log_q05": float(np.quantile(common, 0.05)),
        "log_q95": float(np.quantile(common, 0.95)),
        "log_q05_host": None,
        "log_q95_host": None,
    }
    if hb.sum() >= MIN_HOST_BOUND_ROWS:
        out["log_q05_host"] = float(np.quantile(logs[hb], 0.05))
        out["log_q95_host"] = float(np.quantile(logs[hb], 0.95))
    out["interval_by_class"] = class_quantiles(rows, logs, ~hb)
    return out


MIN_CLASS_ROWS = 40
"""Fewest cross-validated rows of a ``<gpu>/<family>`` class for an interval of its own."""


def class_quantiles(rows: pd.DataFrame, logs: np.ndarray, keep: np.ndarray) -> dict:
    """(5th, 95th) percentile log errors per ``<gpu>/<family>`` class with enough rows.

    Args:
        rows: Cross-validated rows with ``gpu`` and ``kind`` (none: no classes).
        logs: Their log(measured / predicted) energy per token.
        keep: Rows to use (those outside the host-bound rule).
    """
    if "gpu" not in rows or "kind" not in rows:
        return {}
    keys = [interval_class(g, k) for g, k in zip(rows["gpu"], rows["kind"], strict=True)]
    out = {}
    for key in sorted(set(keys)):
        mask = keep & (np.array(keys) == key)
        if mask.sum() >= MIN_CLASS_ROWS:
            out[key] = (float(np.quantile(logs[mask], 0.05)), float(np.quantile(logs[mask], 0.95)))
    return out
