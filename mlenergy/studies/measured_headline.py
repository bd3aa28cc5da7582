"""What ``mlenergy study dense-vs-moe --measured`` prints: the answer in a few lines.

The conclusion's paragraphs, every table and the warnings go to the report
(:mod:`mlenergy.studies.measured_report`); the terminal gets one line per finding, each figure
with its models, then where the rest is. Every line is computed from the study's tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from mlenergy.studies.measured_conclusion import fits_headline
from mlenergy.studies.measured_footprint import headline_text

if TYPE_CHECKING:
    from mlenergy.studies.measured_study import MeasuredStudyResult


def _j(value: float) -> str:
    return f"{value / 1000:.3g} kJ" if value >= 1000 else f"{value:.3g} J"


def _short(model_id: str) -> str:
    return str(model_id).split("/")[-1]


def _best(g: pd.DataFrame) -> dict[str, Any]:
    """The lowest energy per correct answer of each family (``dense``, ``moe``...)."""
    have = g[g["energy_per_correct_j"].notna()]
    return {str(a): s.sort_values("energy_per_correct_j").iloc[0] for a, s in have.groupby("arch")}


def _ratio(g: pd.DataFrame) -> str | None:
    best = _best(g)
    if not best:
        return None
    if "dense" not in best or "moe" not in best:
        return f"only {', '.join(sorted(best))} has an accuracy, so no ratio"
    moe, dense = best["moe"], best["dense"]
    ratio = moe["energy_per_correct_j"] / dense["energy_per_correct_j"]
    return (
        f"best MoE / best dense energy per correct answer {ratio:.2f} ({_short(moe['model_id'])} "
        f"{_j(moe['energy_per_correct_j'])} against {_short(dense['model_id'])} "
        f"{_j(dense['energy_per_correct_j'])})"
    )


def _per_correct_lines(result: MeasuredStudyResult) -> list[str]:
    flagged = set()
    if not result.stalled.empty:
        flagged = set(zip(result.stalled["task"], result.stalled["gpu"], strict=True))
    lines = []
    for (task, gpu), g in result.rows.groupby(["task", "gpu"], sort=True):
        text = _ratio(g)
        if text is None:
            continue
        if (task, gpu) in flagged and result.unstalled is not None:
            clean = result.unstalled.rows
            cg = clean[(clean["task"] == task) & (clean["gpu"] == gpu)]
            again = _ratio(cg) if not cg.empty else None
            text += f"; without host-bound runs: {again or 'no model with an accuracy remains'}"
        lines.append(f"{task} on {gpu}: {text}")
    return lines


def _pairs_line(pairs: pd.DataFrame) -> str:
    if pairs.empty:
        return "matched-quality dense/MoE pairs: none within the matching tolerance"
    low = int((pairs["ratio_range_high"] < 1).sum())
    high = int((pairs["ratio_range_low"] > 1).sum())
    return (
        f"matched-quality dense/MoE pairs: {len(pairs)}, MoE/dense energy per response at the "
        f"best configurations median {float(pairs['energy_ratio'].median()):.2f}; MoE less "
        f"whatever the configurations in {low}, more in {high}, depends on them in "
        f"{len(pairs) - low - high}"
    )


def _claim_line(claim: pd.DataFrame) -> str | None:
    if claim.empty:
        return None
    holds = int(claim["claim_holds"].sum())
    return (
        f"sparse MoE (>= 100B total, <= 10% active) against dense: higher quality at no more "
        f"energy per token in {holds} of {len(claim)} comparisons"
    )


def terminal_lines(result: MeasuredStudyResult) -> list[str]:
    """The study's answer as a few lines (the command adds where the summary and report are).

    With a footprint, the headline table of carbon and cost comes first.
    """
    lines: list[str] = []
    if result.footprint is not None:
        lines += [headline_text(result.rows, result.footprint), ""]
    gpu = f" on {result.gpu}" if result.gpu else ""
    lines.append(
        f"Measured dense vs MoE{gpu} (median inter-token latency <= {result.itl_limit_ms:g} ms; "
        f"{result.benchmarks_text}):"
    )
    body = [*_per_correct_lines(result), _pairs_line(result.pairs)]
    fits = fits_headline(result.fits)
    claim = _claim_line(result.claim)
    body += [line for line in (fits, claim) if line]
    if not result.stalled.empty:
        body.append(
            f"host-bound: {len(result.stalled)} configurations flagged (figures above include "
            "them unless said; the report repeats every table without them)"
        )
    lines += [f"  - {line}" for line in body]
    warned = f"{len(result.warnings)} warning(s), " if result.warnings else ""
    lines.append(f"The reasoning, {warned}every table and figure: {result.report_path}")
    return lines
