"""Comparisons of the measured dense-versus-MoE study, computed from its rows with uncertainty.

Each function takes the study's rows (one per model x GPU x task: the lowest-energy
configuration within the latency deadline, with its quality; see
:func:`mlenergy.studies.measured.attach_quality`) and returns a table:

* :func:`quality_frontier`: the Pareto frontier of quality against energy per response;
* :func:`matched_pairs`: dense and MoE models within a few quality points of each other, with
  the MoE/dense energy ratio at their best configurations and the range that same ratio spans
  over every pairing of their configurations within the deadline (a designed grid, not a
  sample, so a range rather than a confidence interval);
* :func:`parameter_fits`: how energy per token varies with active or total parameters once the
  deployment's size (its GPU count, which grows with the model) has its own term (log-log least
  squares; BF16/FP8 copies of one model merged into one point);
* :func:`sparse_claim`: the claim behind DeepSeek-R1 (many total, few active parameters,
  better quality than dense models at equal or lower cost per token), tested on the models of
  that shape that were measured.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from mlenergy.analysis.frontier import pareto_mask
from mlenergy.analysis.model_ids import precision_base
from mlenergy.studies.measured import best_configurations

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
    "ratio_range_low", "ratio_range_high", "configs_dense", "configs_moe",
)  # fmt: skip
"""Columns of :func:`matched_pairs` (present even when no pair is found)."""

FIT_COLUMNS = (
    "task", "gpu", "family", "predictor", "points", "model_ids", "slope_params",
    "slope_params_ci_low", "slope_params_ci_high", "slope_gpus", "r2_params_alone",
    "r2_gpus_alone", "r2_both", "adj_r2_params_alone", "adj_r2_gpus_alone", "adj_r2_both",
    "params_beyond_gpus", "corr_params_gpus", "params_ahead_share", "separated",
)  # fmt: skip
"""Columns of :func:`parameter_fits` (present even when too few models allow a fit).

