"""The written conclusion of the dense-vs-MoE study, computed from its tables.

Nothing here is typed in: every number, every "less" or "more" comes from the comparison
tables, with a tie wherever the difference is within the noise: the bootstrap interval with
several seeds; for inference with one seed, the interval of the ratio from the run-to-run
spread of the interleaved repeats, paired round by round (:func:`spread_interval`); otherwise
+/- :func:`tie_band`. Every ratio, interval and verdict is one row of :func:`verdict_table`.
The text states what was measured, not why.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from mlenergy.analysis import energy_quality as eq
from mlenergy.studies.verdicts import (
    NOISE_BAND,
    Spread,
    classify_ratio,
    inference_spread,
    levelled_checkpoints,
    load_shift_for,
    paired_half_width,
    spread_interval,
    tie_band,
    training_spread,
    verdict_table,
)

__all__ = [
    "NOISE_BAND",
    "VERDICT_HEADS",
    "Spread",
    "classify_ratio",
    "conclusion",
    "energy_note",
    "energy_unit",
    "fmt_value",
    "inference_spread",
    "levelled_checkpoints",
    "paired_half_width",
    "ratio_text",
    "spread_interval",
    "tie_band",
    "training_spread",
    "verdict_paragraphs",
    "verdict_table",
]


def energy_note(energy_source: str) -> str:
    """One line stating where the energy figures came from."""
    kind = energy_source.split(":", 1)[0]
    if kind == "modelled":
        return (
            f"Energy source: {energy_source}: MODELLED from CPU time and a power model "
            "(no energy counter on this machine), not measured."
        )
    if kind == "emulated":
        return f"Energy source: {energy_source}: emulated devices (tests), not a measurement."
    return f"Energy source: {energy_source}: measured through Zeus."


def fmt_value(v: Any, digits: int = 3) -> str:
    """Format a number for tables (``n/a`` for missing, thousands separators for ints)."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a"
    if isinstance(v, bool | np.bool_):
        return "yes" if v else "no"
    if isinstance(v, int | np.integer):
        return f"{int(v):,}"
    return f"{float(v):.{digits}g}"


def energy_unit(values: Any) -> tuple[str, float]:
    """Unit label and scale for training energies: kJ from 1,000 J up, else J."""
    arr = np.asarray(pd.Series(values, dtype=float).dropna())
    return ("kJ", 1e-3) if arr.size and float(np.nanmax(arr)) >= 1e3 else ("J", 1.0)


def ratio_text(ratio: float | None, lo: float | None, hi: float | None) -> str:
    """Format an MoE/dense ratio as ``1.23x`` with its 95% interval when it has one."""
    if ratio is None or not np.isfinite(ratio):
        return "n/a"
    text = f"{ratio:.2f}x"
    if lo is not None and hi is not None and np.isfinite(lo) and np.isfinite(hi) and hi > lo:
        text += f" (95% CI {lo:.2f}-{hi:.2f})"
    return text


def _batches_text(batches: list[int]) -> str:
    """``batch size 1`` or ``batch sizes 1, 8 and 32``."""
    names = [str(b) for b in sorted(batches)]
    if len(names) == 1:
        return f"batch size {names[0]}"
    return f"batch sizes {', '.join(names[:-1])} and {names[-1]}"


def _counts_text(c: list[str], what: str | None = None) -> str:
    """``k of n MoE variants spent less, t tied (within noise) and m spent more``."""
    n, less, more, tie = len(c), c.count("less"), c.count("more"), c.count("tie")
    head = f"for {what}, " if what else ""
    return (
        f"{head}{less} of {n} MoE variants spent less, {tie} tied (within noise) and "
        f"{more} spent more"
    )


def _one_side(c: list[str], what: str) -> str:
    """The verdict for one set of variant classes (no batch dimension)."""
    c = [x for x in c if x != "n/a"]
    n, less, more = len(c), c.count("less"), c.count("more")
    if n and less == n:
        return f"every MoE variant needed less {what} than the dense model"
    if n and more == n:
        return f"no MoE variant needed less {what} than the dense model"
    return _counts_text(c, what)


def _batch_class(c: list[str]) -> str:
    """``less``/``more``/``tie`` when every variant agrees at one batch size, else ``mixed``."""
    return c[0] if len(set(c)) == 1 else "mixed"


