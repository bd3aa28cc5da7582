"""``mlenergy study dense-vs-moe``: the dense-versus-MoE study, end to end.

The last line of output names the store and the report: ``store: <dir>  report: <index.html>``.
Progress goes to stderr. Bad input (unknown size, ``--steps 0``, a corpus too small or
without text, an absent device) ends with one ``error:`` line and exit code 2, store unchanged.

``--measured`` runs the study on real GPU measurements (ML.ENERGY's, read from the shipped
reference beside the store's own measured runs) against published quality; its last line is
``summary: <summary.csv>  report: <index.html>``. With ``--carbon-intensity G`` or ``--region
CODE``, ``--price-kwh PRICE`` and ``--pue``, it first prints the headline table with grams of
CO2e and cost per response and per correct answer beside the joules (labelled with the
intensity's region, source and year); the report's tables and ``summary.csv`` add the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from mlenergy.commands.options import DataDirOption, FootprintOptions, resolve_data_dir
from mlenergy.commands.typed import changed, typed_command
from mlenergy.errors import UserError
from mlenergy.footprint import Footprint
from mlenergy.records.metrics import DEFAULT_ITL_LIMIT_MS
from mlenergy.studies.dense_vs_moe import run_study
from mlenergy.studies.measured_headline import terminal_lines
from mlenergy.studies.measured_study import DEFAULT_REPORT_DIR, run_measured_study

study_app = typer.Typer(
    name="study",
    help="Run studies that answer a question end to end (records, report, figures).",
    no_args_is_help=True,
)


@dataclass(frozen=True)
class StudyOutput:
    """Where the study's records and report go, and whether progress is shown."""

    data_dir: DataDirOption = None
    report_dir: Path | None = None
    """Where the report is written (default: reports/dense-vs-moe, reports/dense-vs-moe-measured
    with --measured)."""
    progress: bool = True
    """Show progress on stderr."""


@dataclass(frozen=True)
class ToyStudy:
    """The toy study: train small dense and MoE models, then benchmark them."""

    size: str = "tiny"
    """Study size: test (under a minute, for CI), tiny (default: about 4 minutes on 2 CPU cores,
    longer on a busy machine), small (for a GPU: --device cuda)."""
    steps: int | None = None
    """Training steps per model (default: the size's)."""
    seeds: int = 1
    """Training seeds per model (>= 2 for CIs)."""
    device: str = "cpu"
    """Torch device: cpu, cuda, cuda:<i>."""
    corpus: str = "pydoc"
    """Text: pydoc (built in), a file or folder, or hf:<dataset>."""


@dataclass(frozen=True)
class MeasuredStudy:
    """The measured study's sources: the reference, quality scores, a GPU, the deadline."""

    reference: Path | None = None
    """Reference folder (default: $MLENERGY_REFERENCE_DIR, else the shipped one)."""
    quality_file: Path | None = None
    """Published-quality CSV (default: the reference's)."""
    gpu: str | None = None
    """With --measured: only this GPU (B200, H100)."""
    itl_limit_ms: float = DEFAULT_ITL_LIMIT_MS
    """With --measured: median inter-token latency deadline, ms."""
    benchmark: str = "GPQA-Diamond"
    """With --measured: quality benchmark of the gpqa task."""
    with_reference: bool = field(
        default=True, metadata={"cli": {"flags": ("--with-reference/--without-reference",)}}
    )
    """With --measured: read the reference's measurements beside the store's (read only;
    never imported)."""


MEASURED_HELP = (
    "Real GPU measurements (ML.ENERGY's shipped reference, read beside the store's measured "
    "runs) against the store's quality records (e.g. imported lm-eval results), else published "
    "scores, instead of the toy models."
)


@study_app.command("dense-vs-moe")
@typed_command
def dense_vs_moe(
    output: StudyOutput,
    toy: ToyStudy,
    real: MeasuredStudy,
    site: FootprintOptions,
    measured: Annotated[bool, typer.Option("--measured", help=MEASURED_HELP)] = False,
) -> None:
    """Train dense and MoE models, benchmark them, and report energy per unit of quality."""
    misplaced = changed(toy) if measured else [*changed(real), *site.given()]
    if misplaced:
        raise UserError(
            f"{', '.join(misplaced)} {'do' if len(misplaced) > 1 else 'does'} not apply "
            f"{'with' if measured else 'without'} --measured",
            "drop it, or " + ("leave out --measured" if measured else "add --measured"),
        )
    data_dir = resolve_data_dir(output.data_dir)
    if measured:
        _measured(data_dir, output, real, site.footprint())
        return
    result = run_study(
        size=toy.size, steps=toy.steps, device=toy.device, seeds=toy.seeds, data_dir=data_dir,
        report_dir=output.report_dir or Path("reports/dense-vs-moe"), progress=output.progress,
        corpus=toy.corpus,
    )  # fmt: skip
    typer.echo("")
    typer.echo(result.conclusion)
    typer.echo(f"(study {result.study_id}, {result.elapsed_s:.0f} s)")
    typer.echo(f"store: {result.data_dir}  report: {result.report_path}")


def _measured(
    data_dir: Path, output: StudyOutput, real: MeasuredStudy, footprint: Footprint | None
) -> None:
    """Run the measured study and print its headline, conclusion and warnings."""
    result = run_measured_study(
        data_dir, real.reference, include_reference=real.with_reference,
        quality_file=real.quality_file, gpu=real.gpu, itl_limit_ms=real.itl_limit_ms,
        benchmark=real.benchmark, report_dir=output.report_dir or DEFAULT_REPORT_DIR,
        progress=output.progress, footprint=footprint,
    )  # fmt: skip
    typer.echo("\n" + "\n".join(terminal_lines(result)))
    typer.echo(f"summary: {result.csv_path}  report: {result.report_path}")


def register(app: typer.Typer) -> None:
    """Add the ``study`` group to the root app."""
    app.add_typer(study_app, name="study")
