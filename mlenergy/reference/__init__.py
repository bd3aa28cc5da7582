"""The public reference data that ships inside mlenergy, and where to find it.

The folder of this module holds ML.ENERGY's leaderboard measurements (``mlenergy-leaderboard/``),
the model configs they were taken with (``model-configs/``), the GPU catalog
(``gpu_catalog.json``: datasheet figures and the names each GPU goes by), the precision
vocabulary (``precisions.json``), the Perseus A40 pipeline profiles (``perseus-profiles/``),
published quality scores (``published-quality.csv``) and grid carbon intensities.
``SOURCES.md`` gives for each its source, licence, date and any change; :func:`sources` reads
that table. Every reader of the measurements, configs, profiles, scores and intensities asks
:func:`reference_dir` for the folder, so ``$MLENERGY_REFERENCE_DIR`` can point them all at
another folder with the same layout. Catalogs are replaced file by file instead: a file of the
folder named by ``$MLENERGY_CATALOG_DIR`` stands in for the shipped one of the same name
(:func:`catalog_file`; the GPU catalog here, the estimator's engine, task and family catalogs).
This module imports nothing of mlenergy but its errors.

The modules beside it read this data, one reader each: :mod:`~mlenergy.reference.gpus` (the GPU
catalog and the one matcher of GPU names), :mod:`~mlenergy.reference.precisions` (precision
spellings), :mod:`~mlenergy.reference.runs` (ML.ENERGY's measurements as run records) and
:mod:`~mlenergy.reference.measurements` (measured serving runs as one tidy frame). The last two
describe each model with the estimator's config rule, so they sit above the estimator (see
``tests/test_layering.py``); the package itself imports neither.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from mlenergy.errors import UserError

REFERENCE_ENV = "MLENERGY_REFERENCE_DIR"
"""Environment variable naming a reference folder to read instead of the shipped one."""
PACKAGE_DIR = Path(__file__).resolve().parent
"""The reference data shipped in the package (the folder of this module)."""
SOURCES_FILE = "SOURCES.md"
CONFIGS_FOLDER = "model-configs"
CATALOG_DIR_ENV = "MLENERGY_CATALOG_DIR"
"""Environment variable naming a folder whose catalog files replace the shipped ones."""
PACKAGE_ONLY = ("gpu_catalog.json", "precisions.json")
"""Files always read from this package, whatever ``$MLENERGY_REFERENCE_DIR`` says (the GPU
catalog is replaced by ``$MLENERGY_CATALOG_DIR/gpu_catalog.json`` instead)."""

__all__ = [
    "CATALOG_DIR_ENV",
    "CONFIGS_FOLDER",
    "PACKAGE_DIR",
    "PACKAGE_ONLY",
    "REFERENCE_ENV",
    "Source",
    "catalog_file",
    "configs_next_to",
    "default_configs_dir",
    "reference_dir",
    "shipped_files",
    "sources",
]


def reference_dir() -> Path:
    """The reference folder: ``$MLENERGY_REFERENCE_DIR`` when set, else the shipped data.

    Raises:
        UserError: ``$MLENERGY_REFERENCE_DIR`` is set but names no folder.
    """
    env = os.environ.get(REFERENCE_ENV)
    if not env:
        return PACKAGE_DIR
    path = Path(env).expanduser()
    if not path.is_dir():
        raise UserError(
            f"${REFERENCE_ENV} is {env!r}, which is not a folder",
            "Unset it to read the reference data shipped with mlenergy, "
            "or point it at a folder laid out like `mlenergy reference` lists",
        )
    return path.resolve()


def catalog_file(name: str, shipped_dir: Path = PACKAGE_DIR) -> Path:
    """The file a catalog is read from: ``$MLENERGY_CATALOG_DIR/<name>`` when it exists.

    The one override of every catalog: the GPU catalog of this folder and the estimator's
    engine, task and family catalogs. Looked up on every call, so a test or a session can set
    the variable at any time.

    Args:
        name: The catalog's file name (``gpu_catalog.json``, ``engines.json``...).
        shipped_dir: The folder of the shipped file (default: this package's).
    """
    folder = os.environ.get(CATALOG_DIR_ENV, "")
    if folder:
        candidate = Path(folder).expanduser() / name
        if candidate.is_file():
            return candidate
    return shipped_dir / name


def default_configs_dir() -> Path:
    """The model configs of the reference folder (``<reference>/model-configs``)."""
    return reference_dir() / CONFIGS_FOLDER


def configs_next_to(reference: Path | None, configs_dir: Path | None) -> Path | None:
    """Model configs next to a given reference folder, unless ``configs_dir`` says otherwise.

    Args:
        reference: A reference folder given by the user (or ``None``).
        configs_dir: A configs folder given by the user (wins when given).
    """
    if configs_dir is not None or reference is None:
        return configs_dir
    for candidate in (reference / CONFIGS_FOLDER, reference.parent / CONFIGS_FOLDER):
        if candidate.is_dir():
            return candidate
    return None


@dataclass(frozen=True)
class Source:
    """One row of ``SOURCES.md``: a shipped file (or folder) and where it came from.

    Attributes:
        path: Path relative to the reference folder (a folder ends with ``/``).
        what: What the file holds.
        source: Where it was read.
        licence: Its licence.
        date: The date of the data.
        changes: What was changed when it was copied (``none``).
    """

    path: str
    what: str
    source: str
    licence: str
    date: str
    changes: str


def sources() -> list[Source]:
    """The rows of the shipped ``SOURCES.md`` table, in its order."""
    rows: list[Source] = []
    for line in (PACKAGE_DIR / SOURCES_FILE).read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 6 or cells[0] in ("path", "---"):
            continue
        rows.append(Source(*cells))
    return rows


def shipped_files(root: Path | None = None) -> list[Path]:
    """Every data file of a reference folder, relative to it, sorted (code files left out).

    Args:
        root: The folder (default: the shipped data).
    """
    base = root or PACKAGE_DIR
    return sorted(
        p.relative_to(base)
        for p in base.rglob("*")
        if p.is_file()
        and p.name != SOURCES_FILE
        and p.suffix != ".py"
        and "__pycache__" not in p.parts
    )
