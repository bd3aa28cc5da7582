"""Power timelines: in-process sampling (modelled and emulated power) and downsampling.

Real GPUs are sampled by Zeus's :class:`zeus.monitor.PowerMonitor` (see
:mod:`mlenergy.measure.meter`); this module only provides the in-process sampler used where
that monitor cannot run (the CPU power model, emulated devices) and the downsampler that
turns any trace into a :class:`~mlenergy.records.PowerTimeline` of at most 512 points.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from mlenergy.records import PowerTimeline

MAX_TIMELINE_POINTS = 512
"""Most points a timeline kept on a record may have."""

logger = logging.getLogger(__name__)


def downsample(
    t_s: Sequence[float], power_w: Sequence[float], max_points: int = MAX_TIMELINE_POINTS
) -> tuple[list[float], list[float]]:
    """Reduce a power trace to at most ``max_points`` points by averaging equal-count buckets.

    Averaging (rather than picking every k-th sample) keeps the trace's mean power, so the area
    under the downsampled curve stays close to the energy of the original.

    Args:
        t_s: Sample times in seconds, ascending.
        power_w: Power in watts at each time.
        max_points: The most points to return (at least 1).

    Returns:
        ``(times, powers)``: each output point is the mean time and mean power of a bucket of
        consecutive samples. Traces already short enough come back unchanged.
    """
    if len(t_s) != len(power_w):
        raise ValueError("t_s and power_w differ in length")
    if max_points < 1:
        raise ValueError("max_points must be at least 1")
    n = len(t_s)
    if n <= max_points:
        return list(t_s), list(power_w)
    out_t: list[float] = []
    out_p: list[float] = []
    for k in range(max_points):
        lo, hi = k * n // max_points, (k + 1) * n // max_points
        size = hi - lo
        out_t.append(sum(t_s[lo:hi]) / size)
        out_p.append(sum(power_w[lo:hi]) / size)
    return out_t, out_p


def to_power_timeline(
    samples: Sequence[tuple[float, float]],
    energy_source: str,
    start_time_s: float | None = None,
    max_points: int = MAX_TIMELINE_POINTS,
) -> PowerTimeline | None:
    """Build a downsampled :class:`PowerTimeline` from ``(unix_time_s, watts)`` samples.

    Args:
        samples: Samples, in any order.
        energy_source: Label of the samples (same as the meter's).
        start_time_s: Unix time that becomes ``t = 0``; samples before it are dropped.
            ``None``: the first sample.
        max_points: The most points to keep.

    Returns:
        The timeline, or ``None`` when there is no sample.
    """
    pts = sorted(s for s in samples if start_time_s is None or s[0] >= start_time_s)
    if not pts:
        return None
    origin = pts[0][0] if start_time_s is None else start_time_s
    t, p = downsample([s[0] - origin for s in pts], [max(0.0, s[1]) for s in pts], max_points)
    return PowerTimeline(t_s=tuple(t), power_w=tuple(p), energy_source=energy_source)


class ThreadSampler:
    """Calls ``power_fn`` every ``period_s`` in a daemon thread and keeps ``(time, watts)``.

    Used for the CPU power model and emulated devices only; real GPUs go through Zeus's
    ``PowerMonitor``. The thread sleeps between samples, so its cost is one short Python
    call per period. Each sample is the mean power over the period that ends at its time
    (:meth:`samples`); :meth:`held_samples` gives the same power in Zeus's convention.

    Args:
        power_fn: Returns the scope's power in watts over the last period; called with the
            current unix time.
        period_s: Sampling period in seconds.
        max_samples: Oldest samples are dropped beyond this many.
    """

    def __init__(
        self,
        power_fn: Callable[[float], float],
        period_s: float = 0.1,
        max_samples: int = 200_000,
    ) -> None:
        self._power_fn = power_fn
        self.period_s = period_s
        self._samples: deque[tuple[float, float]] = deque(maxlen=max_samples)
        self._origin_s = time.time()  # where the first sample's period begins
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._failed = False
        self._thread = threading.Thread(
            target=self._run, name="mlenergy-power-sampler", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self.sample_now()

    def sample_now(self) -> None:
        """Take one sample now (the power since the previous sample), e.g. at a run's end.

        A run shorter than one period would otherwise have no sample of its own.
        """
        with self._lock:
            now = time.time()
            try:
                self._samples.append((now, float(self._power_fn(now))))
            except Exception as err:  # a failing sample must not kill the run being measured
                if not self._failed:  # but it must not pass unseen: say so once
                    self._failed = True
                    logger.warning("power sample failed (%s: %s)", type(err).__name__, err)

    def samples(self) -> list[tuple[float, float]]:
        """A copy of the samples so far: ``(time, mean watts since the previous sample)``."""
        return list(self._samples)

    def held_samples(self) -> list[tuple[float, float]]:
        """The same power in Zeus's convention: each ``(time, watts)`` held until the next.

        Every sample's mean power is stamped at the start of its period instead of its end
        (no value changes), and the last one is repeated at its end time.
        """
        pts = list(self._samples)
        if not pts:
            return []
        if len(pts) == self._samples.maxlen:  # the oldest were dropped: its start is unknown
            starts = [t for t, _ in pts[:-1]]
            pts = pts[1:]
        else:
            starts = [self._origin_s, *(t for t, _ in pts[:-1])]
        return [*((a, w) for a, (_, w) in zip(starts, pts, strict=True)), pts[-1]]

    def stop(self) -> None:
        """Stop the thread (idempotent)."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=2 * self.period_s + 1.0)


def delta_power_fn(
    read: Callable[[], float], to_watts: Callable[[float, float], float]
) -> Callable[[float], float]:
    """Make a sampler callback that turns deltas of a cumulative reading into watts.

    Args:
        read: Returns a cumulative quantity (joules from energy counters, or CPU seconds).
        to_watts: ``(delta of the reading, delta seconds) -> watts``.

    Returns:
        A function of the current unix time giving the power over the last period.
    """
    prev = [time.time(), read()]

    def power(now: float) -> float:
        value = read()
        dt, dv = now - prev[0], value - prev[1]
        prev[0], prev[1] = now, value
        if dt <= 0:
            raise ValueError("no time elapsed since the last sample")
        return to_watts(dv, dt)

    return power


def sum_gpu_timelines(
    timelines: dict[int, list[tuple[float, float]]], num_gpus: int
) -> list[tuple[float, float]]:
    """Sum per-GPU ``(unix_time_s, watts)`` traces from Zeus's ``PowerMonitor``.

    Zeus sends a sample only when a GPU's power changes, so each GPU's last value holds until
    its next sample; a total is emitted at every sample once every GPU has reported, plus one
    at the current time holding the last total.

    Args:
        timelines: GPU index to its samples (``PowerMonitor.get_power_timeline``).
        num_gpus: GPUs expected in the total.

    Returns:
        The summed trace, ascending in time.
    """
    events = sorted((t, i, w) for i, tl in timelines.items() for t, w in tl)
    last: dict[int, float] = {}
    out: list[tuple[float, float]] = []
    for t, i, w in events:
        last[i] = w
        if len(last) == num_gpus:
            out.append((t, sum(last.values())))
    if out:
        out.append((max(time.time(), out[-1][0]), out[-1][1]))
    return out


def held_from(
    samples: Sequence[tuple[float, float]], start_time_s: float | None
) -> list[tuple[float, float]]:
    """Held samples from ``start_time_s`` on: the one in force then is re-stamped at it.

    Args:
        samples: ``(unix time, watts)``, each held until the next.
        start_time_s: Where to start (``None``: all of them).

    Returns:
        The samples from ``start_time_s``, sorted; the power at every instant is unchanged.
    """
    pts = sorted(samples)
    if start_time_s is None or not pts:
        return pts
    before = [p for p in pts if p[0] <= start_time_s]
    after = [p for p in pts if p[0] > start_time_s]
    return ([(start_time_s, before[-1][1])] if before else []) + after
