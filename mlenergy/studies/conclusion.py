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


NOISE_BAND = 0.05
"""Without an interval (one seed), ratios within 1 +/- this are called a tie."""


def tie_band(noise: float | None) -> float:
    """Half-width of the tie band for ratios without an interval (a fraction).

    The larger of :data:`NOISE_BAND` and the measured within-run noise.
    """
    return max(NOISE_BAND, noise or 0.0)


Spread = dict[tuple[str, int], Any]
"""Per (variant, batch size): the request energy of each interleaved repeat in the order
measured (a tuple: :func:`inference_spread`), or a relative half-width of the 95% interval of
the model's energy per token (a float)."""


def inference_spread(runs: list[Any]) -> Spread:
    """Each study model's request energy per repeat, per batch size, in the order measured.

    Args:
        runs: The study's run records (training ones are skipped).

    Returns:
        ``{(variant, batch size): (joules of repeat 1, repeat 2, ...)}`` of the request phase.
        The repeats of one seed interleave the models (round ``r`` measures repeat ``r`` of
        every model), so the same position in two models' tuples was measured in the same
        round; several seeds are concatenated in the order of ``runs``.
    """
    out: dict[tuple[str, int], tuple[float, ...]] = {}
    for r in runs:
        if r.workload.kind != "inference" or r.status != "ok":
            continue
        phase = r.phase("request")
        stats = phase.energy_j_repeats if phase is not None else None
        if stats is None or not stats.values:
            continue
        key = (r.tags.get("variant", r.model.model_id), int(r.workload.batch_size))
        out[key] = out.get(key, ()) + tuple(float(v) for v in stats.values)
    return out


def training_spread(checkpoints: pd.DataFrame) -> dict[str, tuple[float, ...]]:
    """Each study model's training energy per step in each checkpoint window, in order.

    The study trains its models in turns, one window each, so window ``k`` of every model
    was measured in the same round; several seeds are concatenated in seed order.

    Args:
        checkpoints: :func:`mlenergy.analysis.tables.checkpoints_frame` (cumulative energy).

    Returns:
        ``{variant: (joules per step of window 1, window 2, ...)}``; a model with a window
        without energy is left out.
    """
    out: dict[str, tuple[float, ...]] = {}
    if checkpoints.empty:
        return out
    order = ["seed", "step"] if "seed" in checkpoints else ["step"]
    for variant, g in checkpoints.groupby("variant"):
        per_step: list[float] = []
        for _, run in g.sort_values(order).groupby("run_id", sort=False):
            energy = run["energy_j"].astype(float).diff().to_numpy()[1:]
            steps = run["step"].astype(float).diff().to_numpy()[1:]
            per_step += [e / n for e, n in zip(energy, steps, strict=True) if n > 0]
        if per_step and all(np.isfinite(per_step)):
            out[str(variant)] = tuple(per_step)
    return out


def levelled_checkpoints(checkpoints: pd.DataFrame) -> pd.DataFrame:
    """Checkpoints whose cumulative energy is the step times the run's mean energy per step.

    Energy to reach a perplexity compares one model's first windows with another's last ones
    when one learns faster; a drift of the machine between those windows would enter the
    ratio. The study's models train in turns, so each run's mean energy per step shares the
    machine's drift with every other model's; the steps to a perplexity come from the
    validation curve. A run with a checkpoint without energy is left as it is.

    Args:
        checkpoints: :func:`mlenergy.analysis.tables.checkpoints_frame` (cumulative joules).

    Returns:
        A copy with ``energy_j`` replaced by ``step x (last energy_j / last step)`` per run.
    """
    out = checkpoints.copy()
    if out.empty:
        return out
    for _, run in out.groupby("run_id"):
        run = run.sort_values("step")
        energy, steps = run["energy_j"].astype(float), run["step"].astype(float)
        if energy.isna().any() or not steps.iloc[-1] > 0:
            continue
        per_step = float(energy.iloc[-1]) / float(steps.iloc[-1])
        out.loc[run.index, "energy_j"] = steps * per_step
    return out