def _inference_by_batch(per_batch: dict[int, list[str]], what: str) -> tuple[str, str]:
    """The inference verdict over every measured batch size.

    "At every batch size" is said only when it holds at each one; otherwise the batch sizes
    where the MoE variants spent less, tied (within noise) and spent more are listed.

    Returns:
        ``(clause, sentence)``: a clause for the verdict's sentence when one statement holds
        at every batch size (``sentence`` empty), else an empty clause and a sentence of its
        own listing the batch sizes.
    """
    kinds = {b: _batch_class(c) for b, c in sorted(per_batch.items())}
    listed = ", ".join(map(str, kinds))
    if all(k == "less" for k in kinds.values()):
        return (
            f"every MoE variant needed less {what} than the dense model at every batch size "
            f"measured ({listed})",
            "",
        )
    if all(k == "more" for k in kinds.values()):
        return (
            f"no MoE variant needed less {what} than the dense model at any batch size "
            f"measured ({listed})",
            "",
        )
    parts = []
    for kind, phrase in (
        ("less", "every MoE variant spent less"),
        ("tie", "every MoE variant tied with the dense model (within noise)"),
        ("more", "every MoE variant spent more"),
    ):
        where = [b for b, k in kinds.items() if k == kind]
        if where:
            parts.append(f"{phrase} at {_batches_text(where)}")
    parts += [
        f"at batch size {b}, {_counts_text(per_batch[b])}" for b, k in kinds.items() if k == "mixed"
    ]
    return "", f"{what[0].upper()}{what[1:]} depends on the batch size: " + "; ".join(parts) + "."


def _verdict(
    classes: dict[str, list[str]],
    label: str,
    inference_by_batch: dict[int, list[str]] | None = None,
) -> str:
    """The verdict for one comparison: training, then inference, as less / tie / more.

    Args:
        classes: ``train`` and ``inference`` classes (:func:`classify_ratio`), one per MoE
            variant; ``inference`` at the reference batch size.
        label: ``active`` or ``total``.
        inference_by_batch: Classes per inference batch size (one per MoE variant); with
            two or more batch sizes the inference verdict covers all of them rather than
            only the reference batch size.
    """
    parts = [_one_side(classes["train"], "training energy to reach the same perplexity")]
    what = "inference energy per token"
    per_batch = {
        b: kept
        for b, c in (inference_by_batch or {}).items()
        if (kept := [x for x in c if x != "n/a"])
    }
    extra = ""
    if len(per_batch) >= 2:
        clause, extra = _inference_by_batch(per_batch, what)
        if clause:
            parts.append(clause)
    elif per_batch:
        ((b, c),) = per_batch.items()
        parts.append(f"{_one_side(c, what)} at batch size {b}")
    else:
        parts.append(_one_side(classes["inference"], what))
    text = f"with the same {label} parameters, " + "; ".join(parts) + "."
    return f"{text} {extra}" if extra else text


def _classes_by_batch(table: pd.DataFrame, comp: str) -> dict[int, list[str]]:
    """Per batch size, the verdict on each MoE variant's energy per token (from the table)."""
    sub = table[(table["comparison"] == comp) & (table["measure"] == "inference")]
    sub = sub[sub["batch_size"].notna()]
    return {
        int(b): list(sub.loc[sub["batch_size"] == b, "verdict"])
        for b in sorted(sub["batch_size"].unique())
    }


def _why(summary: pd.DataFrame, band: float) -> str | None:
    """Explain the matched-active result from per-step energy and quality after equal steps."""
    base = summary[summary["role"] == "dense-active"]
    moe = summary[summary["family"] == "moe"]
    if base.empty or moe.empty:
        return None
    b = base.iloc[0]
    step_ratio = moe["train_energy_j"].astype(float) / float(b["train_energy_j"])
    ppl = moe["final_val_perplexity"].astype(float)
    if not np.isfinite(step_ratio).any():
        return None
    text = (
        f"Why: for the same steps and tokens, the MoE variants spent "
        f"{step_ratio.min():.2f}-{step_ratio.max():.2f}x the training energy of "
        f"{b['variant']} (same active parameters) and reached perplexity "
        f"{ppl.min():.4g}-{ppl.max():.4g} against {float(b['final_val_perplexity']):.4g}: "
        "whether the quality per step repays the cost of a step decides each comparison "
        "above. "
    )
    if bool((step_ratio < 1.0 - band).any()):
        text += (
            "An MoE step does at least the dense step's arithmetic, so a step ratio below 1 "
            "is more than this study's measurements resolve: read the training comparisons "
            "with the measurement noise in mind. "
        )
    if bool((step_ratio > 1.0 + band).any()):
        text += (
            "This study measured the total energy of each step, not where it went (routing, "
            "expert matrix products, memory traffic): it does not say why an MoE step cost "
            "more here, nor whether it would at another size or on a GPU."
        )
    return text.rstrip()


VERDICT_HEADS = (
    "Verdict at this scale",
    "Against the dense model with the same total parameters",
)
"""How the conclusion's verdict paragraphs begin: matched on active, then on total parameters."""


