"""The measured study's conclusion: sentences computed from its tables, saying what is unsure."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from mlenergy.analysis.stalls import host_bound_reason
from mlenergy.studies.measured import energy_per_correct_interval
from mlenergy.studies.measured_analysis import SEPARATION_SHARE

QUALITY_NOTE = (
    "Quality was not measured in the same runs as the energy: published scores (labelled "
    "published:<benchmark>, each with its source) are set against ML.ENERGY's measurements, "
    "unless the store holds a quality record for the model (labelled imported:<task> when "
    "read from another tool's results, such as lm-eval's, or measured:<task>)."
)

SAMPLING_NOTE = (
    "Sampling differs between the two: ML.ENERGY's reference energy runs sampled at temperature "
    "0.8, top-p 0.95 (its benchmark harness), while each published score used its own "
    "evaluation settings (named in the quality sources table), so a run's response lengths and "
    "accuracy need not be those of the published evaluation."
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
    best = {str(a): s.sort_values("energy_per_correct_j").iloc[0] for a, s in have.groupby("arch")}
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
    low = int((pairs["ratio_range_high"] < 1).sum())
    high = int((pairs["ratio_range_low"] > 1).sum())
    mixed = len(pairs) - low - high
    text = (
        f"Matched-quality pairs: {len(pairs)}. In {low} the MoE model spends less energy per "
        "response whichever configurations within the deadline the two run (the MoE/dense "
        f"ratio's whole range over configuration pairings is below 1), in {high} more (whole "
        "range above 1)"
    )
    if mixed:
        text += f", and in {mixed} the answer depends on the configurations chosen"
    median = float(pairs["energy_ratio"].median())
    return text + (
        f". Median over the pairs of the MoE/dense ratio at each model's best configuration: "
        f"{median:.2f}."
    )


def _pooled_fits(fits: pd.DataFrame, groups: set | None = None) -> list[tuple[Any, Any]]:
    """``(total, active)`` fit rows of all models pooled, per task x GPU (only ``groups``)."""
    pooled = fits[fits["family"] == "all"]
    if groups is not None:
        keep = [(t, g) in groups for t, g in zip(pooled["task"], pooled["gpu"], strict=True)]
        pooled = pooled[keep]
    out = []
    for _, g in pooled.groupby(["task", "gpu"], sort=True):
        by = {r["predictor"]: r for _, r in g.iterrows()}
        if "total" in by and "active" in by:
            out.append((by["total"], by["active"]))
    return out


def _r2_pair(adjusted: float, plain: float) -> str:
    return f"{adjusted:.2f} ({plain:.2f})" if math.isfinite(adjusted) else f"n/a ({plain:.2f})"


def _fit_part(t: Any, a: Any) -> str:
    head = f"{t['task']}/{t['gpu']} (n = {int(t['points'])} models"
    if not math.isfinite(t["corr_params_gpus"]):
        return (
            f"{head}, one GPU count): total parameters alone adjusted R^2 "
            f"{_r2_pair(t['adj_r2_params_alone'], t['r2_params_alone'])}, active "
            f"{_r2_pair(a['adj_r2_params_alone'], a['r2_params_alone'])}"
        )
    share = t["params_ahead_share"]
    if t["separated"]:
        ahead = "total parameters" if share >= 0.5 else "GPU count"
        verdict = f"{ahead} fits better in {max(share, 1 - share):.0%} of bootstrap resamples"
    elif math.isfinite(share):
        verdict = (
            f"total parameters fit better in {share:.0%} of bootstrap resamples of the models, "
            f"so neither is ahead in the {SEPARATION_SHARE:.1%} that would separate them"
        )
    else:
        verdict = "too few distinct points to resample, so the data cannot separate them"
    return (
        f"{head} from {int(t['model_ids'])} ids): total parameters alone adjusted R^2 "
        f"{_r2_pair(t['adj_r2_params_alone'], t['r2_params_alone'])}, GPU count alone "
        f"{_r2_pair(t['adj_r2_gpus_alone'], t['r2_gpus_alone'])}, active parameters alone "
        f"{_r2_pair(a['adj_r2_params_alone'], a['r2_params_alone'])}; total parameters and GPU "
        f"count correlate at {t['corr_params_gpus']:.2f}, and {verdict}"
    )


def _fits_sentence(fits: pd.DataFrame, groups: set | None = None) -> str | None:
    """The pooled fits of every task x GPU (or only of ``groups``) in one paragraph."""
    pairs = _pooled_fits(fits, groups)
    if not pairs:
        return None
    both = [t for t, _ in pairs if math.isfinite(t["corr_params_gpus"])]
    apart = sum(bool(t["separated"]) for t in both)
    closing = (
        f" In {len(both) - apart} of {len(both)} groups the data cannot separate the model's "
        "size from the deployment's (larger models run on more GPUs in the deployments "
        "ML.ENERGY chose), and neither is shown to cause the energy per token."
        if both
        else ""
    )
    return (
        "Energy per token against size, one regressor at a time (log-log least squares; "
        "BF16/FP8 copies of a model merged into one point; adjusted R^2, plain R^2 in "
        "brackets): " + "; ".join(_fit_part(t, a) for t, a in pairs) + "." + closing
    )


def fits_headline(fits: pd.DataFrame) -> str | None:
    """The fits in one line: ranges over the task x GPU groups, and how many separate the two."""
    both = [t for t, _ in _pooled_fits(fits) if math.isfinite(t["corr_params_gpus"])]
    if not both:
        return None

    def span(key: str, digits: int = 2) -> str:
        values = [float(t[key]) for t in both if math.isfinite(float(t[key]))]
        if not values:
            return "n/a"
        lo, hi = min(values), max(values)
        return (
            f"{lo:.{digits}f}"
            if f"{lo:.{digits}f}" == f"{hi:.{digits}f}"
            else (f"{lo:.{digits}f}-{hi:.{digits}f}")
        )

    points = span("points", 0)
    apart = sum(bool(t["separated"]) for t in both)
    return (
        f"energy per token against size ({len(both)} task x GPU groups of {points} models, "
        f"one regressor at a time): total parameters adjusted R^2 {span('adj_r2_params_alone')}, "
        f"GPU count {span('adj_r2_gpus_alone')}, correlated at {span('corr_params_gpus')}; "
        f"the data cannot separate them in {len(both) - apart} of {len(both)} groups"
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


def _stalled_sentence(stalled: pd.DataFrame, configs_note: str = "") -> str | None:
    """Which runs the host-bound rule flags, why, and what they draw against the same models."""
    if stalled is None or stalled.empty:
        return None
    groups = "; ".join(
        f"{task} on {gpu}: {', '.join(sorted({_short(x) for x in g['model_id']}))}"
        for (task, gpu), g in stalled.groupby(["task", "gpu"], sort=True)
    )
    text = (
        f"Host-bound runs: {len(stalled)} measured configurations ({groups}) are suspect: "
        f"{host_bound_reason()}."
    )
    if configs_note:
        text += " " + configs_note
    return text + " Each headline below is given with them and, after it, without them."


def power_comparison(configs: pd.DataFrame) -> str:
    """Median GPU power (W per GPU) of the flagged runs against the same models elsewhere."""
    flagged = configs[configs["host_bound"].astype(bool)]
    if flagged.empty or "avg_power_w" not in configs:
        return ""
    keys = set(zip(flagged["model_id"], flagged["gpu"], flagged["num_gpus"], strict=True))
    mine = configs.apply(
        lambda r: (r["model_id"], r["gpu"], r["num_gpus"]) in keys, axis=1
    ) & ~configs["host_bound"].astype(bool)
    other = configs[mine]
    per_gpu = flagged["avg_power_w"] / flagged["num_gpus"]
    if other.empty or not per_gpu.notna().any():
        return ""
    other_w = (other["avg_power_w"] / other["num_gpus"]).median()
    return (
        f"Here they draw a median {per_gpu.median():.0f} W per GPU, against {other_w:.0f} W for "
        "the same models on the same GPU count with the tasks the rule does not flag."
    )


def _with_and_without(all_text: str, clean_text: str | None) -> str:
    if clean_text is None:
        return all_text
    if clean_text == all_text:
        return f"{all_text} (The same without the host-bound runs.)"
    return f"{all_text} Without the host-bound runs: {clean_text}"


def measured_conclusion(
    everything: Any,
    unstalled: Any = None,
    stalled: pd.DataFrame | None = None,
    configs: pd.DataFrame | None = None,
) -> list[str]:
    """The conclusion's paragraphs, computed from the study's tables.

    Args:
        everything: The findings on every configuration
            (:class:`mlenergy.studies.measured_result.Findings`: rows, pairs, fits, claim).
        unstalled: The same without the configurations the host-bound rule flags (None: no
            configuration is flagged, so there is nothing to repeat).
        stalled: The flagged configurations.
        configs: Every configuration (for the power comparison of the flagged ones).
    """
    rows, clean = everything.rows, unstalled
    flagged_groups = set()
    if stalled is not None and not stalled.empty:
        flagged_groups = set(zip(stalled["task"], stalled["gpu"], strict=True))
    paragraphs = []
    note = power_comparison(configs) if configs is not None else ""
    stalled_text = _stalled_sentence(stalled, note) if stalled is not None else None
    if stalled_text:
        paragraphs.append(stalled_text)
    for (task, gpu), g in rows.groupby(["task", "gpu"], sort=True):
        sentence = _per_correct_sentence(task, gpu, g)
        if sentence and clean is not None and (task, gpu) in flagged_groups:
            cg = clean.rows[(clean.rows["task"] == task) & (clean.rows["gpu"] == gpu)]
            other = _per_correct_sentence(task, gpu, cg) if not cg.empty else None
            sentence = _with_and_without(
                sentence, other or "no model has an accuracy and a configuration left here."
            )
        if sentence:
            paragraphs.append(sentence)
    paragraphs.append(
        _with_and_without(
            _pairs_sentence(everything.pairs),
            _pairs_sentence(clean.pairs) if clean is not None else None,
        )
    )
    fit = _fits_sentence(everything.fits)
    if fit and clean is not None:
        again = _fits_sentence(clean.fits, flagged_groups)
        fit += (
            " Without the host-bound runs, where they were: " + again
            if again
            else " Without the host-bound runs, too few models remain for a fit where they were."
        )
    if fit:
        paragraphs.append(fit)
    ids = set(rows["model_id"])
    paragraphs.append(
        _with_and_without(
            _claim_sentence(everything.claim, ids),
            _claim_sentence(clean.claim, ids) if clean is not None else None,
        )
    )
    store = _store_quality_sentence(rows)
    if store:
        paragraphs.append(store)
    paragraphs.append(QUALITY_NOTE)
    paragraphs.append(SAMPLING_NOTE)
    return paragraphs