``r2_*`` are the shares of the variance of log energy per token explained by log parameters
alone, log GPU count alone, and both; ``adj_r2_*`` the same adjusted for the number of
regressors over ``points`` (``1 - (1 - R^2)(n - 1)/(n - k - 1)``, NaN where ``n <= k + 1``);
``params_beyond_gpus = r2_both - r2_gpus_alone`` is what the parameter count explains that the
GPU count does not. ``params_ahead_share`` is the share of bootstrap resamples of the models in
which parameters alone fit better (higher R^2) than GPU count alone; ``separated`` is true only
when one of the two single-regressor fits is ahead in at least :data:`SEPARATION_SHARE` of
them (a two-sided 5% level: neither is expected to win beforehand); else the data cannot
separate the two."""

SEPARATION_SHARE = 0.975
"""Share of bootstrap resamples in which one single-regressor fit must beat the other for the
data to separate them (two-sided, 5%)."""

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


def matched_pairs(rows: pd.DataFrame, configs: pd.DataFrame, itl_limit_ms: float) -> pd.DataFrame:
    """Dense-MoE pairs of one task and GPU whose quality is within :data:`MATCH_POINTS`.

    ``energy_ratio`` is MoE over dense energy per response, each model at its best
    configuration within the deadline. ``ratio_range_low``/``high`` are the smallest and
    largest values that same ratio takes over every pairing of the two models' configurations
    within the deadline (MoE's cheapest over dense's dearest, and the reverse): how much the
    ratio depends on the configurations chosen. The configurations are a designed grid, not a
    sample, so this is a range, not a confidence interval.

    Args:
        rows: The study's rows.
        configs: Every measured configuration (:func:`mlenergy.studies.measured.measured_frame`).
        itl_limit_ms: The deadline, milliseconds.

    Returns:
        One row per pair: ``task``, ``gpu``, ``benchmark``, ``dense``, ``moe``,
        ``dense_score``, ``moe_score``, ``energy_ratio``, ``ratio_range_low``,
        ``ratio_range_high``, ``configs_dense``, ``configs_moe``.
    """
    out = []
    within = configs[configs["median_itl_ms"] <= itl_limit_ms]
    for (task, gpu), g in _with_quality(rows).groupby(["task", "gpu"], sort=True):
        dense, moe = g[g["arch"] == "dense"], g[g["arch"] == "moe"]
        pick = within[(within["task"] == task) & (within["gpu"] == gpu)]
        for _, d in dense.iterrows():
            for _, m in moe.iterrows():
                if abs(d["quality_score"] - m["quality_score"]) > _tolerance(d):
                    continue
                ed = pick.loc[pick["model_id"] == d["model_id"], "energy_per_response_j"]
                em = pick.loc[pick["model_id"] == m["model_id"], "energy_per_response_j"]
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
                        "ratio_range_low": em.min() / ed.max() if len(ed) else math.nan,
                        "ratio_range_high": em.max() / ed.min() if len(ed) else math.nan,
                        "configs_dense": len(ed),
                        "configs_moe": len(em),
                    }
                )
    return pd.DataFrame(out, columns=list(PAIR_COLUMNS))


def _r2(y: np.ndarray, design: np.ndarray) -> tuple[np.ndarray, float]:
    """Least-squares coefficients of ``y`` on ``design`` (intercept included) and the R^2."""
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    resid = y - design @ coef
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / total if total > 0 else math.nan
    return coef, r2


def adjusted_r2(r2: float, n: int, k: int) -> float:
    """R^2 adjusted for ``k`` regressors over ``n`` points (NaN where ``n <= k + 1``)."""
    if n <= k + 1 or not math.isfinite(r2):
        return math.nan
    return 1.0 - (1.0 - r2) * (n - 1) / (n - k - 1)


def _ahead_share(x: np.ndarray, g: np.ndarray, y: np.ndarray, seed: int, n: int = 1000) -> float:
    """Share of bootstrap resamples (over models) where ``x`` alone beats ``g`` alone in R^2.

    A one-regressor least-squares fit's R^2 is the squared correlation, computed for all
    resamples at once; resamples where either regressor takes one value are left out.
    """
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, (n, x.size))
    xs, gs, ys = x[idx], g[idx], y[idx]

    def r2(a: np.ndarray) -> np.ndarray:
        da, dy = a - a.mean(axis=1, keepdims=True), ys - ys.mean(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (da * dy).sum(1) ** 2 / ((da**2).sum(1) * (dy**2).sum(1))

    r2_x, r2_g = r2(xs), r2(gs)
    ok = (np.ptp(xs, axis=1) > 0) & (np.ptp(gs, axis=1) > 0) & np.isfinite(r2_x + r2_g)
    return float((r2_x[ok] > r2_g[ok]).mean()) if ok.sum() >= n // 2 else math.nan


def _design(*columns: np.ndarray) -> np.ndarray:
    return np.column_stack([np.ones_like(columns[0]), *columns])


def _merge_precisions(sub: pd.DataFrame, predictor: str) -> pd.DataFrame:
    """One point per model: BF16/FP8/... copies of a model averaged in log space."""
    frame = pd.DataFrame(
        {
            "base": [precision_base(m) for m in sub["model_id"]],
            "model_id": sub["model_id"].to_numpy(),
            "x": np.log(sub[f"{predictor}_params"].to_numpy(dtype=float)),
            "g": np.log(sub["num_gpus"].to_numpy(dtype=float)),
            "y": np.log(sub["energy_per_token_j"].to_numpy(dtype=float)),
        }
    )
    return frame.groupby("base", sort=True).agg(
        x=("x", "mean"), g=("g", "mean"), y=("y", "mean"), ids=("model_id", "nunique")
    )


def _slope_interval(x: np.ndarray, g: np.ndarray, y: np.ndarray, seed: int, n: int = 1000):
    """95% percentile-bootstrap interval of the parameter slope (resampling models).

    All resamples are solved at once; resamples where a regressor takes one value, or whose
    design is rank-deficient, are left out.
    """
    rng = np.random.default_rng(seed)
    both = np.unique(g).size > 1
    idx = rng.integers(0, x.size, (n, x.size))
    xs, gs, ys = x[idx], g[idx], y[idx]
    ok = np.ptp(xs, axis=1) > 0
    columns = [np.ones_like(xs), xs]
    if both:
        ok &= np.ptp(gs, axis=1) > 0
        columns.append(gs)
    design = np.stack(columns, axis=2)
    ok &= np.linalg.matrix_rank(design) == design.shape[2]
    if ok.sum() < n // 2:
        return math.nan, math.nan
    d = design[ok]  # least squares by SVD, truncated as numpy.linalg.lstsq truncates
    cutoff = np.finfo(float).eps * max(d.shape[1:])
    slopes = (np.linalg.pinv(d, rcond=cutoff) @ ys[ok][..., None])[:, 1, 0]
    lo, hi = np.quantile(slopes, [0.025, 0.975])
    return float(lo), float(hi)


def parameter_fits(rows: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Log energy per token against log parameters with log GPU count as its own term.

    Per task x GPU and per family (``dense``, ``moe``, and ``all`` models together), with at
    least :data:`MIN_FIT_MODELS` points once the BF16/FP8 copies of one model are merged (their
    logs averaged: they are not independent points). For each predictor (``active`` or
    ``total`` parameters) three least-squares fits are made, parameters alone, GPU count alone
    and both, and their R^2 reported; the slope of the parameters is the one of the two-term fit
    (with a bootstrap interval over models). Larger models run on more GPUs in these
    deployments, so the two single-regressor fits are read side by side, adjusted for their
    number of points, with how the two regressors correlate and whether bootstrap resamples of
    the models keep one ahead of the other (``separated``); with 5-11 models correlated at
    0.85-0.99 they rarely do.

    Returns:
        One row per task x GPU x family x predictor (:data:`FIT_COLUMNS`).
    """
    out = []
    have = rows[rows["energy_per_token_j"].notna()]
    for (task, gpu), g in have.groupby(["task", "gpu"], sort=True):
        families = {"dense": g[g["arch"] == "dense"], "moe": g[g["arch"] == "moe"], "all": g}
        for family, sub in families.items():
            for predictor in ("active", "total"):
                pts = _merge_precisions(sub, predictor)
                if len(pts) < MIN_FIT_MODELS or pts["x"].nunique() < 2:
                    continue
                x, lg, y = (pts[c].to_numpy(dtype=float) for c in ("x", "g", "y"))
                coef_x, r2_x = _r2(y, _design(x))
                varied = np.unique(lg).size > 1
                n = len(pts)
                if varied and np.linalg.matrix_rank(_design(x, lg)) == 3:
                    coef, r2_both = _r2(y, _design(x, lg))
                    r2_g = _r2(y, _design(lg))[1]
                    slope, slope_g = float(coef[1]), float(coef[2])
                    corr = float(np.corrcoef(x, lg)[0, 1])
                    adj_both = adjusted_r2(r2_both, n, 2)
                    ahead = _ahead_share(x, lg, y, seed)
                else:
                    slope, slope_g, r2_both, r2_g, corr = coef_x[1], math.nan, r2_x, 0.0, math.nan
                    adj_both, ahead = adjusted_r2(r2_x, n, 1), math.nan
                lo, hi = _slope_interval(x, lg, y, seed)
                out.append(
                    {
                        "task": task,
                        "gpu": gpu,
                        "family": family,
                        "predictor": predictor,
                        "points": len(pts),
                        "model_ids": int(pts["ids"].sum()),
                        "slope_params": float(slope),
                        "slope_params_ci_low": lo,
                        "slope_params_ci_high": hi,
                        "slope_gpus": slope_g,
                        "r2_params_alone": r2_x,
                        "r2_gpus_alone": r2_g,
                        "r2_both": r2_both,
                        "adj_r2_params_alone": adjusted_r2(r2_x, n, 1),
                        "adj_r2_gpus_alone": adjusted_r2(r2_g, n, 1) if varied else math.nan,
                        "adj_r2_both": adj_both,
                        "params_beyond_gpus": r2_both - r2_g,
                        "corr_params_gpus": corr,
                        "params_ahead_share": ahead,
                        "separated": bool(
                            math.isfinite(ahead) and max(ahead, 1 - ahead) >= SEPARATION_SHARE
                        ),
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