def paired_half_width(a: tuple[float, ...], b: tuple[float, ...]) -> float | None:
    """Half-width of the 95% interval of ``log(a_r / b_r)`` over interleaved rounds ``r``.

    A drift of the machine that slows both models in the same round cancels in ``a_r / b_r``;
    what is left is the run-to-run spread of the comparison itself (Student t over rounds).
    ``None`` with fewer than two rounds, unequal counts or a non-positive value.
    """
    from scipy import stats

    if len(a) != len(b) or len(a) < 2 or min(*a, *b) <= 0:
        return None
    logs = [math.log(x / y) for x, y in zip(a, b, strict=True)]
    n = len(logs)
    mean = sum(logs) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in logs) / (n - 1))
    return float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)


def spread_interval(
    ratio: float | None, variant: str, baseline: str, batch: int | None, spread: Spread | None
) -> tuple[float | None, float | None]:
    """Interval of an MoE/dense ratio from run-to-run spread (``None`` without).

    With each model's repeats (:func:`inference_spread`): the paired interval over the
    interleaved rounds, ``ratio x exp(+/- h)`` with ``h`` from :func:`paired_half_width`. With
    relative half-widths ``a`` and ``b`` of each model's own interval: ``ratio x (1 +/-
    sqrt(a^2 + b^2))``.
    """
    if ratio is None or not np.isfinite(ratio) or not spread or batch is None:
        return None, None
    a, b = spread.get((variant, int(batch))), spread.get((baseline, int(batch)))
    if a is None or b is None:
        return None, None
    if isinstance(a, tuple) and isinstance(b, tuple):
        h = paired_half_width(a, b)
        return (None, None) if h is None else (ratio * math.exp(-h), ratio * math.exp(h))
    if isinstance(a, tuple) or isinstance(b, tuple):
        return None, None
    half = math.hypot(a, b)
    return ratio * (1.0 - half), ratio * (1.0 + half)


def classify_ratio(
    ratio: float | None, low: float | None, high: float | None, band: float = NOISE_BAND
) -> str:
    """``less``, ``more`` or ``tie`` for an MoE/dense ratio; ``n/a`` without a ratio.

    With a real interval (several seeds) the call is ``less``/``more`` only if the interval
    excludes 1; with a single seed, only if the ratio lies outside ``1 +/- band``.
    """
    if ratio is None or not np.isfinite(ratio):
        return "n/a"
    has_ci = low is not None and high is not None and np.isfinite(low) and np.isfinite(high)
    if has_ci and high > low:
        return "less" if high < 1.0 else "more" if low > 1.0 else "tie"
    if ratio < 1.0 - band:
        return "less"
    if ratio > 1.0 + band:
        return "more"
    return "tie"


VERDICT_COLUMNS = [
    "comparison", "variant", "baseline", "measure", "batch_size", "ratio", "low", "high",
    "interval", "verdict",
]  # fmt: skip
"""Columns of :func:`verdict_table` (``verdicts.csv`` in the report)."""


