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

from pathlib import Path
from typing import Annotated

import typer

from mlenergy.commands.options import (
    CarbonIntensityOption,
    DataDirOption,
    PriceKwhOption,
    PueOption,
    RegionOption,
    footprint_from,
    resolve_data_dir,
)
from mlenergy.errors import UserError

study_app = typer.Typer(
    name="study",
    help="Run studies that answer a question end to end (records, report, figures).",
    no_args_is_help=True,
)


@study_app.command("dense-vs-moe")
def dense_vs_moe(
    size: Annotated[
        str,
        typer.Option(
            help=(
                "Study size: test (under a minute, for CI), tiny (default: about 4 minutes "
                "on 2 CPU cores, longer on a busy machine), small (for a GPU: --device cuda)."
            )
        ),
    ] = "tiny",
    steps: Annotated[
        int | None, typer.Option(help="Training steps per model (default: the size's).")
    ] = None,
    device: Annotated[str, typer.Option(help="Torch device: cpu, cuda, cuda:<i>.")] = "cpu",
    seeds: Annotated[int, typer.Option(help="Training seeds per model (>= 2 for CIs).")] = 1,
    corpus: Annotated[
        str, typer.Option(help="Text: pydoc (built in), a file or folder, or hf:<dataset>.")
    ] = "pydoc",
    data_dir: DataDirOption = None,
    report_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where the report is written (default: reports/dense-vs-moe, "
            "reports/dense-vs-moe-measured with --measured)."
        ),
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show progress on stderr.")] = True,
    measured: Annotated[
        bool,
        typer.Option(
            "--measured",
            help="Real GPU measurements (ML.ENERGY's shipped reference, read beside the "
            "store's measured runs) against the "
            "store's quality records (e.g. imported lm-eval results), else published scores, "
            "instead of the toy models.",
        ),
    ] = False,
    reference: Annotated[
        Path | None,
        typer.Option(
            help="Reference folder (default: $MLENERGY_REFERENCE_DIR, else the shipped one)."
        ),
    ] = None,
    with_reference: Annotated[
        bool,
        typer.Option(
            "--with-reference/--without-reference",
            help="With --measured: read the reference's measurements beside the store's "
            "(read only; never imported).",
        ),
    ] = True,
    quality_file: Annotated[
        Path | None,
        typer.Option(help="Published-quality CSV (default: the reference's)."),
    ] = None,
    gpu: Annotated[
        str | None, typer.Option(help="With --measured: only this GPU (B200, H100).")
    ] = None,
    itl_limit_ms: Annotated[
        float, typer.Option(help="With --measured: median inter-token latency deadline, ms.")
    ] = 50.0,
    benchmark: Annotated[
        str, typer.Option(help="With --measured: quality benchmark of the gpqa task.")
    ] = "GPQA-Diamond",
    carbon_intensity: CarbonIntensityOption = None,
    region: RegionOption = None,
    price_kwh: PriceKwhOption = None,
    pue: PueOption = None,
) -> None:
    """Train dense and MoE models, benchmark them, and report energy per unit of quality."""
    toy = {"--size": size != "tiny", "--steps": steps is not None, "--seeds": seeds != 1,
           "--device": device != "cpu", "--corpus": corpus != "pydoc"}  # fmt: skip
    real = {"--reference": reference is not None, "--quality-file": quality_file is not None,
            "--gpu": gpu is not None, "--itl-limit-ms": itl_limit_ms != 50.0,
            "--benchmark": benchmark != "GPQA-Diamond",
            "--without-reference": not with_reference,
            "--carbon-intensity": carbon_intensity is not None, "--region": region is not None,
            "--price-kwh": price_kwh is not None, "--pue": pue is not None}  # fmt: skip
    misplaced = [k for k, v in (toy if measured else real).items() if v]
    if misplaced:
        raise UserError(
            f"{', '.join(misplaced)} {'do' if len(misplaced) > 1 else 'does'} not apply "
            f"{'with' if measured else 'without'} --measured",
            "drop it, or " + ("leave out --measured" if measured else "add --measured"),
        )
    if measured:
        footprint = footprint_from(carbon_intensity, region, price_kwh, pue)
        _measured(
            resolve_data_dir(data_dir), reference, quality_file, gpu, itl_limit_ms, benchmark,
            report_dir, progress, with_reference, footprint,
        )  # fmt: skip
        return
    from mlenergy.studies.dense_vs_moe import run_study

    report_dir = report_dir if report_dir is not None else Path("reports/dense-vs-moe")

    result = run_study(
        size=size,
        steps=steps,
        device=device,
        seeds=seeds,
        data_dir=resolve_data_dir(data_dir),
        report_dir=report_dir,
        progress=progress,
        corpus=corpus,
    )
    typer.echo("")
    typer.echo(result.conclusion)
    typer.echo(f"(study {result.study_id}, {result.elapsed_s:.0f} s)")
    typer.echo(f"store: {result.data_dir}  report: {result.report_path}")


def _measured(
    data_dir: Path,
    reference: Path | None,
    quality_file: Path | None,
    gpu: str | None,
    itl_limit_ms: float,
    benchmark: str,
    report_dir: Path | None,
    progress: bool,
    with_reference: bool = True,
    footprint: object = None,
) -> None:
    from mlenergy.studies.measured_study import DEFAULT_REPORT_DIR, run_measured_study

    result = run_measured_study(
        data_dir,
        reference,
        include_reference=with_reference,
        quality_file=quality_file,
        gpu=gpu,
        itl_limit_ms=itl_limit_ms,
        benchmark=benchmark,
        report_dir=report_dir if report_dir is not None else DEFAULT_REPORT_DIR,
        progress=progress,
        footprint=footprint,  # type: ignore[arg-type]
    )
    from mlenergy.studies.measured_headline import terminal_lines

    typer.echo("\n" + "\n".join(terminal_lines(result)))
    typer.echo(f"summary: {result.csv_path}  report: {result.report_path}")


def register(app: typer.Typer) -> None:
    """Add the ``study`` group to the root app."""
    app.add_typer(study_app, name="study")
