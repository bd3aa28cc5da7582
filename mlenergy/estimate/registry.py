"""The estimator's catalogs: one reader of the data files that describe what it knows.

Three catalogs ship as JSON next to this module, each read here and nowhere else:

* ``engines.json``: serving-engine profiles, each with its own overhead terms
  (:mod:`~mlenergy.estimate.engines`).
* ``task_defaults.json``: task labels, their spellings and default prompt lengths
  (:mod:`~mlenergy.estimate.task_defaults`).
* ``model_families.json``: rules of checkpoint families a config does not state, such as the
  fp8 format of an organisation's ``-FP8`` checkpoints (:mod:`~mlenergy.estimate.configs`).

The GPU catalog is reference data (:mod:`mlenergy.reference.gpus`, shared with the store, the
importers and the leaderboard), and so is the precision vocabulary
(:mod:`mlenergy.reference.precisions`). The fitted numbers are not catalogs: they live in
``coefficients.json`` and the calibration facts in ``coefficients.report.json``
(:mod:`~mlenergy.estimate.coefficients`).

Another folder can stand in for any catalog file, the GPU catalog included: set
``$MLENERGY_CATALOG_DIR`` (:data:`mlenergy.reference.CATALOG_DIR_ENV`) to a folder, and each
catalog file found there replaces the shipped one (the others stay;
:func:`mlenergy.reference.catalog_file`, the one override). The GPU catalog is looked up on
every read; the engine, task and family catalogs when :mod:`mlenergy.estimate` is imported.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from mlenergy.errors import UserError
from mlenergy.reference import catalog_file

SHIPPED_DIR = Path(__file__).parent
"""Folder of the shipped catalog files (package data)."""

CATALOG_FILES: dict[str, str] = {
    "engines": "engines.json",
    "tasks": "task_defaults.json",
    "families": "model_families.json",
}
"""Catalog kind -> file name."""

REQUIRED_KEYS: dict[str, tuple[str, ...]] = {
    "engines": ("profiles",),
    "tasks": ("input_tokens", "default_input_tokens", "aliases", "multimodal"),
    "families": ("fp8",),
}
"""Top-level keys each catalog file must have."""


def catalog_path(kind: str) -> Path:
    """The file a catalog is read from: the override folder's when it has one, else shipped.

    Args:
        kind: One of :data:`CATALOG_FILES`.
    """
    return catalog_file(CATALOG_FILES[kind], SHIPPED_DIR)


def read_catalog(kind: str) -> dict[str, Any]:
    """The parsed catalog file of ``kind`` (cached per file).

    Raises:
        UserError: The file is not valid JSON or lacks a required key.
    """
    return read_catalog_file(catalog_path(kind), kind)


@cache
def read_catalog_file(path: Path, kind: str) -> dict[str, Any]:
    """A catalog file of ``kind`` parsed and checked (cached per path; see :func:`read_catalog`)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"cannot read the {kind} catalog {path}: {exc}") from exc
    missing = [k for k in REQUIRED_KEYS[kind] if not isinstance(data, dict) or k not in data]
    if missing:
        raise UserError(
            f"the {kind} catalog {path} lacks {', '.join(missing)}",
            f"Start from the shipped {SHIPPED_DIR / CATALOG_FILES[kind]}",
        )
    return data
