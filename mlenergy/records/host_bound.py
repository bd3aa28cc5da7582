"""The host-bound mark a measured run carries: its GPUs sat near idle through most of its time.

The rule that sets it lives in :mod:`mlenergy.measure.host_bound`; this module holds what the
record keeps of its verdict (the figures it judged, so a reader can check it) and the one
sentence every view shows. Reference rows carry the same mark from the estimator's
configuration rule (:mod:`mlenergy.analysis.stalls`); both are called ``host-bound``.
"""

from __future__ import annotations

from pydantic import Field

from mlenergy.records.base import FrozenModel, NonNegFloat

HOST_BOUND_MARK = "host-bound"
"""The mark's name in every view (bench table, ``mlenergy runs``, leaderboard)."""


class HostBound(FrozenModel):
    """Whether the measured GPUs sat near their idle power through most of the measured time.

    A GPU that waits for the host (a Python decode loop, a client that cannot keep up) draws
    little more than idle power; the run's energy per token then measures idle power times the
    host's pace more than the model.

    Attributes:
        marked: ``True``: the run is host-bound (near-idle windows hold more than
            ``time_share_threshold`` of the measured time).
        near_idle_share: Fraction of the measured time in windows judged near idle (static
            batches: the prefill and decode windows, by their durations; serving: the
            steady-state window).
        window_power_w: Mean power of the measured GPUs in each judged window, watts, by phase.
        near_idle: The judged windows found near idle.
        idle_power_w: Power of the same GPUs at rest, measured before the work, watts.
        power_limit_w: Their power limits summed, watts, when known.
        rule: The rule as applied, in words with its thresholds.
        time_share_threshold: The share of time above which the run is marked.
    """

    marked: bool
    near_idle_share: float = Field(ge=0.0, le=1.0)
    window_power_w: dict[str, NonNegFloat]
    near_idle: tuple[str, ...] = ()
    idle_power_w: NonNegFloat
    power_limit_w: NonNegFloat | None = None
    rule: str
    time_share_threshold: float = Field(ge=0.0, le=1.0)

    def describe(self) -> str:
        """One sentence: the verdict and the figures behind it."""
        powers = ", ".join(f"{k} {v:.4g} W" for k, v in self.window_power_w.items())
        limit = f", limit {self.power_limit_w:.4g} W" if self.power_limit_w else ""
        figures = (
            f"near idle for {self.near_idle_share:.0%} of the measured time ({powers}; idle "
            f"{self.idle_power_w:.4g} W{limit})"
        )
        if not self.marked:
            return f"not host-bound: the GPUs were {figures}"
        return (
            f"host-bound: the GPUs were {figures}, so the energy per token measures idle power "
            "times the host's pace more than the model"
        )
