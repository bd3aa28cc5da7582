"""What the measured dense-versus-MoE study returns (and its report shows).

:func:`mlenergy.studies.measured_study.run_measured_study` fills a
:class:`MeasuredStudyResult`; :func:`mlenergy.studies.measured_report.write_measured_report`
writes it out.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from mlenergy.footprint import Footprint
from mlenergy.studies.measured import summary_table
from mlenergy.studies.measured_footprint import with_footprint


@dataclass(frozen=True)
class Findings:
    """The study's comparisons on one set of configurations.

    Attributes:
        rows: One row per model x GPU x task (best configuration within the deadline, quality).
        pairs: Matched-quality dense/MoE pairs.
        fits: Energy per token against parameters and GPU count.
        claim: Sparse MoE against dense models.
    """

    rows: pd.DataFrame
    pairs: pd.DataFrame
    fits: pd.DataFrame
    claim: pd.DataFrame


@dataclass(repr=False)
class MeasuredStudyResult:
    """What :func:`run_measured_study` returns (and the report shows).

    Attributes:
        report_dir: The report folder.
        report_path: Its ``index.html``.
        summary_path: Its ``summary.md``.
        csv_path: Its ``summary.csv`` (columns :data:`mlenergy.studies.measured.SUMMARY_COLUMNS`).
        data_dir: The store read.
        quality_path: The published-quality file read.
        itl_limit_ms: The latency deadline, milliseconds.
        gpu: The GPU kept (``None``: all).
        benchmarks_text: Which benchmark each task is judged on.
        from_reference: Measurements read from the reference layer (read only, never
            imported into the store).
        configs: Every measured configuration.
        rows: One row per model x GPU x task (best configuration, quality, energy per correct).
        frontier: Rows with quality and their Pareto flag.
        pairs: Matched-quality dense/MoE pairs.
        fits: Energy per token against parameter counts.
        claim: Sparse MoE against dense models.
        unstalled: The same comparisons without the configurations the host-bound rule flags
            (``None`` when none is flagged).
        stalled: The flagged configurations (``configs[configs.host_bound]``).
        deadlines: Energy per correct answer within several latency deadlines.
        warnings: Listed warnings (unmatched quality ids, models left out of quality comparisons).
        conclusion: The conclusion's paragraphs.
        energy_note: Energy source and who measured it.
        elapsed_s: Wall time, seconds.
        footprint: Carbon and cost settings of the headline table (``None``: joules only).
    """

    report_dir: Path
    report_path: Path
    summary_path: Path
    csv_path: Path
    data_dir: Path
    quality_path: Path
    itl_limit_ms: float
    gpu: str | None
    benchmarks_text: str
    from_reference: int = 0
    configs: pd.DataFrame = field(default_factory=pd.DataFrame)
    rows: pd.DataFrame = field(default_factory=pd.DataFrame)
    frontier: pd.DataFrame = field(default_factory=pd.DataFrame)
    pairs: pd.DataFrame = field(default_factory=pd.DataFrame)
    fits: pd.DataFrame = field(default_factory=pd.DataFrame)
    claim: pd.DataFrame = field(default_factory=pd.DataFrame)
    unstalled: Findings | None = None
    stalled: pd.DataFrame = field(default_factory=pd.DataFrame)
    deadlines: pd.DataFrame = field(default_factory=pd.DataFrame)
    warnings: list[str] = field(default_factory=list)
    conclusion: list[str] = field(default_factory=list)
    energy_note: str = ""
    elapsed_s: float = 0.0
    footprint: Footprint | None = None

    @property
    def summary(self) -> pd.DataFrame:
        """The ``summary.csv`` table (with carbon and cost when a footprint is set)."""
        return with_footprint(summary_table(self.rows), self.rows, self.footprint)

    def _counts(self) -> str:
        with_quality = int(self.rows["quality_score"].notna().sum()) if len(self.rows) else 0
        return (
            f"{len(self.configs)} configurations, {len(self.rows)} model x GPU x task rows "
            f"({with_quality} with quality), {len(self.warnings)} warning(s)"
        )

    def __repr__(self) -> str:
        return (
            f"MeasuredStudyResult({self._counts()}; deadline {self.itl_limit_ms:g} ms; "
            f"report {self.report_path})"
        )

    def _repr_html_(self) -> str:
        """Notebook display: counts, sources, conclusion and the summary table (not every frame)."""
        paragraphs = "".join(f"<p>{html.escape(p)}</p>" for p in self.conclusion)
        table = self.summary.to_html(index=False, na_rep="", float_format=lambda v: f"{v:.4g}")
        return (
            "<div class='mlenergy-measured-study'>"
            f"<p><b>Measured dense-versus-MoE study</b>: {html.escape(self._counts())}; median "
            f"ITL deadline {self.itl_limit_ms:g} ms; report "
            f"<code>{html.escape(str(self.report_path))}</code></p>"
            f"<p>{html.escape(self.energy_note)}</p>{paragraphs}{table}</div>"
        )
