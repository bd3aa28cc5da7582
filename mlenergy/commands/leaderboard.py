"""``mlenergy leaderboard``: serve the Gradio leaderboard; ``import-reference`` seeds a store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mlenergy.commands.options import DataDirOption, resolve_data_dir
from mlenergy.errors import UserError

leaderboard_app = typer.Typer(
    name="leaderboard",
    help="Serve the leaderboard app (no subcommand) or seed its store (import-reference).",
    invoke_without_command=True,
    no_args_is_help=False,
)


@leaderboard_app.callback(invoke_without_command=True)
def serve(
    ctx: typer.Context,
    data_dir: DataDirOption = None,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port to listen on.")] = 7860,
    published_quality: Annotated[
        Path | None,
        typer.Option(
            "--published-quality",
            help="Published quality scores (CSV) for runs without their own quality record "
            "(default: published-quality.csv of $MLENERGY_REFERENCE_DIR, else "
            "../shared/reference, when present).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve the leaderboard on http://HOST:PORT (Ctrl-C to stop)."""
    if ctx.invoked_subcommand is not None:
        return
    if not 0 < port < 65536:
        raise UserError(f"--port {port} is not a TCP port", "pick a port between 1 and 65535")
    from mlenergy.leaderboard import app as module

    data = resolve_data_dir(data_dir)
    # a damaged store or quality file fails here, before any URL is printed
    demo = module.build_app(data, published_quality=published_quality)
    typer.echo(f"leaderboard: http://{host}:{port}  (store: {data})")
    module.launch(demo, host=host, port=port)


@leaderboard_app.command("import-reference")
def import_reference_cmd(
    reference: Annotated[
        Path | None,
        typer.Option(
            "--reference",
            help="Reference folder (default: $MLENERGY_REFERENCE_DIR, else ../shared/reference).",
            show_default=False,
        ),
    ] = None,
    data_dir: DataDirOption = None,
) -> None:
    """Import ML.ENERGY's published measurements (Zeus on NVML, vLLM) into the store."""
    from mlenergy.analysis.reference_import import import_reference

    data = resolve_data_dir(data_dir)
    added, duplicates = import_reference(reference, data)
    typer.echo(
        f"imported {added} ML.ENERGY reference runs into {data} ({duplicates} already there)"
    )


def register(app: typer.Typer) -> None:
    """Add the ``leaderboard`` group to the root app."""
    app.add_typer(leaderboard_app, name="leaderboard")
