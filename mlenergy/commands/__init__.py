"""The `mlenergy` sub-commands, one module per area; :mod:`mlenergy.cli` loads them when used.

Each module defines ``register(app: typer.Typer) -> None`` that adds its commands (or a
sub-group) to the root app, and is listed in :data:`mlenergy.cli.COMMANDS`. A command parses
its options (typed groups: :mod:`mlenergy.commands.typed`), calls one library function and
prints; modules import the library at module level, except the few entry points that load a
heavy stack (gradio, matplotlib), which the command imports when it runs.
"""

from __future__ import annotations

from typing import Any

APP_SETTINGS: dict[str, Any] = {
    "rich_markup_mode": None,
    "pretty_exceptions_enable": False,
    "add_completion": False,
    "context_settings": {"max_content_width": 10_000},
}
"""How the ``mlenergy`` app is made (:mod:`mlenergy.cli`; every command and group under it takes
the same): plain help (click's layout, which wraps an option's help and never cuts its name) as
wide as the terminal, no completion install."""
