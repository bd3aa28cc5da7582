"""How often an energy counter updates, and how long a window must be for it to resolve.

NVML's total-energy counter advances in steps every few tens of milliseconds, not
continuously. A window's energy is the difference of two readings, so each edge can be off by
up to one update period of power: a 20 ms window on a 100 ms counter reads either ~0 J (which
Zeus replaces by instant power x time) or a whole period's worth, 4-5x too much.

The window rule: a window shorter than :data:`MIN_PERIODS` update periods is *flagged*
(``WindowResult.resolvable`` is ``False``) and never becomes a reported figure; runners aim for
:data:`TARGET_PERIODS` periods (edge error at most 2 / 25 = 8% worst case, ~2.7% on average,
and the average over repeats is unbiased) by repeating short work inside one window.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from mlenergy.records.serving import MIN_COUNTER_PERIODS

MIN_PERIODS = MIN_COUNTER_PERIODS
"""Windows shorter than this many counter update periods are flagged as unresolvable."""

TARGET_PERIODS = 25
"""Runners size repeated work so that each window spans at least this many periods."""

DEFAULT_POLL_BUDGET_S = 0.6
"""How long :func:`estimate_update_period` polls a counter, in seconds."""


def estimate_update_period(
    read: Callable[[], float],
    budget_s: float = DEFAULT_POLL_BUDGET_S,
    clock: Callable[[], float] = time.perf_counter,
) -> float | None:
    """Measure a counter's update period by polling it and timing its changes.

    The first change is only the phase at which polling began; the period is the median gap
    between later changes.

    Args:
        read: Reads the counter (any unit; only changes matter).
        budget_s: How long to poll, in seconds.
        clock: A monotonic clock in seconds.

    Returns:
        The update period in seconds, or ``None`` when the counter changed fewer than three
        times within the budget (a period longer than ~budget/2, or a counter standing still).
    """
    start = clock()
    last = read()
    changes: list[float] = []
    while (now := clock()) - start < budget_s:
        value = read()
        if value != last:
            changes.append(now)
            last = value
    gaps = [b - a for a, b in itertools.pairwise(changes)]
    if len(gaps) < 2:
        return None
    return float(statistics.median(gaps))


def gpu_counter_periods(gpus: Any, indices: Sequence[int], budget_s: float) -> list[float]:
    """Update period in seconds of each GPU's energy counter.

    Emulated GPUs state theirs (``counter_period_s``); real ones are polled for ``budget_s``
    through Zeus (``get_total_energy_consumption``, in mJ). A counter that did not update within
    the budget is given the budget itself: windows then must span ten budgets, which is
    slow but never wrong.

    Args:
        gpus: Zeus's GPU collection.
        indices: GPU indices to look at.
        budget_s: Polling time per GPU in seconds.

    Returns:
        One period per index, in seconds (0 for a continuous counter).
    """
    periods = []
    for i in indices:
        device = getattr(gpus, "gpus", [None] * (i + 1))[i]
        stated = getattr(device, "counter_period_s", None)
        if stated is not None:
            periods.append(float(stated))
            continue

        def reader(index: int = i) -> float:
            return float(gpus.get_total_energy_consumption(index))

        found = estimate_update_period(reader, budget_s)
        periods.append(found if found is not None else budget_s)
    return periods


def windows_needed(pass_s: float, min_window_s: float, cap: int = 100_000) -> int:
    """How many passes of ``pass_s`` seconds fill a window of ``min_window_s`` seconds.

    Args:
        pass_s: Duration of one pass in seconds (a non-positive value counts as 1 ms).
        min_window_s: The window length to reach, in seconds.
        cap: The most passes ever returned.

    Returns:
        At least 1.
    """
    if min_window_s <= 0:
        return 1
    one = max(pass_s, 1e-3)
    return int(min(cap, max(1, -(-min_window_s // one))))
