"""``mlenergy runs``: list, show, export, check and compact the stored runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from mlenergy import strict_json
from mlenergy.commands.options import DataDirOption, resolve_data_dir
from mlenergy.errors import terminal_text
from mlenergy.store import RunStore
from mlenergy.store.listing import PER_TOKEN_NOTE, find_run, show_notes
from mlenergy.store.listing import list_runs as run_listing

runs_app = typer.Typer(
    name="runs", help="List, show and export the runs in the store.", no_args_is_help=True
)


def _store(data_dir: Path | None) -> RunStore:
    return RunStore(resolve_data_dir(data_dir))


@runs_app.command("list")
def list_runs(
    data_dir: DataDirOption = None,
    model: Annotated[
        str | None, typer.Option(help="Only runs whose model_id contains this text.")
    ] = None,
    limit: Annotated[int, typer.Option(help="Show at most this many (newest); 0 = all.")] = 50,
) -> None:
    """List stored runs (newest last): method, batch and energy per generated token in joules.

    The table's caption says what each column holds (docs/records.md).
    """
    store = _store(data_dir)
    if not store.results_dir.is_dir():
        typer.echo(
            f"no store at {store.data_dir} yet (run `mlenergy bench` or `mlenergy import ...` "
            "to create one; the shipped ML.ENERGY reference is never copied into a store: "
            "`mlenergy leaderboard` and `mlenergy study dense-vs-moe --measured` read it as it "
            "is)",
            err=True,
        )
        return
    listing = run_listing(store, model, limit)
    table = Table(title=f"{listing.total} run(s)", caption=PER_TOKEN_NOTE, show_lines=False)
    for header in listing.headers:
        table.add_column(header)
    for row in listing.rows:
        # Names come from submitters: printed literally, never as console markup, with control
        # characters (terminal escapes, bidirectional overrides) made visible.
        table.add_row(*(Text(terminal_text(cell, 500)) for cell in row))
    console = Console()
    if not console.is_terminal:  # piped: do not squeeze the table into 80 columns
        console = Console(width=220)
    console.print(table)


@runs_app.command("show")
def show(
    run_id: Annotated[
        str, typer.Argument(help="The run's id or its first characters (see `mlenergy runs list`).")
    ],
    data_dir: DataDirOption = None,
) -> None:
    """Print one run record as JSON (a unique prefix of the id is enough).

    What its 95% intervals come from and the host-bound verdict follow on stderr.
    """
    run = find_run(_store(data_dir), run_id)
    typer.echo(strict_json.dumps(run.model_dump(mode="json"), indent=2))
    for line in show_notes(run):
        typer.echo(line, err=True)


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
    """Read every store file and record fully; name any damaged one (exit code 2)."""
    store = _store(data_dir)
    n = store.check(records=True)
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
