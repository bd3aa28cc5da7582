"""Comparisons of the measured dense-versus-MoE study, computed from its rows with uncertainty.

Each function takes the study's rows (one per model x GPU x task: the lowest-energy
configuration within the latency deadline, with its quality; see
:func:`mlenergy.studies.measured.attach_quality`) and returns a table:

* :func:`quality_frontier`: the Pareto frontier of quality against energy per response;
* :func:`matched_pairs`: dense and MoE models within a few quality points of each other, with
  the MoE/dense energy ratio and a bootstrap interval over their configurations;
* :func:`parameter_fits`: does energy per token follow active or total parameters (log-log
  fits per family, bootstrap over models);
* :func:`sparse_claim`: the claim behind DeepSeek-R1 (many total, few active parameters,
  better quality than dense models at equal or lower cost per token), tested on the models of
  that shape that were measured.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from mlenergy.analysis.bootstrap import bootstrap_ratio_ci
from mlenergy.analysis.frontier import pareto_mask

MATCH_POINTS = {"%": 3.0, "elo": 15.0}
"""How close two quality scores must be to count as matched: points of % or of Elo."""

SPARSE_ACTIVE_FRACTION = 0.1
"""An MoE model with at most this share of its parameters active counts as sparse."""

SPARSE_MIN_TOTAL = 100e9
"""... and at least this many parameters in total (the DeepSeek-R1 shape: 671B / 37B)."""

MIN_FIT_MODELS = 3
"""Fewest models a log-log fit is computed on."""

PAIR_COLUMNS = (
    "task", "gpu", "benchmark", "dense", "moe", "dense_score", "moe_score", "energy_ratio",
    "ratio_mean_configs", "ratio_ci_low", "ratio_ci_high", "configs_dense", "configs_moe",
)  # fmt: skip
"""Columns of :func:`matched_pairs` (present even when no pair is found)."""

FIT_COLUMNS = (
    "task", "gpu", "family", "predictor", "models", "slope", "slope_ci_low", "slope_ci_high", "r2",
)  # fmt: skip
"""Columns of :func:`parameter_fits` (present even when too few models allow a fit)."""

CLAIM_COLUMNS = (
    "task", "gpu", "moe", "dense", "moe_total_b", "moe_active_b", "dense_total_b",
    "quality_delta", "energy_per_token_ratio", "claim_holds",
)  # fmt: skip
"""Columns of :func:`sparse_claim` (present even when no model has the sparse shape)."""


def _with_quality(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows["quality_score"].notna() & rows["energy_per_response_j"].notna()
    return rows[ok]


def quality_frontier(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows on the Pareto frontier (higher quality, lower energy per response), per task x GPU.

    Returns:
        The rows with quality, with an ``on_frontier`` column, sorted by task, GPU and energy.
    """
    parts = []
    for _, g in _with_quality(rows).groupby(["task", "gpu"], sort=True):
        g = g.copy()
        g["on_frontier"] = pareto_mask(
            g["energy_per_response_j"].to_numpy(),
            g["quality_score"].to_numpy(),
            minimize_x=True,
            minimize_y=False,
        )
        parts.append(g.sort_values("energy_per_response_j"))
    if not parts:
        return rows.iloc[0:0].assign(on_frontier=pd.Series(dtype=bool))
    return pd.concat(parts, ignore_index=True)


def _tolerance(row: pd.Series) -> float:
    return MATCH_POINTS["%"] if row["quality_is_accuracy"] else MATCH_POINTS["elo"]


