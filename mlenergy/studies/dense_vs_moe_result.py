"""What the trained dense-versus-MoE study returns: its records, tables, conclusion and report.

:func:`mlenergy.studies.dense_vs_moe.run_study` makes a :class:`StudyResult`;
:func:`mlenergy.studies.report.build_report` fills in its tables and conclusion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mlenergy.records import QualityResult, RunRecord

if TYPE_CHECKING:
    import pandas as pd


@dataclass
class StudyResult:
    """What :func:`run_study` returns.

    Attributes:
        study_id: Tag shared by the study's records.
        size: Study size name.
        data_dir: The store folder.
        report_dir: The report folder.
        report_path: ``index.html`` of the report.
        summary_path: ``summary.md`` (the Markdown table and conclusion).
        runs: Run records made (training and inference).
        quality: Quality records made.
        summary: One row per model variant (:func:`mlenergy.analysis.energy_quality.model_summary`).
        comparisons: MoE versus dense baselines at iso-quality.
        verdicts: Every MoE/dense ratio with its interval and verdict
            (:func:`mlenergy.studies.conclusion.verdict_table`; ``verdicts.csv``).
        conclusion: The conclusion text, computed from the data.
        verdict: Its verdict paragraphs (MoE against dense matched on active, then on total
            parameters), the study's answer in short.
        energy_source: Energy label of the study's figures.
        elapsed_s: Wall time of the whole study, seconds.
        train_tokens: Tokens in the corpus's training split.
    """

    study_id: str
    size: str
    data_dir: Path
    report_dir: Path
    report_path: Path
    summary_path: Path
    runs: list[RunRecord] = field(default_factory=list)
    quality: list[QualityResult] = field(default_factory=list)
    summary: pd.DataFrame | None = None
    comparisons: pd.DataFrame | None = None
    verdicts: pd.DataFrame | None = None
    conclusion: str = ""
    verdict: list[str] = field(default_factory=list)
    energy_source: str = ""
    elapsed_s: float = 0.0
    train_tokens: int = 0
