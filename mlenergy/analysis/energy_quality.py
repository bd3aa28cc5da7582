"""Energy per unit of quality: iso-quality interpolation, iso-energy quality, efficiency.

Quality here is perplexity (lower is better); every function interpolates in log-perplexity,
in which training curves are close to linear over short spans. Energies are joules.

Figures:
    * training energy to reach a target perplexity (:func:`energy_to_reach`),
    * perplexity reached for a training-energy budget (:func:`perplexity_at_energy`),
    * inference cost (e.g. joules per token) at a target perplexity along a family's Pareto
      frontier (:func:`cost_at_quality`),
    * tokens per second per watt (= tokens per joule, :func:`tokens_per_joule`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from mlenergy.analysis.bootstrap import bootstrap_ci, bootstrap_ratio_ci
from mlenergy.analysis.frontier import pareto_mask


def _arrays(
    x: Sequence[float] | np.ndarray | pd.Series, y: Sequence[float] | np.ndarray | pd.Series
) -> tuple[np.ndarray, np.ndarray]:
    xs = np.asarray(x, dtype=float).reshape(-1)
    ys = np.asarray(y, dtype=float).reshape(-1)
    if xs.shape != ys.shape:
        raise ValueError("x and y differ in length")
    ok = ~(np.isnan(xs) | np.isnan(ys))
    return xs[ok], ys[ok]


def energy_to_reach(
    energy_j: Sequence[float] | np.ndarray | pd.Series,
    perplexity: Sequence[float] | np.ndarray | pd.Series,
    target_perplexity: float,
) -> float | None:
    """Training energy at which a curve first reaches ``target_perplexity``.

    Points are taken in order of energy; between the last checkpoint above the target and the
    first at or below it, log-perplexity is interpolated linearly in energy.

    Args:
        energy_j: Training energy so far at each checkpoint, joules.
        perplexity: Validation perplexity at each checkpoint.
        target_perplexity: The quality to reach.

    Returns:
        Joules, or ``None`` if the curve never reaches the target.
    """
    e, p = _arrays(energy_j, perplexity)
    if e.size == 0 or target_perplexity <= 0:
        return None
    order = np.argsort(e, kind="stable")
    e, p = e[order], p[order]
    hit = np.flatnonzero(p <= target_perplexity)
    if hit.size == 0:
        return None
    i = int(hit[0])
    if i == 0:
        return float(e[0])
    lp0, lp1, lt = math.log(p[i - 1]), math.log(p[i]), math.log(target_perplexity)
    frac = (lp0 - lt) / (lp0 - lp1) if lp0 != lp1 else 1.0
    return float(e[i - 1] + frac * (e[i] - e[i - 1]))


def perplexity_at_energy(
    energy_j: Sequence[float] | np.ndarray | pd.Series,
    perplexity: Sequence[float] | np.ndarray | pd.Series,
    budget_j: float,
) -> float | None:
    """Validation perplexity a training curve has reached after spending ``budget_j`` joules.

    Args:
        energy_j: Training energy so far at each checkpoint, joules.
        perplexity: Validation perplexity at each checkpoint.
        budget_j: Energy budget in joules.

    Returns:
        The perplexity (log-linear interpolation between checkpoints), or ``None`` if the
        budget lies outside the curve.
    """
    e, p = _arrays(energy_j, perplexity)
    if e.size == 0:
        return None
    order = np.argsort(e, kind="stable")
    e, p = e[order], p[order]
    if budget_j < e[0] or budget_j > e[-1]:
        return None
    return float(math.exp(np.interp(budget_j, e, np.log(p))))


def common_target_perplexity(final_perplexities: Sequence[float] | np.ndarray | pd.Series) -> float:
    """The best perplexity every model reached: the worst (largest) final perplexity.

    Args:
        final_perplexities: Final validation perplexity of each model.

    Returns:
        The iso-quality target.
    """
    arr = np.asarray(final_perplexities, dtype=float)
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        raise ValueError("no final perplexity to compare")
    return float(arr.max())


def cost_at_quality(
    perplexity: Sequence[float] | np.ndarray | pd.Series,
    cost: Sequence[float] | np.ndarray | pd.Series,
    target_perplexity: float,
    *,
    interpolate: bool = True,
) -> float | None:
    """Cheapest cost (e.g. joules per token) of reaching ``target_perplexity`` or better.

    The Pareto frontier of ``(perplexity, cost)`` (both minimised) is a staircase where better
    quality costs more. A target at or above the frontier's worst perplexity costs what the
    cheapest frontier point costs (a better model is acceptable); a target inside the
    frontier's range is interpolated linearly in log-perplexity between the two frontier
    points around it (``interpolate=True``) or costs the next better point (``False``); a
    target better than every point has no answer.

    Args:
        perplexity: Quality of each model.
        cost: Cost of each model (any unit, e.g. J/token).
        target_perplexity: The iso-quality point.
        interpolate: Interpolate between frontier points instead of taking the step.

    Returns:
        The cost, or ``None`` if no model reaches the target.
    """
    p, c = _arrays(perplexity, cost)
    if p.size == 0 or target_perplexity <= 0:
        return None
    mask = pareto_mask(p, c)
    p, c = p[mask], c[mask]
    order = np.argsort(p, kind="stable")
    p, c = p[order], c[order]  # perplexity ascending, cost descending
    tol = 1e-9 * max(1.0, target_perplexity)
    if target_perplexity < p[0] - tol:
        return None
    if target_perplexity >= p[-1] - tol:
        return float(c[-1])
    if not interpolate:
        return float(c[np.flatnonzero(p <= target_perplexity + tol)[-1]])
    return float(np.interp(math.log(target_perplexity), np.log(p), c))


def tokens_per_joule(
    throughput_tokens_per_s: float | None, avg_power_w: float | None
) -> float | None:
    """Tokens per second per watt (identical to tokens per joule).

    Args:
        throughput_tokens_per_s: Tokens per second.
        avg_power_w: Average power in watts.

    Returns:
        Tokens per joule, or ``None`` if either input is missing or the power is zero.
    """
    if throughput_tokens_per_s is None or avg_power_w is None:
        return None
    if not (math.isfinite(throughput_tokens_per_s) and math.isfinite(avg_power_w)):
        return None
    if avg_power_w <= 0:
        return None
    return float(throughput_tokens_per_s / avg_power_w)


def curve_metrics(
    checkpoints: pd.DataFrame,
    *,
    target_perplexity: float,
    budget_j: float | None,
    by: str = "run_id",
) -> pd.DataFrame:
    """Per training run: energy to reach the target perplexity and perplexity at a budget.

    Args:
        checkpoints: One row per checkpoint with ``energy_j`` and ``val_perplexity`` and the
            ``by`` column (see :func:`mlenergy.analysis.tables.checkpoints_frame`).
        target_perplexity: Iso-quality target.
        budget_j: Iso-energy budget in joules (``None``: skip that column's values).
        by: Column identifying one curve.

    Returns:
        One row per curve: ``by``, ``train_energy_j_to_target``, ``val_perplexity_at_budget``.
    """
    rows = []
    for key, sub in checkpoints.groupby(by, sort=False):
        sub = sub.sort_values("step")
        rows.append(
            {
                by: key,
                "train_energy_j_to_target": energy_to_reach(
                    sub["energy_j"], sub["val_perplexity"], target_perplexity
                ),
                "val_perplexity_at_budget": (
                    perplexity_at_energy(sub["energy_j"], sub["val_perplexity"], budget_j)
                    if budget_j is not None
                    else None
                ),
            }
        )
    return pd.DataFrame(rows, columns=[by, "train_energy_j_to_target", "val_perplexity_at_budget"])


def _per_seed_quality(training: pd.DataFrame, quality: pd.DataFrame) -> pd.DataFrame:
    """Final validation perplexity per (variant, seed): quality records, else last checkpoint."""
    base = training[["variant", "seed", "run_id", "final_val_perplexity"]].copy()
    if not quality.empty and {"variant", "seed", "metric", "value"} <= set(quality.columns):
        q = quality[quality["metric"] == "perplexity"][["variant", "seed", "value"]]
        q = q.groupby(["variant", "seed"])["value"].mean().reset_index()
        base = base.merge(q, on=["variant", "seed"], how="left")
        base["final_val_perplexity"] = base["value"].fillna(base["final_val_perplexity"])
        base = base.drop(columns=["value"])
    return base


def _reference_batch(inference: pd.DataFrame, batch_size: int | None) -> pd.DataFrame:
    if inference.empty:
        return inference
    b = batch_size if batch_size is not None else int(inference["batch_size"].max())
    return inference[inference["batch_size"] == b]


def per_seed_table(
    training: pd.DataFrame,
    checkpoints: pd.DataFrame,
    inference: pd.DataFrame,
    quality: pd.DataFrame,
    *,
    batch_size: int | None = None,
    target_perplexity: float | None = None,
    budget_j: float | None = None,
) -> pd.DataFrame:
    """One row per trained model instance (variant and seed) with its energy and quality.

    Args:
        training: :func:`mlenergy.analysis.tables.training_frame`.
        checkpoints: :func:`mlenergy.analysis.tables.checkpoints_frame`.
        inference: :func:`mlenergy.analysis.tables.inference_frame`.
        quality: :func:`mlenergy.analysis.tables.quality_frame`.
        batch_size: Inference batch size to report (default: the largest measured).
        target_perplexity: Iso-quality target (default: :func:`common_target_perplexity`
            of the final perplexities).
        budget_j: Iso-energy budget (default: the smallest total training energy).

    Returns:
        Columns: ``variant``, ``seed``, ``run_id``, ``final_val_perplexity``,
        ``train_energy_j``, ``train_energy_j_to_target``, ``val_perplexity_at_budget``,
        ``energy_per_token_j``, ``tokens_per_s_per_w``, ``target_perplexity``, ``budget_j``.
    """
    if training.empty:
        raise ValueError("no training runs to summarise")
    per = _per_seed_quality(training, quality)
    per = per.merge(training[["run_id", "train_energy_j"]], on="run_id", how="left")
    if target_perplexity is None:
        target_perplexity = common_target_perplexity(per["final_val_perplexity"])
    if budget_j is None and per["train_energy_j"].notna().any():
        budget_j = float(per["train_energy_j"].min())
    curves = curve_metrics(checkpoints, target_perplexity=target_perplexity, budget_j=budget_j)
    per = per.merge(curves, on="run_id", how="left")
    ref = _reference_batch(inference, batch_size)
    if not ref.empty:
        inf = ref.groupby(["variant", "seed"], as_index=False)[
            ["energy_per_token_j", "tokens_per_s_per_w"]
        ].mean()
        per = per.merge(inf, on=["variant", "seed"], how="left")
    else:
        per["energy_per_token_j"] = np.nan
        per["tokens_per_s_per_w"] = np.nan
    per["target_perplexity"] = target_perplexity
    per["budget_j"] = budget_j
    return per


_SUMMARY_VALUES = (
    "final_val_perplexity",
    "train_energy_j",
    "train_energy_j_to_target",
    "val_perplexity_at_budget",
    "energy_per_token_j",
    "tokens_per_s_per_w",
)


def model_summary(
    training: pd.DataFrame, per_seed: pd.DataFrame, *, confidence: float = 0.95
) -> pd.DataFrame:
    """One row per model variant: means over seeds with bootstrap intervals, Pareto membership.

    Args:
        training: :func:`mlenergy.analysis.tables.training_frame` (model description columns).
        per_seed: :func:`per_seed_table`.
        confidence: Interval coverage.

    Returns:
        Model columns (``variant``, ``family``, ``role``, ``is_moe``, experts, parameters),
        ``n_seeds``, for each value ``v`` of ``final_val_perplexity``, ``train_energy_j``,
        ``train_energy_j_to_target``, ``val_perplexity_at_budget``, ``energy_per_token_j`` and
        ``tokens_per_s_per_w``: ``v`` (mean), ``v_ci_low``, ``v_ci_high``; then
        ``on_pareto_frontier`` (of ``energy_per_token_j`` versus ``final_val_perplexity``),
        ``target_perplexity`` and ``budget_j``.
    """
    desc_cols = [
        c
        for c in (
            "variant", "family", "role", "is_moe", "architecture", "num_experts",
            "experts_per_token", "num_shared_experts", "total_params", "active_params",
            "energy_source", "expert_utilisation_cv", "final_load_balancing_loss",
        )
        if c in training.columns
    ]  # fmt: skip
    desc = training[desc_cols].groupby("variant", sort=False).first().reset_index()
    rows = []
    for variant, sub in per_seed.groupby("variant", sort=False):
        row: dict[str, Any] = {"variant": variant, "n_seeds": int(sub["seed"].nunique())}
        for col in _SUMMARY_VALUES:
            ci = bootstrap_ci(sub[col].astype(float), confidence=confidence) if col in sub else None
            row[col] = ci.estimate if ci else np.nan
            row[f"{col}_ci_low"] = ci.low if ci else np.nan
            row[f"{col}_ci_high"] = ci.high if ci else np.nan
        row["target_perplexity"] = float(sub["target_perplexity"].iloc[0])
        row["budget_j"] = sub["budget_j"].iloc[0]
        rows.append(row)
    out = desc.merge(pd.DataFrame(rows), on="variant", how="right")
    out["on_pareto_frontier"] = pareto_mask(
        out["energy_per_token_j"].astype(float), out["final_val_perplexity"].astype(float)
    )
    return out


def compare_to_baseline(
    per_seed: pd.DataFrame, variant: str, baseline: str, *, confidence: float = 0.95
) -> dict[str, Any]:
    """Compare one model variant with a baseline variant at iso-quality.

    The iso-quality target is the worse of the two mean final perplexities, so both reach it;
    ratios are ``variant / baseline`` of means over seeds with bootstrap intervals (seeds
    resampled independently per variant).

    Args:
        per_seed: :func:`per_seed_table` rows (needs ``checkpoint`` curves already reduced).
        variant: The variant to compare (e.g. an MoE).
        baseline: The reference variant (e.g. the dense model matched on active parameters).
        confidence: Interval coverage.

    Returns:
        ``variant``, ``baseline``, ``final_val_perplexity`` of each, and for the training
        energy at the common target (``train_energy_ratio``) and the inference energy per
        token (``energy_per_token_ratio``): the ratio with ``_ci_low``/``_ci_high``.
    """
    a = per_seed[per_seed["variant"] == variant]
    b = per_seed[per_seed["variant"] == baseline]
    out: dict[str, Any] = {
        "variant": variant,
        "baseline": baseline,
        "variant_perplexity": float(a["final_val_perplexity"].mean()),
        "baseline_perplexity": float(b["final_val_perplexity"].mean()),
    }
    for name, col in (
        ("train_energy_ratio", "train_energy_j_pair_target"),
        ("energy_per_token_ratio", "energy_per_token_j"),
    ):
        ci = bootstrap_ratio_ci(a[col], b[col], confidence=confidence) if col in a else None
        out[name] = ci.estimate if ci else None
        out[f"{name}_ci_low"] = ci.low if ci else None
        out[f"{name}_ci_high"] = ci.high if ci else None
    return out


def pairwise_comparisons(
    per_seed: pd.DataFrame,
    checkpoints: pd.DataFrame,
    pairs: Sequence[tuple[str, str, str]],
    *,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Compare variants with their baselines, each pair at its own iso-quality target.

    Args:
        per_seed: :func:`per_seed_table`.
        checkpoints: :func:`mlenergy.analysis.tables.checkpoints_frame`.
        pairs: ``(comparison, variant, baseline)`` triples, e.g.
            ``("matched-active", "moe-8x256-top2", "dense-512")``.
        confidence: Interval coverage.

    Returns:
        One row per pair: ``comparison``, the :func:`compare_to_baseline` columns and
        ``target_perplexity`` of the pair.
    """
    rows = []
    for comparison, variant, baseline in pairs:
        sub = per_seed[per_seed["variant"].isin([variant, baseline])].copy()
        if sub.empty or variant not in set(sub["variant"]) or baseline not in set(sub["variant"]):
            continue
        target = common_target_perplexity(sub.groupby("variant")["final_val_perplexity"].mean())
        curves = curve_metrics(
            checkpoints[checkpoints["run_id"].isin(sub["run_id"])],
            target_perplexity=target,
            budget_j=None,
        ).rename(columns={"train_energy_j_to_target": "train_energy_j_pair_target"})
        sub = sub.merge(curves[["run_id", "train_energy_j_pair_target"]], on="run_id", how="left")
        row = compare_to_baseline(sub, variant, baseline, confidence=confidence)
        rows.append({"comparison": comparison, **row, "target_perplexity": target})
    return pd.DataFrame(rows)


def energy_rate_cv(checkpoints: pd.DataFrame, by: str = "run_id") -> pd.DataFrame:
    """Spread of the training energy per step between checkpoint intervals of each run.

    Every interval of a run does the same work per step, so the coefficient of variation of
    its energy per step measures the measurement noise (a busy or shared machine, frequency
    changes) that a single run carries.

    Args:
        checkpoints: :func:`mlenergy.analysis.tables.checkpoints_frame`.
        by: Column identifying one run.

    Returns:
        ``by`` and ``energy_per_step_cv`` (std / mean over intervals; NaN with < 2 intervals).
    """
    rows = []
    for key, sub in checkpoints.groupby(by, sort=False):
        sub = sub.sort_values("step")
        de = np.diff(sub["energy_j"].astype(float).to_numpy())
        ds = np.diff(sub["step"].astype(float).to_numpy())
        ok = (ds > 0) & ~np.isnan(de)
        rate = de[ok] / ds[ok]
        cv = float(rate.std(ddof=1) / rate.mean()) if rate.size >= 2 and rate.mean() > 0 else np.nan
        rows.append({by: key, "energy_per_step_cv": cv})
    return pd.DataFrame(rows, columns=[by, "energy_per_step_cv"])


def measurement_noise(checkpoints: pd.DataFrame) -> float | None:
    """Median :func:`energy_rate_cv` over runs: the typical noise of one run's energy.

    Returns:
        A fraction (0.1 = 10%), or ``None`` without enough checkpoints.
    """
    if checkpoints.empty:
        return None
    cv = energy_rate_cv(checkpoints)["energy_per_step_cv"].dropna()
    return float(cv.median()) if not cv.empty else None


def ratio_by_batch(
    inference: pd.DataFrame,
    pairs: Sequence[tuple[str, str, str]],
    value: str = "energy_per_token_j",
) -> pd.DataFrame:
    """Inference ``value`` of each variant over its baseline, per batch size (means over seeds).

    Args:
        inference: :func:`mlenergy.analysis.tables.inference_frame`.
        pairs: ``(comparison, variant, baseline)`` triples.
        value: Column to compare (default: energy per generated token).

    Returns:
        ``comparison``, ``variant``, ``baseline``, ``batch_size``, ``ratio``.
    """
    cols = ["comparison", "variant", "baseline", "batch_size", "ratio"]
    if inference.empty:
        return pd.DataFrame(columns=cols)
    means = inference.groupby(["variant", "batch_size"])[value].mean()
    rows = []
    for comparison, variant, baseline in pairs:
        for b in sorted(inference["batch_size"].unique()):
            num, den = means.get((variant, b)), means.get((baseline, b))
            if num is None or den is None or not np.isfinite(num) or not den:
                continue
            rows.append(
                {"comparison": comparison, "variant": variant, "baseline": baseline,
                 "batch_size": int(b), "ratio": float(num / den)}
            )  # fmt: skip
    return pd.DataFrame(rows, columns=cols)
