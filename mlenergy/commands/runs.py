"""``mlenergy runs``: list, show, export, check and compact the stored runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from mlenergy.commands.options import DataDirOption, resolve_data_dir

runs_app = typer.Typer(
    name="runs", help="List, show and export the runs in the store.", no_args_is_help=True
)

_LIST_COLUMNS = (
    "run_id",
    "created_at",
    "model_id",
    "accelerator_model",
    "batch_size",
    "energy_source",
    "energy_per_token_j",
    "submitter",
)
_HEADERS = {"energy_per_token_j": "J/token"}
_PER_TOKEN_NOTE = (
    "J/token: decode-phase energy per generated token; values marked (request) come from "
    "runs with only a whole-request phase (prefill + decode energy per generated token)."
)


def _store(data_dir: Path | None):
    from mlenergy.store import RunStore

    return RunStore(resolve_data_dir(data_dir))


def _cell(value: object) -> str:
    import math

    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if hasattr(value, "strftime"):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    # Names come from submitters: print them literally, never as console markup.
    return str(value)


def _per_token_cells(frame) -> list[str]:
    """Decode energy per token (J) where present, else the request phase's, marked."""
    import math

    def present(value: object) -> bool:
        return value is not None and not (isinstance(value, float) and math.isnan(value))

    cells = []
    for dec, req in zip(
        frame["decode_energy_per_token_j"], frame["request_energy_per_token_j"], strict=True
    ):
        if present(dec):
            cells.append(_cell(float(dec)))
        elif present(req):
            cells.append(f"{_cell(float(req))} (request)")
        else:
            cells.append("-")
    return cells


@runs_app.command("list")
def list_runs(
    data_dir: DataDirOption = None,
    model: Annotated[
        str | None, typer.Option(help="Only runs whose model_id contains this text.")
    ] = None,
    limit: Annotated[int, typer.Option(help="Show at most this many (newest); 0 = all.")] = 50,
) -> None:
    """List stored runs (newest last) with their energy per generated token in joules.

    The J/token column shows the decode phase's energy per token, or, for runs with only a
    whole-request phase (e.g. imported reference runs), the request phase's, marked.
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    store = _store(data_dir)
    if not store.results_dir.is_dir():
        typer.echo(
            f"no store at {store.data_dir} yet (run `mlenergy bench` or "
            "`mlenergy leaderboard import-reference` to create one)",
            err=True,
        )
        return
    frame = store.runs_frame()
    if model:
        frame = frame[frame["model_id"].str.contains(model, regex=False)]
    total = len(frame)
    if limit > 0:
        frame = frame.tail(limit)
    frame = frame.assign(energy_per_token_j=_per_token_cells(frame))
    table = Table(title=f"{total} run(s)", caption=_PER_TOKEN_NOTE, show_lines=False)
    for col in _LIST_COLUMNS:
        table.add_column(_HEADERS.get(col, col))
    for row in frame[list(_LIST_COLUMNS)].itertuples(index=False):
        table.add_row(*(Text(_cell(v)) for v in row))
    console = Console()
    if not console.is_terminal:  # piped: do not squeeze the table into 80 columns
        console = Console(width=220)
    console.print(table)


@runs_app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(help="The run's id (see `mlenergy runs list`).")],
    data_dir: DataDirOption = None,
) -> None:
    """Print one run record as JSON."""
    run = _store(data_dir).get(run_id)
    typer.echo(json.dumps(run.model_dump(mode="json"), indent=2))


@runs_app.command("export")
def export(
    out: Annotated[Path, typer.Option("--out", help="Output file (its folder must exist).")],
    fmt: Annotated[
        str, typer.Option("--format", help="csv or parquet (flat columns), jsonl (full records).")
    ] = "csv",
    table: Annotated[str, typer.Option(help="runs or quality.")] = "runs",
    data_dir: DataDirOption = None,
) -> None:
    """Export the runs (or quality results) table to a file, written atomically."""
    path = _store(data_dir).export(out, fmt=fmt, table=table)  # type: ignore[arg-type]
    typer.echo(f"wrote {path}")


@runs_app.command("check")
def check(data_dir: DataDirOption = None) -> None:
    """Read every store file fully; name any damaged one (exit code 2)."""
    store = _store(data_dir)
    n = store.check()
    typer.echo(f"ok: {n} record(s) in {store.results_dir}")


@runs_app.command("compact")
def compact(
    data_dir: DataDirOption = None,
    rebuild: Annotated[
        bool, typer.Option(help="Recompute the flat columns from the stored records.")
    ] = False,
) -> None:
    """Merge the store's segment files into one per kind (atomic; safe to interrupt)."""
    removed = _store(data_dir).compact(rebuild=rebuild)
    typer.echo(f"merged {removed} segment file(s)")


def register(app: typer.Typer) -> None:
    """Add the ``runs`` group to the root app."""
    app.add_typer(runs_app, name="runs")
