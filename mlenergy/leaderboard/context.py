"""What every tab of the app shares: the store snapshot, the filters' choices and limits.

:class:`AppContext` is built once per app by :func:`AppContext.load`; the tab builders and the
API endpoints read the store only through it, so a reload is seen by all of them.

The choices the filter bar offers follow the rows in view: :meth:`AppContext.view` gives, for
the energy sources asked for (measured GPU rows by default, see
:data:`~mlenergy.leaderboard.query.DEFAULT_SOURCES`), the tasks, hardware, precisions, GPU
counts, quality figures and slider ends of those rows only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.data import LeaderboardData
from mlenergy.leaderboard.published import load_published, task_quality_key

DEFAULT_TASK = "lm-arena-chat"
"""The task the table opens on when the store has it (ML.ENERGY's chat task)."""


@dataclass(frozen=True)
class ViewChoices:
    """What the filter bar offers for the rows of some energy sources.

    Attributes:
        sources: The energy sources (``source_class`` values) the rows come from.
        choices: The values each filter can take (see :func:`.query.filter_choices`).
        limits: Slider ends: (latency deadline in ms, energy budget in J per output token),
            finite and clamped (see :func:`.query.slider_limit`); a slider at its end means
            "no limit".
        quality_keys: Quality figures that score at least one model in view.
    """

    sources: tuple[str, ...]
    choices: dict
    limits: tuple[float, float]
    quality_keys: list[str]

    @property
    def default_task(self) -> str | None:
        """:data:`DEFAULT_TASK` when in view, else all tasks."""
        return DEFAULT_TASK if DEFAULT_TASK in self.choices["task"] else None

    def quality_for(self, task: str | None) -> str | None:
        """The quality figure of ``task`` (LMArena for chat, GPQA-Diamond for gpqa), if in view."""
        key = task_quality_key(task)
        return key if key in self.quality_keys else None


def normal_sources(sources: Sequence[str] | None) -> tuple[str, ...]:
    """The energy sources asked for, sorted; none means :data:`.query.DEFAULT_SOURCES`."""
    picked = tuple(sorted({str(s) for s in (sources or ()) if s}))
    return picked or lb.DEFAULT_SOURCES


@dataclass
class AppContext:
    """The app's shared state.

    Attributes:
        data: The store snapshot with the reference layer (reloaded in place by
            :meth:`reload`).
        data_dir: The store folder.
        choices: The values each filter can take over every row (the API's vocabulary; see
            :func:`.query.filter_choices`).
        limits: Slider ends of the default view (see :meth:`view`).
    """

    data: LeaderboardData
    data_dir: Path
    choices: dict
    limits: tuple[float, float]

    @classmethod
    def load(
        cls,
        data_dir: str | Path,
        published_quality: str | Path | None = None,
        reference: bool = True,
    ) -> AppContext:
        """Read the store at ``data_dir`` once, the reference layer and the published scores.

        Args:
            data_dir: The store folder.
            published_quality: A published-quality CSV; ``None``: the reference's file
                when present (the app works without one).
            reference: Show the shipped reference beside the store.

        Raises:
            StoreError: The store exists but cannot be read.
            UserError: The published-quality file is missing (when given) or has a bad row.
        """
        data = LeaderboardData.load(data_dir, load_published(published_quality), reference)
        ctx = cls(data=data, data_dir=Path(data_dir), choices={}, limits=(1.0, 1.0))
        ctx._refresh_choices()
        return ctx

    def _refresh_choices(self) -> None:
        self.choices = lb.filter_choices(self.data.frame(None))
        self.limits = self.view(None).limits

    def reload(self) -> bool:
        """Re-read the store when it changed; return whether it did."""
        changed = self.data.reload()
        if changed:
            self._refresh_choices()
        return changed

    def view(self, sources: Sequence[str] | None) -> ViewChoices:
        """The filter bar's choices for the rows of ``sources`` (memoised per snapshot)."""
        picked = normal_sources(sources)
        return self.data.memo(("view", picked), lambda: self._view(picked))

    def _view(self, sources: tuple[str, ...]) -> ViewChoices:
        frame = self.data.frame(None)
        rows = frame[lb.source_mask(frame, sources)]
        choices = lb.filter_choices(rows)
        limits = (
            lb.slider_limit(choices["max_itl_ms"], lb.ITL_CAP_MS),
            lb.slider_limit(choices["max_energy_per_token_j"], lb.ENERGY_CAP_J),
        )
        keys = self.data.quality_keys_for(set(choices["model_id"]))
        return ViewChoices(sources, choices, limits, keys)

    @property
    def default_task(self) -> str | None:
        """The API's opening task: :data:`DEFAULT_TASK` when stored, else all tasks.

        The page opens on :attr:`ViewChoices.default_task` of its default view.
        """
        return DEFAULT_TASK if DEFAULT_TASK in self.choices["task"] else None

    @property
    def quality_keys(self) -> list[str]:
        """Quality figures over every row (the API's vocabulary)."""
        return self.data.quality_keys()

    @property
    def default_quality(self) -> str | None:
        """The API's opening quality figure.

        The opening task's (see :func:`~mlenergy.leaderboard.published.task_quality_key`)
        when offered, else the first offered, else none.
        """
        keys = self.quality_keys
        key = task_quality_key(self.default_task)
        return key if key in keys else (keys[0] if keys else None)

    def frame(self, quality_key: str | None) -> pd.DataFrame:
        """Prepared runs with quality figure ``quality_key`` attached (cached)."""
        return self.data.frame(quality_key or None)