def verdict_paragraphs(paragraphs: list[str]) -> list[str]:
    """The verdicts among the conclusion's paragraphs (what ``mlenergy demo`` ends with)."""
    return [p for p in paragraphs if p.startswith(VERDICT_HEADS)]


def conclusion(
    summary: pd.DataFrame,
    comparisons: pd.DataFrame,
    *,
    energy_source: str,
    batch_size: int | None,
    seeds: int,
    size: str,
    noise: float | None = None,
    by_batch: pd.DataFrame | None = None,
    spread: Spread | None = None,
    train_spread: dict[str, tuple[float, ...]] | None = None,
) -> list[str]:
    """The written conclusion, one paragraph per item, computed from the tables.

    Args:
        summary: :func:`mlenergy.analysis.energy_quality.model_summary`.
        comparisons: :func:`mlenergy.analysis.energy_quality.pairwise_comparisons`.
        energy_source: Energy label of the figures.
        batch_size: Reference inference batch size.
        seeds: Seeds per model.
        size: Study size name.
        noise: Typical relative noise of one run's energy
            (:func:`mlenergy.analysis.energy_quality.measurement_noise`); single-seed ratios
            within ``1 +/- max(NOISE_BAND, noise)`` are called ties.
        by_batch: :func:`mlenergy.analysis.energy_quality.ratio_by_batch` (inference energy
            per token, MoE over dense, per batch size).
        spread: :func:`inference_spread` of the study's runs: with one seed, inference ratios
            whose run-to-run interval holds 1 are called ties.
        train_spread: :func:`training_spread`: with one seed, training ratios whose interval
            from the windows trained in turns holds 1 are called ties.

    Returns:
        Paragraphs of plain text.
    """
    out: list[str] = []
    band = tie_band(noise)
    best = summary.sort_values("final_val_perplexity", kind="stable").iloc[0]
    out.append(
        f"Best held-out perplexity: {best['variant']} ({best['final_val_perplexity']:.4g}); "
        f"the iso-quality target every model reached is perplexity "
        f"{summary['target_perplexity'].iloc[0]:.4g}."
    )
    verdicts: dict[str, dict[str, list[str]]] = {}
    per_batch: dict[str, dict[int, list[str]]] = {}
    shift = load_shift_for(energy_source)
    table = verdict_table(
        comparisons, by_batch, band=band, batch_size=batch_size, spread=spread,
        train_spread=train_spread, load_shift=shift,
    )  # fmt: skip
    for comp in ("matched-active", "matched-total"):
        sub = comparisons[comparisons["comparison"] == comp] if not comparisons.empty else None
        if sub is None or sub.empty:
            continue
        paragraph, classes = _matched_paragraph(comp, sub, table, batch_size)
        verdicts[comp] = classes
        per_batch[comp] = _classes_by_batch(table, comp)
        out.append(paragraph)
    extra = (_frontier_paragraph(summary, batch_size), _by_batch_paragraph(by_batch))
    out += [p for p in extra if p]
    active = verdicts.get("matched-active")
    if active:
        out.append(
            f"{VERDICT_HEADS[0]} ({size}): "
            + _verdict(active, "active", per_batch.get("matched-active"))
        )
        why = _why(summary, band)
        if why:
            out.append(why)
    total = verdicts.get("matched-total")
    if total:
        out.append(
            f"{VERDICT_HEADS[1]}: " + _verdict(total, "total", per_batch.get("matched-total"))
        )
    out.append(
        "Training energy to reach a perplexity is the steps to reach it times the run's mean "
        "energy per step; the models trained in turns, one checkpoint window each, and their "
        "inference repeats were interleaved, so a drift of the machine fell on all alike."
    )
    if noise is not None:
        out.append(
            f"Measurement noise: within one training run, the energy per step varied by "
            f"{noise:.0%} (median coefficient of variation between checkpoint intervals; a "
            "busy or shared machine raises it)."
        )
    if seeds < 2:
        inference = (
            "ratios are called ties when their interval from the run-to-run spread (of the "
            "interleaved inference repeats, of the training windows taken in turns; paired "
            "round by round) holds 1; ratios without one "
            if spread or train_spread
            else "ratios "
        )
        out.append(
            f"One seed per model: no bootstrap intervals; {inference}within 1 +/- {band:.0%} "
            "are called ties; rerun with --seeds 3 for intervals."
        )
    if shift is not None:
        out.append(_load_paragraph(table, shift))
    out.append(energy_note(energy_source))
    return out


