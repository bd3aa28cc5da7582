"""The shipped reference as a read-only layer beside the user's store.

The ML.ENERGY measurements that ship with mlenergy (see :mod:`mlenergy.reference`) are shown on
every leaderboard without an import step: :func:`reference_layer` reads them once per process
(through the one reader, :func:`mlenergy.reference.runs.read_reference`) and keeps their
flat rows and records. :func:`merge_layers` puts them beside the store's rows; a store into
which the reference was imported earlier shows each reference run once.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mlenergy.records import RunRecord
from mlenergy.reference import reference_dir
from mlenergy.reference.runs import read_reference
from mlenergy.store.tables import RUN_COLUMNS, flatten_run

LAYER_REFERENCE = "reference"
"""``layer`` of the rows read from the shipped reference (read-only)."""
LAYER_STORE = "store"
"""``layer`` of the rows read from the user's store (own runs, approved submissions)."""


@dataclass(frozen=True)
class ReferenceLayer:
    """The reference's runs as flat rows and as records.

    Attributes:
        root: The reference folder read.
        frame: One flat row per run (the store's columns, plus ``method``).
        records: The records by run id (provenance of the detail view).
    """

    root: Path
    frame: pd.DataFrame
    records: dict[str, RunRecord]


_CACHE: dict[Path, ReferenceLayer] = {}
_LOCK = threading.Lock()


def flat_frame(records: list[RunRecord]) -> pd.DataFrame:
    """The store's flat columns of ``records`` plus ``method`` and ``unverified_reasons``."""
    rows = []
    for record in records:
        row = flatten_run(record)
        row["method"] = record.workload.method
        row["generation_backend"] = record.generation.backend if record.generation else None
        sub = record.submission
        row["unverified_reasons"] = list(sub.unverified) if sub is not None else None
        rows.append(row)
    extra = ["method", "generation_backend", "unverified_reasons"]
    return pd.DataFrame(rows, columns=[*RUN_COLUMNS, *extra])


def reference_layer(root: str | Path | None = None) -> ReferenceLayer:
    """The reference's runs, read once per process and folder.

    Args:
        root: A reference folder; default :func:`mlenergy.reference.reference_dir` (the shipped
            data, or ``$MLENERGY_REFERENCE_DIR``).

    Raises:
        UserError: ``$MLENERGY_REFERENCE_DIR`` names no folder, or the folder holds no
            leaderboard table.
    """
    folder = Path(root) if root is not None else reference_dir()
    key = folder.resolve()
    with _LOCK:  # one reader; the others wait for its result
        layer = _CACHE.get(key)
        if layer is None:
            records = read_reference(folder)
            layer = ReferenceLayer(
                root=key, frame=flat_frame(records), records={r.run_id: r for r in records}
            )
            _CACHE[key] = layer
    return layer


def merge_layers(reference: pd.DataFrame | None, store: pd.DataFrame) -> pd.DataFrame:
    """The reference rows then the store's, each with its ``layer``; each run id once.

    A store row whose run id is a reference run's (a store seeded by ``import-reference``
    before it became a no-op) is dropped: the reference layer shows it.
    """
    store = store.assign(layer=LAYER_STORE)
    if reference is None or reference.empty:
        return store.reset_index(drop=True)
    ref = reference.assign(layer=LAYER_REFERENCE)
    if not store.empty:
        store = store[~store["run_id"].isin(set(ref["run_id"]))]
        if store.empty:
            return ref.reset_index(drop=True)
        return pd.concat([ref, store], ignore_index=True)
    return ref.reset_index(drop=True)
