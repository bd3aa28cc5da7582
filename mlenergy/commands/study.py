"""``mlenergy study dense-vs-moe``: the dense-versus-MoE study, end to end.

The last line of output names the store and the report: ``store: <dir>  report: <index.html>``.
Progress goes to stderr. Bad input (unknown size, ``--steps 0``, a corpus too small or
without text, an absent device) ends with one ``error:`` line and exit code 2, store unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mlenergy.commands.options import DataDirOption, resolve_data_dir

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
                "Study size: test (under a minute, for CI), tiny (default: about 2-3 minutes "
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
    report_dir: Annotated[Path, typer.Option(help="Where the report is written.")] = Path(
        "reports/dense-vs-moe"
    ),
    progress: Annotated[bool, typer.Option(help="Show progress on stderr.")] = True,
) -> None:
    """Train dense and MoE models, benchmark them, and report energy per unit of quality."""
    from mlenergy.studies.dense_vs_moe import run_study

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


def register(app: typer.Typer) -> None:
    """Add the ``study`` group to the root app."""
    app.add_typer(study_app, name="study")
