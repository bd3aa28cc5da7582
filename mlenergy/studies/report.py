"""The dense-vs-MoE report: HTML page, PNG figures, Markdown table and a computed conclusion.

Everything is computed from the store (the study's records, selected by ``study_id``) with
the functions of :mod:`mlenergy.analysis`, the same ones the notebooks use. Every figure
names its energy source; a modelled figure says that it is modelled. Files are written to a
temporary folder first and moved into place one by one, so a report is never half-written.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from mlenergy.analysis import energy_quality as eq
from mlenergy.analysis import tables
from mlenergy.studies.conclusion import (
    conclusion,
    energy_note,
    energy_unit,
    fmt_value,
    inference_spread,
    levelled_checkpoints,
    ratio_text,
    tie_band,
    training_spread,
    verdict_paragraphs,
    verdict_table,
)
from mlenergy.studies.figures import write_figures
from mlenergy.studies.generation_note import generation_note
from mlenergy.studies.report_page import Section, StudyReport, markdown_table
from mlenergy.studies.verdicts import load_shift_for

__all__ = ["build_report", "markdown_table", "study_tables", "table_rows"]

if TYPE_CHECKING:
    from mlenergy.studies.dense_vs_moe_result import StudyResult
    from mlenergy.studies.families import StudySize

MEASURED_REPORT_LINK = "../dense-vs-moe-measured/index.html"
"""Relative link to the measured study's report (``reports/dense-vs-moe-measured``)."""
MEASURED_REPORT_COMMAND = "mlenergy study dense-vs-moe --measured"
"""The command that writes the measured study's report beside this one."""


def measured_report_exists(report_dir: str | Path) -> bool:
    """Whether the measured study's report sits beside ``report_dir`` (so a link to it works)."""
    return (Path(report_dir).parent / "dense-vs-moe-measured" / "index.html").is_file()


def measured_link(report_dir: str | Path) -> tuple[str, str, str, str] | None:
    """The link to the measured study's report, or ``None`` when it is not beside this one."""
    if not measured_report_exists(report_dir):
        return None
    return (
        "measured-link",
        MEASURED_REPORT_LINK,
        "../dense-vs-moe-measured/summary.md",
        "measured study (production models on H100/B200 GPUs against published quality)",
    )


MEASURED_MISSING = (
    "measured-missing",
    "The measured study (production models on H100/B200 GPUs against published quality) is "
    f"not in this reports folder yet: `{MEASURED_REPORT_COMMAND}` writes it.",
)
"""What the toy report says instead of a link while the measured report does not exist."""


def study_tables(source: Any, study_id: str, batch_size: int | None = None) -> dict[str, Any]:
    """All tables of one study: raw frames, per-seed rows, per-variant summary.

    Args:
        source: A ``RunStore`` or records.
        study_id: The study's id tag.
        batch_size: Inference batch size of the summary (default: the largest).

    Returns:
        ``training``, ``checkpoints``, ``inference``, ``quality``, ``per_seed`` and ``summary``
        frames, and ``batch_size`` (the reference inference batch size).
    """
    tr = tables.training_frame(source, study_id=study_id)
    ck = tables.checkpoints_frame(source, study_id=study_id)
    inf = tables.inference_frame(source, study_id=study_id)
    q = tables.quality_frame(source, study_id=study_id)
    if tr.empty:
        raise ValueError(f"study {study_id!r} has no training runs in the store")
    if batch_size is None and not inf.empty:
        batch_size = int(inf["batch_size"].max())
    per = eq.per_seed_table(tr, levelled_checkpoints(ck), inf, q, batch_size=batch_size)
    summary = eq.model_summary(tr, per)
    return {
        "training": tr,
        "checkpoints": ck,
        "inference": inf,
        "quality": q,
        "per_seed": per,
        "summary": summary,
        "batch_size": batch_size,
    }


def _with_ci(row: pd.Series, col: str, scale: float = 1.0, digits: int = 3) -> str:
    v = row.get(col)
    lo, hi = row.get(f"{col}_ci_low"), row.get(f"{col}_ci_high")
    if v is None or not np.isfinite(v):
        return "n/a"
    text = fmt_value(v * scale, digits)
    if lo is not None and hi is not None and np.isfinite(lo) and np.isfinite(hi) and hi > lo:
        text += f" [{fmt_value(lo * scale, digits)}, {fmt_value(hi * scale, digits)}]"
    return text


