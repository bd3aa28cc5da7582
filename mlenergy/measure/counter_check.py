"""Cross-check a GPU's energy counter against its power readings, window by window.

Used by ``benchmarks/gpu_check.py`` on a real GPU, and tested on emulated GPUs: a
:class:`PowerSampler` thread polls Zeus's instant power of one GPU; :func:`integrate_power`
integrates those samples over a window (trapezoids, clipped to the window's edges); and
:func:`agreement` compares the result with the window's counter energy. Nothing here changes
a clock or a power limit: it only reads.
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

AGREEMENT_TOLERANCE = 0.05
"""Counter energy and the integral of power samples should agree within 5%."""


class PowerSampler:
    """Poll one GPU's instant power (Zeus, mW) in a thread; keep ``(unix time s, watts)``.

    Args:
        gpus: Zeus's GPU collection.
        index: The GPU to read.
        period_s: Pause between readings in seconds (0: as fast as the reads go).
    """

    def __init__(self, gpus: Any, index: int, period_s: float = 0.005) -> None:
        self._gpus, self._index, self._period_s = gpus, index, period_s
        self._samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="power-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            watts = self._gpus.get_instant_power_usage(self._index) / 1000.0
            self._samples.append((time.time(), float(watts)))
            if self._period_s > 0:
                self._stop.wait(self._period_s)

    def __enter__(self) -> PowerSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    @property
    def samples(self) -> list[tuple[float, float]]:
        """The samples so far, oldest first."""
        return list(self._samples)


def integrate_power(samples: Sequence[tuple[float, float]], t0: float, t1: float) -> float | None:
    """Energy in joules between ``t0`` and ``t1`` from power samples ``(time s, watts)``.

    Trapezoids between samples, with the power at each edge interpolated linearly between its
    neighbours (held constant beyond the first or last sample).

    Returns:
        Joules, or ``None`` when no sample falls within one second of the window.
    """
    if t1 <= t0 or not samples:
        return None
    times = [t for t, _ in samples]
    if times[-1] < t0 - 1.0 or times[0] > t1 + 1.0:
        return None

    def power_at(t: float) -> float:
        i = bisect.bisect_left(times, t)
        if i == 0:
            return samples[0][1]
        if i >= len(samples):
            return samples[-1][1]
        (ta, pa), (tb, pb) = samples[i - 1], samples[i]
        return pa if tb == ta else pa + (pb - pa) * (t - ta) / (tb - ta)

    inner = [(t, p) for t, p in samples if t0 < t < t1]
    points = [(t0, power_at(t0)), *inner, (t1, power_at(t1))]
    return sum((tb - ta) * (pa + pb) / 2 for (ta, pa), (tb, pb) in itertools.pairwise(points))


@dataclass(frozen=True)
class WindowCheck:
    """One window's counter energy beside the integral of power samples.

    Attributes:
        name: Window name.
        duration_s: Window length in seconds.
        counter_j: Energy from the counter (Zeus's window), joules.
        integral_j: Energy from the power samples, joules (``None``: no samples).
        relative_difference: ``counter_j / integral_j - 1`` (``None`` without an integral).
    """

    name: str
    duration_s: float
    counter_j: float
    integral_j: float | None
    relative_difference: float | None

    @property
    def agrees(self) -> bool:
        """Whether the two agree within :data:`AGREEMENT_TOLERANCE`."""
        d = self.relative_difference
        return d is not None and abs(d) <= AGREEMENT_TOLERANCE


def agreement(
    name: str,
    start_s: float,
    duration_s: float,
    counter_j: float,
    samples: Sequence[tuple[float, float]],
) -> WindowCheck:
    """Compare one window's counter energy with the integral of the power samples over it."""
    integral = integrate_power(samples, start_s, start_s + duration_s)
    diff = counter_j / integral - 1.0 if integral else None
    return WindowCheck(name, duration_s, counter_j, integral, diff)
