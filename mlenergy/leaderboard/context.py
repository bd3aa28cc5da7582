"""What every tab of the app shares: the store snapshot, the filters' choices and limits.

:class:`AppContext` is built once per app by :func:`AppContext.load`; the tab builders and the
API endpoints read the store only through it, so a reload is seen by all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.data import LeaderboardData
from mlenergy.leaderboard.published import load_published

DEFAULT_TASK = "lm-arena-chat"
"""The task the table opens on when the store has it (ML.ENERGY's chat task)."""


@dataclass
class AppContext:
    """The app's shared state.

    Attributes:
        data: The store snapshot (reloaded in place by :meth:`reload`).
        data_dir: The store folder.
        choices: The values each filter can take (see :func:`.query.filter_choices`).
        limits: Slider ends: (latency deadline in ms, energy budget in J per output token); a
            slider at its end means "no limit".
    """

    data: LeaderboardData
    data_dir: Path
    choices: dict
    limits: tuple[float, float]

    @classmethod
    def load(cls, data_dir: str | Path, published_quality: str | Path | None = None) -> AppContext:
        """Read the store at ``data_dir`` once, and the published quality scores.

        Args:
            data_dir: The store folder.
            published_quality: A published-quality CSV; ``None``: the shared reference's file
                when present (the app works without one).

        Raises:
            StoreError: The store exists but cannot be read.
            UserError: The published-quality file is missing (when given) or has a bad row.
        """
        data = LeaderboardData.load(data_dir, load_published(published_quality))
        ctx = cls(data=data, data_dir=Path(data_dir), choices={}, limits=(1.0, 1.0))
        ctx._refresh_choices()
        return ctx

    def _refresh_choices(self) -> None:
        self.choices = lb.filter_choices(self.data.frame(None))
        self.limits = (
            lb.slider_limit(self.choices["max_itl_ms"]),
            lb.slider_limit(self.choices["max_energy_per_token_j"]),
        )

    def reload(self) -> bool:
        """Re-read the store when it changed; return whether it did."""
        changed = self.data.reload()
        if changed:
            self._refresh_choices()
        return changed

    @property
    def default_task(self) -> str | None:
        """The task shown first (:data:`DEFAULT_TASK` when present, else all tasks)."""
        return DEFAULT_TASK if DEFAULT_TASK in self.choices["task"] else None

    @property
    def quality_keys(self) -> list[str]:
        """Quality figures the quality picker offers."""
        return self.data.quality_keys()

    @property
    def default_quality(self) -> str | None:
        """The quality figure attached first (the first available, else none)."""
        keys = self.quality_keys
        return keys[0] if keys else None

    def frame(self, quality_key: str | None) -> pd.DataFrame:
        """Prepared runs with quality figure ``quality_key`` attached (cached)."""
        return self.data.frame(quality_key or None)
