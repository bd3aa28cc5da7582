"""Summaries of repeated windows: per-repeat values, mean, spread and 95% CI."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mlenergy.errors import UserError
from mlenergy.measure.window_result import WindowResult
from mlenergy.records import RepeatStats

WIDE_INTERVAL = 0.20
"""A figure whose 95% interval reaches further than +-20% of its mean is marked as noisy."""


def relative_half_width(stats: RepeatStats | None) -> float | None:
    """Half-width of the 95% interval over the mean (``None`` without an interval).

    The interval is the Student-t interval of the mean over the repeats: it comes from the
    run-to-run spread, so interleaved repeats put the machine's drift into it.
    """
    if stats is None or stats.ci95 is None or not stats.mean:
        return None
    return (stats.ci95.high - stats.ci95.low) / 2.0 / abs(stats.mean)


def is_wide(stats: RepeatStats | None) -> bool | None:
    """Whether the interval is wider than +-:data:`WIDE_INTERVAL` (``None``: no interval)."""
    half = relative_half_width(stats)
    return None if half is None else half > WIDE_INTERVAL


@dataclass(frozen=True)
class RepeatSummary:
    """Statistics of repeated windows of the same work.

    Attributes:
        repeats: Number of windows.
        duration_s: Wall time per repeat in seconds.
        energy_j: Energy per repeat in joules; ``None`` if any repeat has no energy figure.
        energy_source: The common label of the windows.
    """

    repeats: int
    duration_s: RepeatStats
    energy_j: RepeatStats | None
    energy_source: str

    @property
    def avg_power_w(self) -> float | None:
        """Mean energy over mean duration, in watts."""
        if self.energy_j is None or self.duration_s.mean <= 0:
            return None
        return self.energy_j.mean / self.duration_s.mean


def energy_stats(results: Sequence[WindowResult]) -> RepeatStats | None:
    """Energy statistics in joules, or ``None`` when a repeat has no energy figure."""
    if not results:
        raise UserError("no window results to summarise", "Measure at least one repeat")
    values = [r.energy_j for r in results]
    if any(v is None for v in values):
        return None
    return RepeatStats.from_values([float(v) for v in values if v is not None], nonnegative=True)


def duration_stats(results: Sequence[WindowResult]) -> RepeatStats:
    """Duration statistics in seconds."""
    if not results:
        raise UserError("no window results to summarise", "Measure at least one repeat")
    return RepeatStats.from_values([r.duration_s for r in results], nonnegative=True)


def summarize_repeats(results: Sequence[WindowResult]) -> RepeatSummary:
    """Summarise repeats of the same window (same energy source required).

    Args:
        results: One :class:`WindowResult` per repeat, e.g. from ``EnergyMeter.repeat``.

    Returns:
        Duration and energy statistics (Student-t 95% CI of the mean).
    """
    if not results:
        raise UserError("no window results to summarise", "Measure at least one repeat")
    sources = {r.energy_source for r in results}
    if len(sources) != 1:
        raise UserError(
            f"repeats mix energy sources {sorted(sources)}",
            "Summarise windows measured by the same meter",
        )
    return RepeatSummary(
        repeats=len(results),
        duration_s=duration_stats(results),
        energy_j=energy_stats(results),
        energy_source=sources.pop(),
    )
