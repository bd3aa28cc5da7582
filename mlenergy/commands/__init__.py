"""The `mlenergy` sub-commands, one module per area.

Each module defines ``register(app: typer.Typer) -> None`` that adds its commands (or a
sub-group) to the root app. Modules import heavy libraries (torch, transformers, gradio) inside
the command functions so that ``mlenergy --help`` stays fast.
"""
