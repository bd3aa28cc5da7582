"""The measured study's conclusion: sentences computed from its tables, saying what is unsure."""

from __future__ import annotations

import math

import pandas as pd

from mlenergy.studies.measured import energy_per_correct_interval

QUALITY_NOTE = (
    "Quality was not measured in the same runs as the energy: published scores (labelled "
    "published:<benchmark>, each with its source) are set against ML.ENERGY's measurements, "
    "unless the store holds a quality record for the model (labelled imported:<task> when "
    "read from another tool's results, such as lm-eval's, or measured:<task>)."
)


def _j(value: float) -> str:
    if not math.isfinite(value):
        return "n/a"
    return f"{value / 1000:.3g} kJ" if value >= 1000 else f"{value:.3g} J"


def _short(model_id: str) -> str:
    return model_id.split("/")[-1]


def _overlap_clause(moe: pd.Series, dense: pd.Series) -> str:
    """Whether the two figures' sampling intervals (from the benchmark's size) separate them."""
    a, b = energy_per_correct_interval(moe), energy_per_correct_interval(dense)
    if a is None or b is None:
        return ", with no sampling interval for this benchmark"
    if a[1] < b[0] or b[1] < a[0]:
        return ", and the accuracies' sampling intervals do not change the order"
    return ", but the accuracies' sampling intervals overlap: the data cannot decide"


def _per_correct_sentence(task: str, gpu: str, g: pd.DataFrame) -> str | None:
    have = g[g["energy_per_correct_j"].notna()]
    best = {a: s.sort_values("energy_per_correct_j").iloc[0] for a, s in have.groupby("arch")}
    if not best:
        return None
    parts = [
        f"{arch}: {_short(r['model_id'])} at {_j(r['energy_per_correct_j'])} per correct answer "
        f"({r['quality_score']:.1f}%)"
        for arch, r in sorted(best.items())
    ]
    text = f"{task} on {gpu}, lowest energy per correct answer by family - " + "; ".join(parts)
    if "dense" in best and "moe" in best:
        ratio = best["moe"]["energy_per_correct_j"] / best["dense"]["energy_per_correct_j"]
        text += f". Best MoE / best dense = {ratio:.2f}"
        text += " (MoE cheaper)" if ratio < 1 else " (dense cheaper)"
        text += _overlap_clause(best["moe"], best["dense"])
        text += "; one model per family decides this"
    else:
        text += ". Only one family has an accuracy here, so the data cannot compare them"
    return text + "."


def _pairs_sentence(pairs: pd.DataFrame) -> str:
    if pairs.empty:
        return (
            "No dense and MoE models of the same task and GPU score within the matching "
            "tolerance of each other: the data cannot compare them at equal quality."
        )
    low = int((pairs["ratio_ci_high"] < 1).sum())
    high = int((pairs["ratio_ci_low"] > 1).sum())
    unsure = len(pairs) - low - high
    text = (
        f"Matched-quality pairs: {len(pairs)}. In {low} the MoE model spends less energy per "
        f"response across its configurations (95% interval below 1), in {high} more (above 1)"
    )
    if unsure:
        text += f", and in {unsure} the interval spans 1 or has one configuration: undecided"
    median = float(pairs["energy_ratio"].median())
    return text + f". Median MoE/dense ratio at the best configurations: {median:.2f}."


def _fits_sentence(fits: pd.DataFrame) -> str | None:
    pooled = fits[fits["family"] == "all"]
    if pooled.empty:
        return None
    votes = []
    for (task, gpu), g in pooled.groupby(["task", "gpu"], sort=True):
        r2 = dict(zip(g["predictor"], g["r2"], strict=True))
        if "active" in r2 and "total" in r2:
            better = "active" if r2["active"] > r2["total"] else "total"
            votes.append(
                f"{task}/{gpu}: {better} (R^2 {r2['active']:.2f} active vs {r2['total']:.2f} total)"
            )
    if not votes:
        return None
    return (
        "Which parameter count energy per token follows, over all models of a task and GPU: "
        + "; ".join(votes)
        + ". Slopes with their bootstrap intervals are in the table; with a handful of models "
        "and configurations chosen per model, read them as indications."
    )


def _claim_sentence(claim: pd.DataFrame, model_ids: set[str]) -> str:
    r1 = "deepseek-ai/DeepSeek-R1" in " ".join(model_ids)
    head = "" if r1 else "DeepSeek-R1 itself is not among the measured models; "
    if claim.empty:
        return head + (
            "no MoE model of its shape (>= 100B total, <= 10% active) has both energy and "
            "quality here, so the data cannot test the claim."
        )
    holds = claim[claim["claim_holds"]]
    models = ", ".join(sorted({_short(m) for m in claim["moe"]}))
    text = (
        head + f"models of its shape measured here ({models}) beat {len(holds)} of "
        f"{len(claim)} dense comparisons on both counts (higher quality, no more energy per "
        "token)"
    )
    failing = claim[~claim["claim_holds"]]
    if not failing.empty:
        costlier = int((failing["energy_per_token_ratio"] > 1).sum())
        text += f"; of the others, {costlier} cost more energy per token"
    return text + "."


def _store_quality_sentence(rows: pd.DataFrame) -> str | None:
    """Which rows are judged on quality records of the store rather than published scores."""
    src = rows["quality_source"].fillna("")
    own = rows[(src != "") & ~src.str.startswith("published:")]
    if own.empty:
        return None
    parts = sorted(
        {f"{_short(r['model_id'])} ({r['task']}: {r['quality_source']})" for _, r in own.iterrows()}
    )
    return (
        "Quality from the store's records instead of published scores for "
        + "; ".join(parts)
        + ": evaluated apart from the energy runs, like the published ones."
    )


def measured_conclusion(
    rows: pd.DataFrame, pairs: pd.DataFrame, fits: pd.DataFrame, claim: pd.DataFrame
) -> list[str]:
    """The conclusion's paragraphs, computed from the study's tables.

    Args:
        rows: The study's rows (with quality).
        pairs: :func:`mlenergy.studies.measured_analysis.matched_pairs`.
        fits: :func:`mlenergy.studies.measured_analysis.parameter_fits`.
        claim: :func:`mlenergy.studies.measured_analysis.sparse_claim`.
    """
    paragraphs = []
    for (task, gpu), g in rows.groupby(["task", "gpu"], sort=True):
        sentence = _per_correct_sentence(task, gpu, g)
        if sentence:
            paragraphs.append(sentence)
    paragraphs.append(_pairs_sentence(pairs))
    fit = _fits_sentence(fits)
    if fit:
        paragraphs.append(fit)
    paragraphs.append(_claim_sentence(claim, set(rows["model_id"])))
    store = _store_quality_sentence(rows)
    if store:
        paragraphs.append(store)
    paragraphs.append(QUALITY_NOTE)
    return paragraphs
