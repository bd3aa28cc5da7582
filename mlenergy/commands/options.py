"""Options shared by several commands."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

DATA_DIR_ENV = "MLENERGY_DATA_DIR"


def default_data_dir() -> Path:
    """Return ``$MLENERGY_DATA_DIR`` if set, else ``./data``."""
    return Path(os.environ.get(DATA_DIR_ENV) or "data")


DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Store folder (default: $MLENERGY_DATA_DIR, else ./data).",
        show_default=False,
    ),
]


def resolve_data_dir(value: Path | None) -> Path:
    """Return the data folder to use: ``value`` if given, else :func:`default_data_dir`."""
    return value if value is not None else default_data_dir()
