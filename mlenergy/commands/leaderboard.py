"""``mlenergy leaderboard``: serve the leaderboard, or ``export`` its answers as static files.

Serving shows the shipped reference beside the store, with the JSON API under ``/api/v1``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mlenergy.commands.options import DataDirOption, resolve_data_dir
from mlenergy.errors import UserError
from mlenergy.leaderboard.context import AppContext

leaderboard_app = typer.Typer(
    name="leaderboard",
    help="Serve the leaderboard app: the shipped ML.ENERGY reference beside your store.",
    invoke_without_command=True,
    no_args_is_help=False,
)

REFERENCE_NOTE = (
    "nothing to import: the leaderboard always shows the ML.ENERGY reference shipped with "
    "mlenergy (read-only) beside your store; `mlenergy reference` lists what ships"
)
"""What ``import-reference`` says (it is kept so that old scripts keep working)."""


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
            "(default: the reference's published-quality.csv).",
            show_default=False,
        ),
    ] = None,
    no_reference: Annotated[
        bool,
        typer.Option(
            "--no-reference",
            help="Serve the store alone, without the shipped ML.ENERGY reference rows.",
        ),
    ] = False,
) -> None:
    """Serve the leaderboard on http://HOST:PORT (Ctrl-C to stop)."""
    if ctx.invoked_subcommand is not None:
        return
    if not 0 < port < 65536:
        raise UserError(f"--port {port} is not a TCP port", "pick a port between 1 and 65535")
    from mlenergy.leaderboard import app as module  # gradio: loaded to serve

    data = resolve_data_dir(data_dir)
    # a damaged store or quality file fails here, before any URL is printed
    demo = module.build_app(data, published_quality=published_quality, reference=not no_reference)
    typer.echo(f"leaderboard: http://{host}:{port}  (store: {data})")
    module.launch(demo, host=host, port=port)


PublishedQualityOption = Annotated[
    Path | None,
    typer.Option(
        "--published-quality",
        help="Published quality scores (CSV) for runs without their own quality record "
        "(default: the reference's published-quality.csv).",
        show_default=False,
    ),
]
NoReferenceOption = Annotated[
    bool,
    typer.Option(
        "--no-reference", help="The store alone, without the shipped ML.ENERGY reference rows."
    ),
]


@leaderboard_app.command("export")
def export_cmd(
    folder: Annotated[Path, typer.Argument(help="New or empty folder to write into.")],
    data_dir: DataDirOption = None,
    published_quality: PublishedQualityOption = None,
    no_reference: NoReferenceOption = False,
) -> None:
    """Write the JSON API's answers for the default views (and the figures) as static files.

    Each file holds what GET /api/v1/... answers; FOLDER/index.json lists them with the date
    and the store snapshot they come from. Serve FOLDER from any static host or CDN.
    """
    from mlenergy.leaderboard.export import export_board  # gradio: loaded to export

    data = resolve_data_dir(data_dir)
    ctx = AppContext.load(data, published_quality, reference=not no_reference)
    manifest = export_board(ctx, folder)
    snap = manifest["snapshot"]
    typer.echo(
        f"exported {len(manifest['files'])} answers to {folder} (store: {data}; {snap['runs']} "
        f"runs, snapshot {snap['digest'][:12]}); list: {folder / 'index.json'}"
    )


@leaderboard_app.command("import-reference", hidden=True)
def import_reference_cmd(
    reference: Annotated[
        Path | None, typer.Option("--reference", help="Ignored.", show_default=False)
    ] = None,
    data_dir: DataDirOption = None,
) -> None:
    """Nothing to do: the leaderboard always shows the shipped reference."""
    typer.echo(REFERENCE_NOTE)


def register(app: typer.Typer) -> None:
    """Add the ``leaderboard`` group to the root app."""
    app.add_typer(leaderboard_app, name="leaderboard")
