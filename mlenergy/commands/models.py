"""``mlenergy models save-tiny``: a tiny servable model folder, to try serving on a CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mlenergy.workloads.serving.tiny_model import next_steps, save_tiny_model

models_app = typer.Typer(name="models", help="Models to try the tools on.", no_args_is_help=True)


@models_app.command("save-tiny")
def save_tiny(
    folder: Annotated[Path, typer.Argument(help="Folder to write the model to (created).")],
    kind: Annotated[str, typer.Option(help="dense (Llama) or moe (Mixtral).")] = "dense",
    seed: Annotated[int, typer.Option(help="Seed of the weights and the tokenizer.")] = 0,
) -> None:
    """Save a tiny random-weight model, tokenizer and chat template that a server can load."""
    for line in next_steps(save_tiny_model(folder, kind, seed)):
        typer.echo(line)


def register(app: typer.Typer) -> None:
    """Add the ``models`` group to the root app."""
    app.add_typer(models_app, name="models")
