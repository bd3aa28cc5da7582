"""``mlenergy demo``: the main job on the embedded default (the dense-vs-MoE study)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mlenergy.commands.options import DataDirOption, resolve_data_dir
from mlenergy.studies.dense_vs_moe import run_study


def demo(
    data_dir: DataDirOption = None,
    report_dir: Annotated[Path, typer.Option(help="Where the study report is written.")] = Path(
        "reports/dense-vs-moe"
    ),
) -> None:
    """Run the default dense-vs-MoE study end to end (5 minutes on 2 quiet cores, 17 busy)."""
    result = run_study(
        size="tiny", data_dir=resolve_data_dir(data_dir), report_dir=report_dir, progress=True
    )
    typer.echo("\n" + "\n\n".join(result.verdict) + f"\n(energy: {result.energy_source})")
    typer.echo(f"store: {result.data_dir}  report: {result.report_path}")


def register(app: typer.Typer) -> None:
    """Add ``demo`` to the root app."""
    app.command("demo")(demo)
