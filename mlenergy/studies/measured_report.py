"""Files of the measured dense-versus-MoE report.

``index.html``, ``summary.md``, ``summary.csv`` and PNG figures are written to a temporary
folder and moved into place one by one, so a report is never half-written.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from mlenergy.analysis.stalls import host_bound_reason
from mlenergy.studies.measured import energy_per_correct_interval, summary_table
from mlenergy.studies.measured_analysis import CLAIM_COLUMNS, FIT_COLUMNS, PAIR_COLUMNS
from mlenergy.studies.measured_conclusion import QUALITY_NOTE, SAMPLING_NOTE
from mlenergy.studies.measured_figures import write_measured_figures
from mlenergy.studies.measured_footprint import (
    footprint_cells,
    footprint_headers,
    footprint_note,
    with_footprint,
)
from mlenergy.studies.report_page import StudyReport

if TYPE_CHECKING:
    from mlenergy.footprint import Footprint
    from mlenergy.studies.measured_result import MeasuredStudyResult

TOY_REPORT_LINK = "../dense-vs-moe/index.html"
"""Relative link to the toy-scale study's report (``reports/dense-vs-moe``)."""


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:12px;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;vertical-align:top}
td:first-child,th:first-child{text-align:left}
.note{background:#fff4d6;border:1px solid #e0b84a;padding:.6em 1em;border-radius:4px}
.warn{background:#fde8e8;border:1px solid #d88;padding:.6em 1em;border-radius:4px}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}
"""


def _f(value: object, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | float):
        v = float(value)
        if 1000 <= abs(v) < 1e7:
            return f"{v:,.0f}"
        return f"{v:.{digits}g}"
    return str(value)


def _per_correct_text(row: pd.Series) -> str:
    value = row["energy_per_correct_j"]
    if not math.isfinite(value):
        return ""
    text = _f(value)
    ci = energy_per_correct_interval(row)
    if ci is not None:
        text += f" [{_f(ci[0])}, {_f(ci[1])}]"
    return text


def rows_table(
    rows: pd.DataFrame, footprint: Footprint | None = None
) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the report's main table (one row per model x GPU x task).

    Args:
        rows: The study's rows.
        footprint: Carbon and cost settings; their columns follow the joules per correct
            answer (``None``: none).
    """
    header = [
        "model", "arch", "GPU", "task", "configuration (lowest energy within deadline)",
        "host-bound (stalled)", "J/response", "J/token", "median ITL (ms)", "benchmark", "score",
        "J per correct [95% from benchmark size]",
        *(footprint_headers(footprint) if footprint is not None else []),
        "energy source", "quality source", "how matched / why no quality",
    ]  # fmt: skip
    cells = []
    for _, r in rows.sort_values(["task", "gpu", "arch", "model_id"]).iterrows():
        how = r["quality_how"] or r["quality_reason"] or r["note"]
        itl = _f(r["median_itl_ms"])
        if itl and r.get("latency_kind", "median ITL") != "median ITL":
            itl += f" ({r['latency_kind']})"
        if r["quality_alternatives"]:
            how += f" (other published values: {r['quality_alternatives']})"
        cells.append(
            [
                r["model_id"], r["arch"], r["gpu"], r["task"], r["configuration"],
                "yes" if r.get("host_bound") is True else "",
                _f(r["energy_per_response_j"]), _f(r["energy_per_token_j"]),
                itl, r["quality_benchmark"], _f(r["quality_score"], 4),
                _per_correct_text(r),
                *(footprint_cells(r, footprint) if footprint is not None else []),
                f"{r['energy_source']} ({r['measured_by']})",
                r["quality_source"], how,
            ]
        )  # fmt: skip
    return header, cells


def frame_cells(frame: pd.DataFrame, columns: list[str]) -> tuple[list[str], list[list[str]]]:
    """Header and formatted cells of ``frame`` restricted to ``columns``."""
    if frame.empty:
        return columns, []
    return columns, [[_f(v) for v in row] for row in frame[columns].itertuples(index=False)]


def _sections(result: MeasuredStudyResult) -> list[tuple[str, str, list[str], list[list[str]]]]:
    front_cols = ["task", "gpu", "model_id", "arch", "energy_per_response_j", "quality_score"]
    on_front = (
        result.frontier[result.frontier["on_frontier"]]
        if not result.frontier.empty
        else (result.frontier)
    )
    return [
        ("Models", "rows", *rows_table(result.rows, result.footprint)),
        ("Energy per correct answer (J) within each latency deadline", "deadlines",
         *frame_cells(result.deadlines, list(result.deadlines.columns))),
        ("Matched-quality pairs (MoE / dense energy per response at each model's best "
         "configuration; ratio_range_low/high: the range of that same ratio over every pairing "
         "of the two models' configurations within the deadline, a designed grid, not a sample)",
         "pairs", *frame_cells(result.pairs, list(PAIR_COLUMNS))),
        ("Pareto frontier of quality against energy per response", "frontier",
         *frame_cells(on_front, front_cols)),
        ("Energy per token against parameters with GPU count as its own term (log-log fits; "
         "r2_*: variance of log energy per token explained by parameters alone, GPU count alone, "
         "both; BF16/FP8 copies merged: points <= model_ids; slope interval: bootstrap over "
         "models)", "fits", *frame_cells(result.fits, list(FIT_COLUMNS))),
        ("Host-bound runs: configurations the estimator's host-bound rule flags", "stalled",
         *frame_cells(result.stalled, _STALLED_COLUMNS)),
        ("Many total, few active parameters: the DeepSeek-R1 claim", "claim",
         *frame_cells(result.claim, list(CLAIM_COLUMNS))),
        *_unstalled_sections(result),
        ("Quality sources (not measured in the same run)", "quality-sources",
         *_sources(result.rows)),
    ]  # fmt: skip


_STALLED_COLUMNS = [
    "model_id", "gpu", "task", "configuration", "energy_per_token_j", "avg_power_w",
    "median_itl_ms",
]  # fmt: skip


def _unstalled_sections(result: MeasuredStudyResult) -> list[tuple[str, str, list, list]]:
    """The models, pairs and fits again without the host-bound configurations."""
    clean = result.unstalled
    if clean is None:
        return []
    return [
        ("Without the host-bound runs: models", "rows-unstalled",
         *rows_table(clean.rows, result.footprint)),
        ("Without the host-bound runs: matched-quality pairs", "pairs-unstalled",
         *frame_cells(clean.pairs, list(PAIR_COLUMNS))),
        ("Without the host-bound runs: parameter fits", "fits-unstalled",
         *frame_cells(clean.fits, list(FIT_COLUMNS))),
    ]  # fmt: skip


def _sources(rows: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """One row per model x benchmark with a quality figure: label, score and where it was read."""
    have = rows[rows["quality_source"] != ""]
    seen = have.drop_duplicates(["model_id", "quality_benchmark", "quality_score"])
    header = ["model", "benchmark", "score", "label", "source (date; setting)"]
    cells = [
        [r["model_id"], r["quality_benchmark"], _f(r["quality_score"], 4), r["quality_source"],
         r["quality_reference"]]
        for _, r in seen.sort_values(["quality_benchmark", "model_id"]).iterrows()
    ]  # fmt: skip
    return header, cells


def _meta(result: MeasuredStudyResult) -> str:
    return (
        f"Deadline: median inter-token latency <= {result.itl_limit_ms:g} ms; GPU: "
        f"{result.gpu or 'all'}; benchmarks: {result.benchmarks_text}; store {result.data_dir}"
        + (
            f" with {result.from_reference} measurements of the shipped reference read beside "
            "it (read only, not imported)"
            if result.from_reference
            else " (no reference read)"
        )
        + f"; published quality from {result.quality_path}. Energy per response = energy per "
        "output token x the exact mean output length; a run's mode (thinking or not) is read "
        "from its mean output length (>= 2,000 tokens: thinking). Host-bound: "
        + host_bound_reason()
        + "."
    )


def write_measured_report(result: MeasuredStudyResult) -> Path:
    """Write the report of ``result`` into ``result.report_dir``; return ``index.html``."""
    report = StudyReport(
        title="Dense versus MoE on measured GPUs: energy per correct answer",
        notes=[
            ("energy-source", result.energy_note),
            *(
                [("footprint-note", footprint_note(result.footprint))]
                if result.footprint is not None
                else []
            ),
            ("quality-note", QUALITY_NOTE),
            ("sampling-note", SAMPLING_NOTE),
        ],
        meta=_meta(result),
        link=(
            "toy-link",
            TOY_REPORT_LINK,
            "../dense-vs-moe/summary.md",
            "toy-scale study (models trained on a CPU, modelled energy)",
        ),
        sections=_sections(result),
        conclusion=result.conclusion,
        warnings=result.warnings,
        conclusion_first=True,
        css=_CSS,
    )
    return report.publish(
        result.report_dir,
        lambda tmp: write_measured_figures(result.rows, result.frontier, tmp, result.energy_note),
        lambda path: with_footprint(
            summary_table(result.rows), result.rows, result.footprint
        ).to_csv(path, index=False),
    )