def verdict_table(
    comparisons: pd.DataFrame,
    by_batch: pd.DataFrame | None,
    *,
    band: float,
    batch_size: int | None,
    spread: Spread | None = None,
    train_spread: dict[str, tuple[float, ...]] | None = None,
) -> pd.DataFrame:
    """Every MoE/dense ratio the conclusion calls, with its interval and its verdict.

    The one place the study turns ratios into ``less`` / ``more`` / ``tie``: the conclusion's
    sentences are read from this table.

    Args:
        comparisons: :func:`mlenergy.analysis.energy_quality.pairwise_comparisons`.
        by_batch: :func:`mlenergy.analysis.energy_quality.ratio_by_batch`.
        band: Noise band for ratios without an interval (a fraction: 0.05 = +-5%).
        batch_size: Reference inference batch size (the comparison table's).
        spread: :func:`inference_spread` of the study's runs.
        train_spread: :func:`training_spread` of the study's checkpoints: a training ratio
            without a seed interval gets the paired interval of the energy per step over the
            windows (the steps to reach the target are the same in every rerun of a seed).

    Returns:
        One row per (comparison, variant, baseline, measure): ``measure`` is ``training``
        (energy to reach the pair's target perplexity) or ``inference`` (energy per token at
        ``batch_size``); ``interval`` says where ``low``-``high`` came from (``seeds``:
        bootstrap over seeds; ``repeats``: run-to-run spread of the interleaved repeats or,
        for training, of the windows trained in turns; ``band``: none, ``1 +/- band``
        decides).
    """
    rows: list[dict[str, Any]] = []
    done: set[tuple[str, str, int]] = set()

    def add(comp: str, var: str, base: str, measure: str, b: Any, ratio: Any, lo: Any, hi: Any):
        source = "seeds" if _has_interval(lo, hi) else None
        if source is None and measure == "inference":
            lo, hi = spread_interval(ratio, var, base, b, spread)
            source = "repeats" if lo is not None else None
        if source is None and measure == "training" and train_spread:
            by_key = {(k, 0): v for k, v in train_spread.items()}
            lo, hi = spread_interval(ratio, var, base, 0, by_key)
            source = "repeats" if lo is not None else None
        ok = ratio is not None and bool(np.isfinite(ratio))
        rows.append(
            {"comparison": comp, "variant": var, "baseline": base, "measure": measure,
             "batch_size": None if b is None else int(b),
             "ratio": float(ratio) if ok else None,
             "low": lo if source else None, "high": hi if source else None,
             "interval": source or "band",
             "verdict": classify_ratio(ratio if ok else None, lo, hi, band)}
        )  # fmt: skip

    for _, c in comparisons.iterrows() if not comparisons.empty else ():
        comp, var, base = str(c["comparison"]), str(c["variant"]), str(c["baseline"])
        add(comp, var, base, "training", None, c["train_energy_ratio"],
            c["train_energy_ratio_ci_low"], c["train_energy_ratio_ci_high"])  # fmt: skip
        add(comp, var, base, "inference", batch_size, c["energy_per_token_ratio"],
            c["energy_per_token_ratio_ci_low"], c["energy_per_token_ratio_ci_high"])  # fmt: skip
        if batch_size is not None:
            done.add((comp, var, int(batch_size)))
    if by_batch is not None and not by_batch.empty:
        for _, r in by_batch.sort_values(["comparison", "variant", "batch_size"]).iterrows():
            comp, var, b = str(r["comparison"]), str(r["variant"]), int(r["batch_size"])
            if (comp, var, b) not in done:
                add(comp, var, str(r["baseline"]), "inference", b, float(r["ratio"]), None, None)
    table = pd.DataFrame(rows, columns=VERDICT_COLUMNS)
    table["batch_size"] = table["batch_size"].astype("Int64")
    return table


def _has_interval(low: Any, high: Any) -> bool:
    """Whether ``low``-``high`` is a real interval (finite and not a single point)."""
    try:
        return bool(np.isfinite(low) and np.isfinite(high) and high > low)
    except TypeError:
        return False


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
    return {int(b): list(g["verdict"]) for b, g in sub.groupby("batch_size")}


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
    best = summary.loc[summary["final_val_perplexity"].idxmin()]
    out.append(
        f"Best held-out perplexity: {best['variant']} ({best['final_val_perplexity']:.4g}); "
        f"the iso-quality target every model reached is perplexity "
        f"{summary['target_perplexity'].iloc[0]:.4g}."
    )
    verdicts: dict[str, dict[str, list[str]]] = {}
    per_batch: dict[str, dict[int, list[str]]] = {}
    table = verdict_table(
        comparisons, by_batch, band=band, batch_size=batch_size, spread=spread,
        train_spread=train_spread,
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
            f"Verdict at this scale ({size}): "
            + _verdict(active, "active", per_batch.get("matched-active"))
        )
        why = _why(summary, band)
        if why:
            out.append(why)
    total = verdicts.get("matched-total")
    if total:
        out.append(
            "Against the dense model with the same total parameters: "
            + _verdict(total, "total", per_batch.get("matched-total"))
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
    out.append(energy_note(energy_source))
    return out


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