def matched_pairs(
    rows: pd.DataFrame, configs: pd.DataFrame, itl_limit_ms: float, seed: int = 0
) -> pd.DataFrame:
    """Dense-MoE pairs of one task and GPU whose quality is within :data:`MATCH_POINTS`.

    The ratio is MoE over dense energy per response at each model's best configuration; the
    interval resamples each model's configurations within the deadline (bootstrap of the
    ratio of their mean energies), so it says how much the figure depends on which
    configuration is run.

    Args:
        rows: The study's rows.
        configs: Every measured configuration (:func:`mlenergy.studies.measured.measured_frame`).
        itl_limit_ms: The deadline, milliseconds.
        seed: Bootstrap seed.

    Returns:
        One row per pair: ``task``, ``gpu``, ``benchmark``, ``dense``, ``moe``,
        ``dense_score``, ``moe_score``, ``energy_ratio``, ``ratio_mean_configs``,
        ``ratio_ci_low``, ``ratio_ci_high``, ``configs_dense``, ``configs_moe``.
    """
    out = []
    within = configs[configs["median_itl_ms"] <= itl_limit_ms]
    for (task, gpu), g in _with_quality(rows).groupby(["task", "gpu"], sort=True):
        dense, moe = g[g["arch"] == "dense"], g[g["arch"] == "moe"]
        for _, d in dense.iterrows():
            for _, m in moe.iterrows():
                if abs(d["quality_score"] - m["quality_score"]) > _tolerance(d):
                    continue
                pick = within[(within["task"] == task) & (within["gpu"] == gpu)]
                ed = pick.loc[pick["model_id"] == d["model_id"], "energy_per_response_j"]
                em = pick.loc[pick["model_id"] == m["model_id"], "energy_per_response_j"]
                ci = bootstrap_ratio_ci(em, ed, seed=seed)
                out.append(
                    {
                        "task": task,
                        "gpu": gpu,
                        "benchmark": d["quality_benchmark"],
                        "dense": d["model_id"],
                        "moe": m["model_id"],
                        "dense_score": d["quality_score"],
                        "moe_score": m["quality_score"],
                        "energy_ratio": m["energy_per_response_j"] / d["energy_per_response_j"],
                        "ratio_mean_configs": ci.estimate if ci else math.nan,
                        "ratio_ci_low": ci.low if ci else math.nan,
                        "ratio_ci_high": ci.high if ci else math.nan,
                        "configs_dense": len(ed),
                        "configs_moe": len(em),
                    }
                )
    return pd.DataFrame(out, columns=list(PAIR_COLUMNS))


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Slope and R^2 of ``y = a + b x`` (least squares)."""
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (intercept + slope * x)
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / total if total > 0 else math.nan
    return float(slope), r2


def _bootstrap_fit(
    x: np.ndarray, y: np.ndarray, seed: int, n: int = 1000
) -> tuple[float, float, float, float]:
    """Slope, its 95% interval, and R^2 of a log-log fit, resampling models."""
    slope, r2 = _fit(x, y)
    rng = np.random.default_rng(seed)
    slopes = []
    for _ in range(n):
        idx = rng.integers(0, x.size, x.size)
        if np.unique(x[idx]).size < 2:
            continue
        slopes.append(_fit(x[idx], y[idx])[0])
    if not slopes:
        return slope, math.nan, math.nan, r2
    lo, hi = np.quantile(slopes, [0.025, 0.975])
    return slope, float(lo), float(hi), r2


def parameter_fits(rows: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Fits of log energy per token against log active and log total parameters.

    Per task x GPU and per family (``dense``, ``moe``, and ``all`` models together), with at
    least :data:`MIN_FIT_MODELS` models. A slope near 1 means energy per token grows in
    proportion to that count; the better predictor has the higher R^2 over all models.

    Returns:
        One row per task x GPU x family x predictor (``active`` or ``total``): ``models``,
        ``slope``, ``slope_ci_low``, ``slope_ci_high``, ``r2``.
    """
    out = []
    have = rows[rows["energy_per_token_j"].notna()]
    for (task, gpu), g in have.groupby(["task", "gpu"], sort=True):
        families = {"dense": g[g["arch"] == "dense"], "moe": g[g["arch"] == "moe"], "all": g}
        for family, sub in families.items():
            if len(sub) < MIN_FIT_MODELS:
                continue
            y = np.log(sub["energy_per_token_j"].to_numpy(dtype=float))
            for predictor in ("active", "total"):
                x = np.log(sub[f"{predictor}_params"].to_numpy(dtype=float))
                if np.unique(x).size < 2:
                    continue
                slope, lo, hi, r2 = _bootstrap_fit(x, y, seed)
                out.append(
                    {
                        "task": task,
                        "gpu": gpu,
                        "family": family,
                        "predictor": predictor,
                        "models": len(sub),
                        "slope": slope,
                        "slope_ci_low": lo,
                        "slope_ci_high": hi,
                        "r2": r2,
                    }
                )
    return pd.DataFrame(out, columns=list(FIT_COLUMNS))


