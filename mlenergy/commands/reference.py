"""``mlenergy reference``: list the reference data that ships with mlenergy, with its sources."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer

from mlenergy import strict_json
from mlenergy.footprint import intensity_for
from mlenergy.footprint import regions as region_codes
from mlenergy.reference import PACKAGE_DIR, PACKAGE_ONLY, reference_dir, shipped_files, sources
from mlenergy.reference.gpus import CATALOG_FILE


def reference(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    regions: Annotated[
        bool,
        typer.Option("--regions", help="List the grid carbon intensities (--region CODE) instead."),
    ] = False,
) -> None:
    """List the shipped reference data: each file, its source, licence and date."""
    if regions:
        _print_regions(as_json)
        return
    root = reference_dir()
    rows = sources()
    files = [str(p) for p in shipped_files(root) if str(p) not in PACKAGE_ONLY]
    files += [name for name in PACKAGE_ONLY if (PACKAGE_DIR / name).is_file()]
    counts = {
        s.path: sum(f.startswith(s.path) if s.path.endswith("/") else f == s.path for f in files)
        for s in rows
    }
    if as_json:
        out = {
            "folder": str(root),
            "entries": [asdict(s) | {"files": counts[s.path]} for s in rows],
        }
        typer.echo(strict_json.dumps(out, indent=2))
        return
    typer.echo(f"reference data: {root}")
    for s in rows:
        n = counts[s.path]
        where = f"{s.path} ({n} files)" if s.path.endswith("/") else s.path
        if n == 0:
            where += " (missing here)"
        elif s.path in PACKAGE_ONLY and root != PACKAGE_DIR:
            override = " or $MLENERGY_CATALOG_DIR" if s.path == CATALOG_FILE else ""
            where += f" (read from the package{override})"
        typer.echo(f"\n{where}\n  {s.what}\n  source: {s.source}\n  licence: {s.licence}")
        typer.echo(f"  date: {s.date}; changes: {s.changes}")
    typer.echo(f"\nsources and notes: {root / 'SOURCES.md'}")


def _print_regions(as_json: bool) -> None:
    """Every region of the shipped grid intensity table: code, g CO2e/kWh, year, source."""
    rows = [intensity_for(code) for code in region_codes()]
    if as_json:
        typer.echo(strict_json.dumps([asdict(r) for r in rows], indent=1))
        return
    for r in rows:
        typer.echo(f"{r.region:8s} {r.g_per_kwh:8.1f} gCO2e/kWh  {r.year}  {r.source}")


def register(app: typer.Typer) -> None:
    """Add the ``reference`` command to the root app."""
    app.command("reference")(reference)