def table_rows(summary: pd.DataFrame, batch_size: int | None) -> tuple[list[str], list[list[str]]]:
    """Header and formatted rows of the summary table (one row per model).

    Columns: model, family, active and total parameters, final validation perplexity,
    training energy, training energy to the iso-perplexity target (the energy-per-quality
    figure), perplexity at the iso-energy budget, inference energy per token at the reference
    batch size, tokens per second per watt, on the Pareto frontier.
    """
    target = float(summary["target_perplexity"].iloc[0])
    budget = summary["budget_j"].iloc[0]
    unit, scale = energy_unit(summary["train_energy_j"])
    budget_txt = fmt_value(budget * scale) if budget is not None and np.isfinite(budget) else "n/a"
    header = [
        "model",
        "family",
        "active params",
        "total params",
        "val perplexity",
        f"train energy ({unit})",
        f"train {unit} to reach ppl {target:.4g}",
        f"ppl at {budget_txt} {unit}",
        f"inference J/token (batch {batch_size})",
        "tokens/s/W",
        "Pareto",
    ]
    rows = []
    for _, r in summary.iterrows():
        rows.append(
            [
                str(r["variant"]),
                str(r.get("family", "")),
                fmt_value(r.get("active_params")),
                fmt_value(r.get("total_params")),
                _with_ci(r, "final_val_perplexity", digits=4),
                _with_ci(r, "train_energy_j", scale),
                _with_ci(r, "train_energy_j_to_target", scale),
                _with_ci(r, "val_perplexity_at_budget", digits=4),
                _with_ci(r, "energy_per_token_j"),
                _with_ci(r, "tokens_per_s_per_w"),
                fmt_value(bool(r.get("on_pareto_frontier"))),
            ]
        )
    return header, rows


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}
.note{background:#fff4d6;border:1px solid #e0b84a;padding:.6em 1em;border-radius:4px}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}
"""


def _expert_rows(training: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Routing of each MoE run: experts, top-k, shared, load-balancing loss, utilisation."""
    header = [
        "MoE model",
        "seed",
        "experts",
        "top-k",
        "shared",
        "load-balancing loss (last interval; balanced = top-k)",
        "busiest expert share",
        "utilisation CV",
    ]
    rows = []
    moe = training[training["is_moe"].astype(bool)] if "is_moe" in training else training[:0]
    for _, r in moe.iterrows():
        util = r.get("expert_utilisation") or ()
        rows.append(
            [
                str(r["variant"]),
                fmt_value(r.get("seed")),
                fmt_value(r.get("num_experts")),
                fmt_value(r.get("experts_per_token")),
                fmt_value(r.get("num_shared_experts")),
                fmt_value(r.get("final_load_balancing_loss")),
                f"{max(util):.1%}" if util else "n/a",
                fmt_value(r.get("expert_utilisation_cv"), 2),
            ]
        )
    return header, rows


def _comparison_rows(comparisons: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    header = [
        "comparison",
        "MoE",
        "dense baseline",
        "iso-perplexity",
        "train energy MoE/dense",
        "J/token MoE/dense",
    ]
    rows = []
    for _, c in comparisons.iterrows():
        rows.append(
            [
                c["comparison"],
                c["variant"],
                c["baseline"],
                f"{c['target_perplexity']:.4g}",
                ratio_text(
                    c["train_energy_ratio"],
                    c["train_energy_ratio_ci_low"],
                    c["train_energy_ratio_ci_high"],
                ),
                ratio_text(
                    c["energy_per_token_ratio"],
                    c["energy_per_token_ratio_ci_low"],
                    c["energy_per_token_ratio_ci_high"],
                ),
            ]
        )
    return header, rows


def build_report(
    result: StudyResult,
    store: Any,
    size: StudySize,
    *,
    corpus: str,
    steps: int,
    seeds: int,
) -> Path:
    """Compute the study's tables from the store and write the report; fill ``result``.

    Args:
        result: The study result (its ``study_id`` selects the records; tables and
            conclusion are stored back on it).
        store: The ``RunStore`` (or records) holding the study.
        size: The study size.
        corpus: Corpus name.
        steps: Training steps per model.
        seeds: Seeds per model.

    Returns:
        Path of ``index.html``.
    """
    t = study_tables(store, result.study_id)
    comps = eq.pairwise_comparisons(
        t["per_seed"], levelled_checkpoints(t["checkpoints"]), size.pairs()
    )
    source = result.energy_source or str(t["training"]["energy_source"].iloc[0])
    noise = eq.measurement_noise(t["checkpoints"])
    by_batch = eq.ratio_by_batch(t["inference"], size.pairs())
    spread = inference_spread(result.runs)
    train_spread = training_spread(t["checkpoints"])
    paragraphs = conclusion(
        t["summary"],
        comps,
        energy_source=source,
        batch_size=t["batch_size"],
        seeds=seeds,
        size=size.name,
        noise=noise,
        by_batch=by_batch,
        spread=spread,
        train_spread=train_spread,
    )
    verdicts = verdict_table(
        comps, by_batch, band=tie_band(noise), batch_size=t["batch_size"], spread=spread,
        train_spread=train_spread, load_shift=load_shift_for(source),
    )  # fmt: skip
    result.verdicts = verdicts
    result.summary, result.comparisons, result.conclusion = (
        t["summary"],
        comps,
        "\n\n".join(paragraphs),
    )
    result.verdict = verdict_paragraphs(paragraphs)
    header, rows = table_rows(t["summary"], t["batch_size"])
    c_header, c_rows = _comparison_rows(comps) if not comps.empty else ([], [])
    tables: list[_Table] = [
        ("Models", "summary", header, rows),
        ("MoE versus dense at iso-quality", "comparisons", c_header, c_rows),
        ("Routing of the MoE models", "experts", *_expert_rows(t["training"])),
        ("Verdicts (less / more / tie)", "verdicts", *_verdict_rows(verdicts)),
    ]
    meta = _meta(result, size, corpus=corpus, steps=steps, seeds=seeds)
    if _epochs(result, size, steps) > 4:
        paragraphs.insert(
            -1,
            f"Caution: each model saw its training text {_epochs(result, size, steps):.0f} "
            "times, so the larger models may memorise it; give a larger --corpus for this size.",
        )
        result.conclusion = "\n\n".join(paragraphs)

    notes = [("energy-source", energy_note(source))]
    generated = generation_note(result.runs)
    if generated is not None:
        notes.append(("generation", generated))
    report = StudyReport(
        title="Dense versus Mixture-of-Experts: energy per unit of quality",
        notes=notes,
        meta=meta,
        link=measured_link(result.report_dir),
        missing_link=MEASURED_MISSING,
        sections=tables,
        conclusion=paragraphs,
        keep_empty=False,
        css=_CSS,
    )
    summary = t["summary"].drop(columns=["expert_utilisation"], errors="ignore")
    return report.publish(
        result.report_dir,
        lambda tmp: write_figures(t, tmp, source),
        lambda path: summary.to_csv(path, index=False),
        lambda tmp: _write_verdicts(verdicts, tmp),
    )


VERDICTS_CSV = "verdicts.csv"
"""The report's file with every MoE/dense ratio, its interval and its verdict."""


def _write_verdicts(verdicts: pd.DataFrame, folder: Path) -> list[str]:
    verdicts.to_csv(folder / VERDICTS_CSV, index=False)
    return [VERDICTS_CSV]


def _verdict_rows(verdicts: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """The verdict table's rows: what was compared, the ratio with its interval, the call."""
    header = [
        "comparison", "MoE", "dense baseline", "measure", "MoE/dense", "interval", "verdict",
        "holds under load",
    ]  # fmt: skip
    holds = {True: "yes", False: "no: unsettled"}
    source = {"seeds": "bootstrap over seeds", "repeats": "run-to-run spread", "band": "band"}
    rows = []
    for _, v in verdicts.iterrows():
        measure = "training energy to target" if v["measure"] == "training" else (
            f"J/token at batch {v['batch_size']}" if pd.notna(v["batch_size"]) else "J/token"
        )  # fmt: skip
        rows.append(
            [v["comparison"], v["variant"], v["baseline"], measure,
             ratio_text(v["ratio"], v["low"], v["high"]), source[v["interval"]], v["verdict"],
             holds.get(v["holds_under_load"], "not measured")]
        )  # fmt: skip
    return header, rows


_Table = Section
"""A report table: ``(title, html id, header, rows)``; the first is the models' summary."""


def _epochs(result: StudyResult, size: StudySize, steps: int) -> float:
    """Passes each model made over the training split (0 when its size is unknown)."""
    if not result.train_tokens:
        return 0.0
    return steps * size.batch_size * size.seq_len / result.train_tokens


def _meta(result: StudyResult, size: StudySize, *, corpus: str, steps: int, seeds: int) -> str:
    """The line saying what was run: study, size, budget, corpus, store, passes over the text."""
    meta = (
        f"study {result.study_id} - size {size.name}, {steps} steps per model, "
        f"{seeds} seed(s), corpus {corpus}, seq_len {size.seq_len}, "
        f"batch {size.batch_size}; store {result.data_dir}"
    )
    if result.train_tokens:
        epochs = _epochs(result, size, steps)
        meta += f"; {epochs:.2f} passes over the {result.train_tokens:,}-token training split"
    return meta
