"""The leaderboard's view of a store: prepared frames loaded once, cached per quality figure.

``LeaderboardData.load(data_dir)`` reads the store's flat run and quality frames and puts the
shipped reference's runs beside them (a read-only layer read once per process, see
:mod:`mlenergy.leaderboard.reference_layer`); table,
plot and detail requests then run on the in-memory frames (pandas), so a filter or sort over
100,000 runs is answered without touching disk. Answers that depend only on the snapshot
(a table page, a figure, a run's record) are memoised per snapshot with :meth:`memo`.
:meth:`LeaderboardData.reload` re-reads the store only when its segment files changed.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pandas as pd

from mlenergy.errors import UserError
from mlenergy.leaderboard.prepare import prepare_runs
from mlenergy.leaderboard.published import (
    attach_published,
    is_published_key,
    load_published,
    published_keys,
)
from mlenergy.leaderboard.reference_layer import ReferenceLayer, merge_layers, reference_layer
from mlenergy.leaderboard.views import attach_quality, quality_frame, quality_keys
from mlenergy.quality.published import PublishedScore
from mlenergy.records import QualityResult, RunRecord
from mlenergy.store import RunStore
from mlenergy.store.record_extras import EXTRA_SQL
from mlenergy.store.tables import RUN_COLUMNS

_T = TypeVar("_T")

MEMO_SIZE = 512
"""Answers kept per snapshot (least recently used dropped first)."""

BULK_RECORDS = 20_000
"""Stores with at most this many runs are read whole on the first provenance request."""

Signature = tuple[tuple[str, int, int], ...]


def store_runs_frame(store) -> pd.DataFrame:
    """The store's flat run frame plus ``method``, ``generation_backend`` and the extras.

    ``method`` is ``Workload.method`` read from each record, ``generation_backend`` its
    ``GenerationInfo.backend`` (static-batch runs of the runner); ``unverified_reasons`` the
    record's ``SubmissionInfo.unverified`` as JSON text (unverified runs only); the interval
    basis and host-bound verdict are :data:`mlenergy.store.record_extras.EXTRA_COLUMNS`.

    Args:
        store: A :class:`~mlenergy.store.RunStore`.
    """
    cols = ", ".join(f'"{c}"' for c in RUN_COLUMNS)
    return store.query(
        f"SELECT {cols}, {EXTRA_SQL}, "
        "json_extract_string(record_json, '$.workload.method') AS method, "
        "json_extract_string(record_json, '$.generation.backend') AS generation_backend, "
        "CASE WHEN unverified THEN json_extract(record_json, '$.submission.unverified')::VARCHAR "
        "END AS unverified_reasons FROM _runs_all ORDER BY created_at, run_id"
    )


def store_signature(data_dir: Path) -> Signature:
    """Name, size and modification time (ns) of each file in the store's results folder.

    Hidden files (the lock, temporary files) are left out; a missing folder gives ``()``.
    """
    try:
        entries = list(os.scandir(Path(data_dir) / "results"))
    except (FileNotFoundError, NotADirectoryError):
        return ()
    out = []
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_file():
            continue
        st = entry.stat()
        out.append((entry.name, st.st_size, st.st_mtime_ns))
    return tuple(sorted(out))


@dataclass
class LeaderboardData:
    """Prepared frames of one store.

    Attributes:
        data_dir: The store folder (``None`` for frames given directly, e.g. in tests).
        runs: Prepared runs (see :func:`mlenergy.leaderboard.prepare.prepare_runs`).
        quality: Normalised quality results (see
            :func:`mlenergy.leaderboard.views.quality_frame`).
        signature: The store files the frames were read from (see :func:`store_signature`).
        published: Published quality scores offered for runs without a quality record of
            their own (see :mod:`mlenergy.leaderboard.published`).
        reference: The shipped reference layer shown beside the store (``None``: none).
        quality_records: The store's quality records, preferred to published scores under a
            published benchmark's figure (see
            :func:`~mlenergy.analysis.quality_attach.pick_quality`).
    """

    data_dir: Path | None
    runs: pd.DataFrame
    quality: pd.DataFrame
    signature: Signature = ()
    published: list[PublishedScore] = field(default_factory=list)
    reference: ReferenceLayer | None = None
    quality_records: list[QualityResult] = field(default_factory=list)
    _by_key: dict[str | None, pd.DataFrame] = field(default_factory=dict, repr=False)
    _memo: OrderedDict = field(default_factory=OrderedDict, repr=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _reload_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_frames(
        cls,
        runs: pd.DataFrame,
        quality: pd.DataFrame | None = None,
        data_dir: Path | None = None,
        published: list[PublishedScore] | None = None,
        quality_records: list[QualityResult] | None = None,
    ) -> LeaderboardData:
        """Build from the store's flat frames (``runs_frame()``, ``quality_frame()``).

        Args:
            runs: The store's flat run frame.
            quality: The store's flat quality frame.
            data_dir: The store folder, if any.
            published: Published quality scores (none by default).
            quality_records: The store's quality records (``RunStore.quality()``).
        """
        q = quality_frame(quality if quality is not None else pd.DataFrame())
        return cls(
            data_dir=data_dir,
            runs=prepare_runs(runs),
            quality=q,
            published=list(published or []),
            quality_records=list(quality_records or []),
        )

    @classmethod
    def load(
        cls,
        data_dir: str | Path,
        published: list[PublishedScore] | None = None,
        reference: ReferenceLayer | bool = True,
    ) -> LeaderboardData:
        """Read the store at ``data_dir`` and put the reference layer beside it.

        An empty or missing store gives the reference rows only.

        Args:
            data_dir: The store folder.
            published: Published quality scores; ``None`` reads the reference's
                ``published-quality.csv`` when present (see
                :func:`~mlenergy.leaderboard.published.load_published`).
            reference: ``True``: the shipped reference (read once per process, see
                :func:`~mlenergy.leaderboard.reference_layer.reference_layer`); a layer; or
                ``False`` for the store alone.

        Raises:
            StoreError: The store exists but cannot be read.
            UserError: The reference's published-quality file has a bad row, or
                ``$MLENERGY_REFERENCE_DIR`` names no reference.
        """
        if published is None:
            published = load_published()
        layer = reference_layer() if reference is True else (reference or None)
        signature = store_signature(Path(data_dir))
        store = RunStore(data_dir)
        runs = merge_layers(layer.frame if layer else None, store_runs_frame(store))
        records = store.quality() if store.results_dir.is_dir() else []
        data = cls.from_frames(runs, store.quality_frame(), Path(data_dir), published, records)
        data.signature = signature
        data.reference = layer
        return data

    def reload(self) -> bool:
        """Re-read the store if its files changed since the last read.

        Returns:
            Whether new frames were loaded (``False`` without a store or when unchanged).
        """
        if self.data_dir is None:
            return False
        with self._reload_lock:  # one reader at a time; the others see its result
            if store_signature(self.data_dir) == self.signature:
                return False
            fresh = LeaderboardData.load(self.data_dir, self.published, self.reference or False)
            with self._lock:
                self.runs, self.quality = fresh.runs, fresh.quality
                self.quality_records = fresh.quality_records
                self.signature = fresh.signature
                self._by_key.clear()
                self._memo.clear()
        return True

    def quality_keys(self) -> list[str]:
        """Quality figures for the quality picker: stored figures, then published benchmarks.

        A published benchmark (``published:<benchmark>``) is listed when it scores at least
        one model of the store.
        """
        return self.memo(("quality-keys",), self._quality_keys)

    def _quality_keys(self) -> list[str]:
        stored = quality_keys(self.quality)
        if not self.published or self.runs.empty:
            return stored
        return [*stored, *published_keys(self.published, self.runs["model_id"].unique())]

    def quality_keys_for(self, model_ids: set[str]) -> list[str]:
        """The quality figures (in :meth:`quality_keys` order) that score a run of ``model_ids``.

        A published benchmark counts when it scores one of the models; a stored figure when it
        links to a run of one of them (see :func:`~mlenergy.leaderboard.views.attach_quality`).
        """

        def _keys() -> list[str]:
            published = set(published_keys(self.published, model_ids)) if self.published else set()
            out = []
            for key in self.quality_keys():
                if is_published_key(key):
                    if key in published:
                        out.append(key)
                    continue
                frame = self.frame(key)
                if frame.loc[frame["model_id"].isin(model_ids), "quality"].notna().any():
                    out.append(key)
            return out

        return self.memo(("quality-keys-for", frozenset(model_ids)), _keys)

    def frame(self, quality_key: str | None = None) -> pd.DataFrame:
        """Prepared runs with quality figure ``quality_key`` attached (cached per key).

        A ``published:<benchmark>`` key attaches published scores (see
        :func:`~mlenergy.leaderboard.published.attach_published`); any other key the store's
        quality results (:func:`~mlenergy.leaderboard.views.attach_quality`).
        """
        with self._lock:
            cached = self._by_key.get(quality_key)
            if cached is None:
                if is_published_key(quality_key):
                    cached = attach_published(
                        self.runs, self.published, quality_key, self.quality_records
                    )
                else:
                    cached = attach_quality(self.runs, self.quality, quality_key)
                self._by_key[quality_key] = cached
            return cached

    def memo(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """Return the answer stored under ``key`` for this snapshot, computing it once.

        ``compute`` runs outside the lock (two threads may compute the same answer once
        each; both get an equal one). Answers must not be mutated by callers.
        """
        with self._lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]
            signature = self.signature
        value = compute()
        with self._lock:
            if self.signature == signature:
                self._memo[key] = value
                while len(self._memo) > MEMO_SIZE:
                    self._memo.popitem(last=False)
        return value

    def get_run(self, run_id: str) -> RunRecord | None:
        """The full record of one run (provenance, power timeline), or ``None``.

        A store of at most :data:`BULK_RECORDS` runs is read whole on the first call (one
        query instead of one per run); a larger one is read run by run (memoised).
        """
        if self.reference is not None and run_id in self.reference.records:
            return self.reference.records[run_id]
        if self.data_dir is None or not run_id:
            return None
        if len(self.runs) <= BULK_RECORDS:
            return self.memo(("all-runs",), self._read_all).get(run_id)
        return self.memo(("run", run_id), lambda: self._read_run(run_id))

    def _read_all(self) -> dict[str, RunRecord]:
        if self.data_dir is None:
            return {}
        return {r.run_id: r for r in RunStore(self.data_dir).runs()}

    def _read_run(self, run_id: str) -> RunRecord | None:
        if self.data_dir is None:
            return None
        try:
            return RunStore(self.data_dir).get(run_id)
        except UserError:
            return None
