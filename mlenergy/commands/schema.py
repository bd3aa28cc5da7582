"""``mlenergy schema export``: write the records' JSON Schemas (what submitters validate)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mlenergy.errors import UserError
from mlenergy.records import export_schemas
from mlenergy.records.fields import field_tables

schema_app = typer.Typer(name="schema", help="The records' JSON Schemas.", no_args_is_help=True)


@schema_app.command("export")
def export(
    out: Annotated[Path, typer.Option("--out", help="Folder for the *.schema.json files.")] = Path(
        "data/schema"
    ),
) -> None:
    """Write run_record, quality_result and submission JSON Schemas into a folder."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file, not a folder", "pass a folder path")
    try:
        paths = export_schemas(out)
    except OSError as exc:
        raise UserError(
            f"cannot write the schemas into {out} ({exc.strerror or exc})",
            "pass --out pointing to a folder you can write",
        ) from exc
    for path in paths:
        typer.echo(f"wrote {path}")


@schema_app.command("fields")
def fields() -> None:
    """Print every record's fields (name, type, meaning) as Markdown tables (docs/records.md)."""
    typer.echo(field_tables(), nl=False)


def register(app: typer.Typer) -> None:
    """Add the ``schema`` group to the root app."""
    app.add_typer(schema_app, name="schema")