def _load_paragraph(table: pd.DataFrame, shift: dict[str, float]) -> str:
    """Which verdicts would change if the machine's load moved the ratios as measured."""
    unsettled = table[table["holds_under_load"] == False]  # noqa: E712 (None is not False)
    head = (
        f"The machine's load moves these CPU-modelled ratios: two CPU-bound neighbours moved "
        f"training ratios by up to {shift['training']:.0%} and inference ratios by up to "
        f"{shift['inference']:.0%} (benchmarks/demo_neighbours.py). "
    )
    if unsettled.empty:
        return head + f"All {len(table)} verdicts hold under a change of that size."
    names = [
        f"{r['variant']} vs {r['baseline']} "
        + ("training" if r["measure"] == "training" else f"J/token at batch {r['batch_size']}")
        + f" ({r['verdict']})"
        for _, r in unsettled.iterrows()
    ]
    return head + (
        f"{len(table) - len(unsettled)} of {len(table)} verdicts hold under a change of that "
        f"size; these would not, so treat them as unsettled: {'; '.join(names)}."
    )


def _matched_paragraph(
    comp: str, sub: pd.DataFrame, table: pd.DataFrame, batch_size: int | None
) -> tuple[str, dict[str, list[str]]]:
    """One comparison's paragraph and its training/inference verdicts (from the table)."""
    at_batch = f" at batch {batch_size}" if batch_size is not None else ""
    lines = []
    classes: dict[str, list[str]] = {"train": [], "inference": []}
    mine = table[table["comparison"] == comp]
    for _, c in sub.iterrows():
        rows = mine[(mine["variant"] == c["variant"]) & (mine["baseline"] == c["baseline"])]
        tr = rows[rows["measure"] == "training"].iloc[0]
        inf = rows[rows["measure"] == "inference"]
        at_ref = inf["batch_size"].isna() if batch_size is None else inf["batch_size"] == batch_size
        inf = inf[at_ref].iloc[0]
        note = " from run-to-run spread" if inf["interval"] == "repeats" else ""
        classes["train"].append(str(tr["verdict"]))
        classes["inference"].append(str(inf["verdict"]))
        lines.append(
            f"{c['variant']} vs {c['baseline']}: training energy to reach perplexity "
            f"{c['target_perplexity']:.4g} {ratio_text(tr['ratio'], tr['low'], tr['high'])}, "
            f"inference energy per token{at_batch} "
            f"{ratio_text(inf['ratio'], inf['low'], inf['high'])}{note} "
            f"(perplexity {c['variant_perplexity']:.4g} vs {c['baseline_perplexity']:.4g})"
        )
    label = "active" if comp == "matched-active" else "total"
    paragraph = (
        f"Matched on {label} parameters (ratios are MoE / dense; below 1 means the MoE "
        f"spends less): " + "; ".join(lines) + "."
    )
    return paragraph, classes


def _frontier_paragraph(summary: pd.DataFrame, batch_size: int | None) -> str | None:
    """The Pareto frontier and the cheapest dense and MoE J/token at iso-perplexity."""
    dense = summary[summary["family"] == "dense"]
    moe = summary[summary["family"] == "moe"]
    if dense.empty or moe.empty:
        return None
    target = float(summary["target_perplexity"].iloc[0])
    d_tok = eq.cost_at_quality(dense["final_val_perplexity"], dense["energy_per_token_j"], target)
    m_tok = eq.cost_at_quality(moe["final_val_perplexity"], moe["energy_per_token_j"], target)
    front = summary[summary["on_pareto_frontier"]]
    return (
        f"Inference at batch {batch_size}: the Pareto frontier of energy per token versus "
        f"perplexity holds {', '.join(front['variant'])}. At iso-perplexity {target:.4g} the "
        f"cheapest dense model spends {fmt_value(d_tok)} J/token and the cheapest MoE "
        f"{fmt_value(m_tok)} J/token."
    )


def _by_batch_paragraph(by_batch: pd.DataFrame | None) -> str | None:
    """MoE over dense inference energy per token, per batch size, for both matchings."""
    if by_batch is None or by_batch.empty:
        return None
    sentences = []
    for comp, label in (("matched-active", "active"), ("matched-total", "total")):
        parts = []
        for b, g in by_batch[by_batch["comparison"] == comp].groupby("batch_size"):
            lo, hi = f"{g['ratio'].min():.2f}", f"{g['ratio'].max():.2f}"
            parts.append(f"batch {b} {lo}x" if lo == hi else f"batch {b} {lo}-{hi}x")
        if parts:
            sentences.append(f"same {label} parameters: " + ", ".join(parts))
    if not sentences:
        return None
    return (
        "Inference energy per token of the MoE variants over the dense model, by batch "
        "size (below 1 means the MoE spends less): " + "; ".join(sentences) + "."
    )
