"""The study's verdicts: every MoE/dense ratio with its interval and less / more / tie.

One rule in one place (:func:`verdict_table`): a ratio is ``less`` or ``more`` only when its
interval excludes 1. The interval is the bootstrap over seeds when there are several; with one
seed, the paired run-to-run interval over the rounds in which the models were measured side by
side (:func:`spread_interval`: interleaved inference repeats, training windows taken in turns);
without either, the band ``1 +/- tie_band(noise)``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from mlenergy.records import RepeatStats

NOISE_BAND = 0.05
"""Without an interval (one seed), ratios within 1 +/- this are called a tie."""

CPU_LOAD_SHIFT = {"training": 0.102, "inference": 0.187}
"""How far two CPU-bound neighbours moved the tiny study's MoE/dense ratios on CPU (a fraction).

The largest change ``max(A/B, B/A) - 1`` of any ratio between a run on the machine as it was
and a run beside two busy-loop processes (``benchmarks/demo_neighbours.py``; three pairs of
runs on 2 cores of an AMD EPYC, 24 ratios each: training 4.6%, 10.2% and 7.5%, inference
9.6%, 14.1% and 18.7%). The modelled CPU energy charges the process's CPU time, and a
neighbour lengthens the CPU time of some models' work more than others' (shared caches), so a
ratio itself moves with the machine's load; no interval from one run can show it. Applies to
``modelled:cpu-tdp`` figures only: GPU counters were not measured this way.
"""


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
    if len(a) != len(b) or len(a) < 2 or min(*a, *b) <= 0:
        return None
    logs = [math.log(x / y) for x, y in zip(a, b, strict=True)]
    stats = RepeatStats.from_values(logs, nonnegative=False)
    return None if stats.ci95 is None else stats.ci95.high - stats.mean


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
    if (
        low is not None
        and high is not None
        and np.isfinite(low)
        and np.isfinite(high)
        and high > low
    ):
        return "less" if high < 1.0 else "more" if low > 1.0 else "tie"
    if ratio < 1.0 - band:
        return "less"
    if ratio > 1.0 + band:
        return "more"
    return "tie"


def load_shift_for(energy_source: str | None) -> dict[str, float] | None:
    """The measured load shift of ratios for figures of this source (``None``: not known)."""
    if energy_source and energy_source.startswith("modelled:cpu"):
        return dict(CPU_LOAD_SHIFT)
    return None


def holds_under_load(
    ratio: float | None, low: float | None, high: float | None, band: float, shift: float | None
) -> bool | None:
    """Whether a verdict stays the same if the ratio moved by ``shift`` either way.

    The ratio and its interval are scaled by ``1 + shift`` and by ``1 / (1 + shift)`` (a
    change of the machine's load like the one :data:`CPU_LOAD_SHIFT` measured); the verdict
    holds when :func:`classify_ratio` gives the same call at both. ``None`` without a shift or
    a ratio.
    """
    if shift is None or ratio is None or not np.isfinite(ratio):
        return None
    verdict = classify_ratio(ratio, low, high, band)

    def scaled(x: float | None, k: float) -> float | None:
        return None if x is None or not np.isfinite(x) else x * k

    return all(
        classify_ratio(ratio * k, scaled(low, k), scaled(high, k), band) == verdict
        for k in (1.0 + shift, 1.0 / (1.0 + shift))
    )


VERDICT_COLUMNS = [
    "comparison", "variant", "baseline", "measure", "batch_size", "ratio", "low", "high",
    "interval", "verdict", "holds_under_load",
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
    load_shift: dict[str, float] | None = None,
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
        load_shift: Per measure, how far a change of the machine's load moved such ratios
            (:func:`load_shift_for`); ``None`` leaves ``holds_under_load`` empty.

    Returns:
        One row per (comparison, variant, baseline, measure): ``measure`` is ``training``
        (energy to reach the pair's target perplexity) or ``inference`` (energy per token at
        ``batch_size``); ``interval`` says where ``low``-``high`` came from (``seeds``:
        bootstrap over seeds; ``repeats``: run-to-run spread of the interleaved repeats or,
        for training, of the windows trained in turns; ``band``: none, ``1 +/- band``
        decides); ``holds_under_load``: whether the verdict survives that load shift
        (:func:`holds_under_load`).
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
        shift = None if load_shift is None else load_shift.get(measure)
        lo, hi = (lo, hi) if source else (None, None)
        rows.append(
            {"comparison": comp, "variant": var, "baseline": base, "measure": measure,
             "batch_size": None if b is None else int(b),
             "ratio": float(ratio) if ok else None,
             "low": lo, "high": hi, "interval": source or "band",
             "verdict": classify_ratio(ratio if ok else None, lo, hi, band),
             "holds_under_load": holds_under_load(ratio if ok else None, lo, hi, band, shift)}
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
