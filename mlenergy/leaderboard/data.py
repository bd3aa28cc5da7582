"""The leaderboard's view of a store: prepared frames loaded once, cached per quality figure.

``LeaderboardData.load(data_dir)`` reads the store's flat run and quality frames; table,
plot and detail requests then run on the in-memory frames (pandas), so a filter or sort over
100,000 runs is answered without touching disk. :meth:`LeaderboardData.reload` re-reads the
store after an approved submission.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from mlenergy.leaderboard.query import prepare_runs
from mlenergy.leaderboard.views import attach_quality, quality_frame, quality_keys
from mlenergy.records import RunRecord


@dataclass
class LeaderboardData:
    """Prepared frames of one store.

    Attributes:
        data_dir: The store folder (``None`` for frames given directly, e.g. in tests).
        runs: Prepared runs (see :func:`mlenergy.leaderboard.query.prepare_runs`).
        quality: Normalised quality results (see
            :func:`mlenergy.leaderboard.views.quality_frame`).
    """

    data_dir: Path | None
    runs: pd.DataFrame
    quality: pd.DataFrame
    _by_key: dict[str | None, pd.DataFrame] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_frames(
        cls, runs: pd.DataFrame, quality: pd.DataFrame | None = None, data_dir: Path | None = None
    ) -> LeaderboardData:
        """Build from the store's flat frames (``runs_frame()``, ``quality_frame()``)."""
        q = quality_frame(quality if quality is not None else pd.DataFrame())
        return cls(data_dir=data_dir, runs=prepare_runs(runs), quality=q)

    @classmethod
    def load(cls, data_dir: str | Path) -> LeaderboardData:
        """Read the store at ``data_dir`` (an empty or missing store gives empty frames).

        Raises:
            StoreError: The store exists but cannot be read.
        """
        from mlenergy.store import RunStore

        store = RunStore(data_dir)
        return cls.from_frames(store.runs_frame(), store.quality_frame(), Path(data_dir))

    def reload(self) -> None:
        """Re-read the store (after new runs were approved); no-op without a store."""
        if self.data_dir is None:
            return
        fresh = LeaderboardData.load(self.data_dir)
        with self._lock:
            self.runs, self.quality = fresh.runs, fresh.quality
            self._by_key.clear()

    def quality_keys(self) -> list[str]:
        """Quality figures available for the quality picker."""
        return quality_keys(self.quality)

    def frame(self, quality_key: str | None = None) -> pd.DataFrame:
        """Prepared runs with quality figure ``quality_key`` attached (cached per key)."""
        with self._lock:
            cached = self._by_key.get(quality_key)
            if cached is None:
                cached = attach_quality(self.runs, self.quality, quality_key)
                self._by_key[quality_key] = cached
            return cached

    def get_run(self, run_id: str) -> RunRecord | None:
        """The full record of one run (provenance, power timeline), or ``None``."""
        if self.data_dir is None or not run_id:
            return None
        from mlenergy.errors import UserError
        from mlenergy.store import RunStore

        try:
            return RunStore(self.data_dir).get(run_id)
        except UserError:
            return None
