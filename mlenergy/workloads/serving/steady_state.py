"""The steady-state window of a serving run, as ML.ENERGY defines it.

With a level (concurrency) ``L``:

* the window **opens** when the first ``L`` requests sent have all received their first token
  (every slot is then busy decoding, the prefill burst is over);
* it **closes** at the first request completion after that which leaves fewer than ``L``
  requests still to serve: requests that have arrived and not finished (in flight, or waiting
  for a slot) fall below ``L`` (the ramp-down begins).

If, when it would open, fewer than ``L`` requests are already outstanding (a slow arrival rate),
the server never ran at the level and there is no steady state.

:class:`SteadyStateTracker` applies the rule live, as events arrive, so that the caller can open
and close a Zeus window at those moments; :func:`steady_state_window` applies the same rule
after the fact (tests, checks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlenergy.workloads.serving.timing import RequestTiming


@dataclass(frozen=True)
class Window:
    """A time window in unix seconds."""

    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        """Length of the window in seconds."""
        return self.end_s - self.start_s


class SteadyStateTracker:
    """Applies the steady-state rule to events as they happen.

    Args:
        level: The concurrency level ``L`` (at least 1).
        on_open: Called with the event's time when the window opens.
        on_close: Called with the event's time when the window closes.
    """

    def __init__(
        self,
        level: int,
        on_open: Callable[[float], None] | None = None,
        on_close: Callable[[float], None] | None = None,
    ) -> None:
        self.level = level
        self._on_open, self._on_close = on_open, on_close
        self._arrived = 0
        self._finished = 0
        self._first_level_pending = set(range(level))
        self.opened_s: float | None = None
        self.closed_s: float | None = None
        self.never_reached = False

    @property
    def outstanding(self) -> int:
        """Requests arrived and not finished (in flight or waiting for a slot)."""
        return self._arrived - self._finished

    def arrived(self, index: int, t: float) -> None:
        """Request ``index`` arrived (was scheduled to be sent) at unix time ``t``."""
        self._arrived += 1

    def first_token(self, index: int, t: float) -> None:
        """Request ``index`` received its first token at unix time ``t``."""
        self._first_level_pending.discard(index)
        self._maybe_open(t)

    def finished(self, index: int, t: float) -> None:
        """Request ``index`` ended (success or failure) at unix time ``t``."""
        self._finished += 1
        self._first_level_pending.discard(index)
        if self.opened_s is not None and self.closed_s is None and self.outstanding < self.level:
            self.closed_s = t
            if self._on_close is not None:
                self._on_close(t)
        else:
            self._maybe_open(t)

    def _maybe_open(self, t: float) -> None:
        if self.opened_s is not None or self.never_reached or self._first_level_pending:
            return
        if self.outstanding < self.level:
            self.never_reached = True
            return
        self.opened_s = t
        if self._on_open is not None:
            self._on_open(t)

    @property
    def window(self) -> Window | None:
        """The window once it has opened and closed, else ``None``."""
        if self.opened_s is None or self.closed_s is None:
            return None
        return Window(self.opened_s, self.closed_s)


def steady_state_window(
    requests: Sequence[RequestTiming], level: int, arrivals_s: Sequence[float] | None = None
) -> Window | None:
    """The steady-state window of a finished run (the rule of :class:`SteadyStateTracker`).

    Args:
        requests: Every request of the run (``index`` is its send order).
        level: The concurrency level.
        arrivals_s: Unix time each request arrived (was due to be sent); default ``sent_s``.

    Returns:
        The window, or ``None`` when the run never held ``level`` requests.
    """
    events: list[tuple[float, int, int]] = []  # (time, order, index); order: arrive < token < end
    for r in requests:
        arrived = arrivals_s[r.index] if arrivals_s is not None else r.sent_s
        events.append((arrived, 0, r.index))
        if r.first_token_s is not None:
            events.append((r.first_token_s, 1, r.index))
        if r.end_s is not None:
            events.append((r.end_s, 2, r.index))
    tracker = SteadyStateTracker(level)
    for t, kind, index in sorted(events):
        (tracker.arrived, tracker.first_token, tracker.finished)[kind](index, t)
    return tracker.window


def tokens_in_window(requests: Sequence[RequestTiming], window: Window) -> int:
    """Output tokens whose arrival falls in ``[window.start_s, window.end_s]``."""
    return sum(
        1 for r in requests for t in r.token_times_s() if window.start_s <= t <= window.end_s
    )


def mean_in_flight(requests: Sequence[RequestTiming], window: Window) -> float:
    """Time-averaged number of requests in flight (sent, not ended) inside ``window``."""
    if window.duration_s <= 0:
        return 0.0
    busy = 0.0
    for r in requests:
        end = r.end_s if r.end_s is not None else window.end_s
        busy += max(0.0, min(end, window.end_s) - max(r.sent_s, window.start_s))
    return busy / window.duration_s