def sparse_claim(rows: pd.DataFrame) -> pd.DataFrame:
    """Each sparse MoE model against each dense model of the same task and GPU.

    Sparse: MoE, at least :data:`SPARSE_MIN_TOTAL` parameters, at most
    :data:`SPARSE_ACTIVE_FRACTION` of them active (DeepSeek-R1's shape). The claim holds for a
    pair when the MoE model scores higher and costs no more energy per token.

    Returns:
        One row per pair: ``task``, ``gpu``, ``moe``, ``dense``, ``moe_total_b``,
        ``moe_active_b``, ``dense_total_b``, ``quality_delta`` (MoE minus dense, points),
        ``energy_per_token_ratio`` (MoE / dense), ``claim_holds``.
    """
    out = []
    g_all = _with_quality(rows)
    for (task, gpu), g in g_all.groupby(["task", "gpu"], sort=True):
        share = g["active_params"] / g["total_params"]
        sparse = g[
            (g["arch"] == "moe")
            & (g["total_params"] >= SPARSE_MIN_TOTAL)
            & (share <= SPARSE_ACTIVE_FRACTION)
        ]
        for _, m in sparse.iterrows():
            for _, d in g[g["arch"] == "dense"].iterrows():
                ratio = m["energy_per_token_j"] / d["energy_per_token_j"]
                delta = m["quality_score"] - d["quality_score"]
                out.append(
                    {
                        "task": task,
                        "gpu": gpu,
                        "moe": m["model_id"],
                        "dense": d["model_id"],
                        "moe_total_b": m["total_params"] / 1e9,
                        "moe_active_b": m["active_params"] / 1e9,
                        "dense_total_b": d["total_params"] / 1e9,
                        "quality_delta": delta,
                        "energy_per_token_ratio": ratio,
                        "claim_holds": bool(delta > 0 and ratio <= 1.0),
                    }
                )
    return pd.DataFrame(out, columns=list(CLAIM_COLUMNS))


DEADLINES_MS = (25.0, 50.0, 100.0, 250.0)
"""Median ITL deadlines of the per-deadline table, milliseconds (the study's own is added)."""


def deadline_table(
    configs: pd.DataFrame, rows: pd.DataFrame, deadlines_ms: tuple[float, ...] = DEADLINES_MS
) -> pd.DataFrame:
    """Energy per correct answer at the lowest-energy configuration within each deadline.

    Args:
        configs: Every measured configuration.
        rows: The study's rows (their quality is reused: it does not depend on the deadline).
        deadlines_ms: Deadlines on the median inter-token latency, milliseconds.

    Returns:
        One row per model x GPU x task with an accuracy: ``model_id``, ``arch``, ``gpu``,
        ``task``, ``quality_score`` and one column per deadline (``<= 50 ms``: joules per
        correct answer, NaN where no configuration meets it).
    """
    from mlenergy.studies.measured import best_configurations

    keys = ["model_id", "gpu", "task"]
    acc = rows[rows["quality_is_accuracy"].astype(bool)]
    if acc.empty:
        return pd.DataFrame(columns=[*keys, "arch", "quality_score"])
    table = acc[["model_id", "arch", "gpu", "task", "quality_score"]].copy()
    wanted = configs.merge(acc[keys], on=keys)
    for limit in sorted(set(deadlines_ms)):
        best = best_configurations(wanted, limit)[[*keys, "energy_per_response_j"]]
        merged = table[keys].merge(best, on=keys, how="left")
        table[f"<= {limit:g} ms"] = merged["energy_per_response_j"].to_numpy() / (
            table["quality_score"].to_numpy() / 100
        )
    return table.sort_values(["task", "gpu", "model_id"]).reset_index(drop=True)
