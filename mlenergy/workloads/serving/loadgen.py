"""The load generator: send every request on its schedule, at most ``level`` in flight.

Requests arrive on the schedule of :mod:`~mlenergy.workloads.serving.arrivals`; an arrived
request waits for one of ``level`` slots, then streams (:func:`~.client.stream_request`). The
:class:`~.steady_state.SteadyStateTracker` hears every arrival, first token and end as it
happens, so its callbacks can open and close a Zeus window at those moments. The first failed
request stops the run (the level is not a valid measurement): outstanding requests are
cancelled and :class:`LoadFailed` names the failure.

**Never the bottleneck.** Requests stream in this process, or in worker processes
(:mod:`~.client_procs`) when one core would limit the client. ``client_procs=N`` streams from
``N`` workers (1: this process). ``None`` (``--client-procs auto``) starts in this process and
every :data:`MONITOR_S` looks at the CPU the streaming processes used: when one used more than
:data:`AUTO_BUSY` of a core, new requests go to a worker (started then, or kept warm from the
start on a machine of :data:`PREWARM_CORES` cores or more) and the next one is warmed, up to
:func:`max_workers`. The server sees the same requests either way.
If a streaming process still used more than :data:`CLIENT_BOUND` of a core in a monitor period,
the run ends with a warning that the client may have set the pace.
"""

from __future__ import annotations

import asyncio
import os
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Any

from mlenergy.workloads.serving.client import RequestOptions, http_session, stream_request
from mlenergy.workloads.serving.client_procs import READY_TIMEOUT_S, WorkerLane
from mlenergy.workloads.serving.steady_state import SteadyStateTracker
from mlenergy.workloads.serving.timing import RequestTiming

MONITOR_S = 0.5
"""Seconds between looks at the client's CPU use."""
AUTO_BUSY = 0.5
"""Share of one core a streaming process may use before ``auto`` hands new requests on."""
CLIENT_BOUND = 0.9
"""Share of one core above which a streaming process may have set the pace (a warning)."""
PREWARM_CORES = 4
"""With at least this many cores, ``auto`` keeps a worker warm from the start."""


class LoadFailed(RuntimeError):
    """A request of the run failed; ``timings`` holds what the client saw until then."""

    def __init__(self, message: str, timings: list[RequestTiming]) -> None:
        super().__init__(message)
        self.timings = timings


@dataclass(frozen=True)
class LoadResult:
    """What the load generator saw.

    Attributes:
        timings: Every request, in send order.
        arrivals_s: Unix time each request arrived (was due).
        start_s: Unix time of the first arrival.
        end_s: Unix time the last request ended.
        client_procs: Processes that streamed requests (1: this one alone).
        client_busy: Highest share of one core a streaming process used in a monitor period.
    """

    timings: list[RequestTiming] = field(repr=False)  # asyncio.run formats its result's repr
    arrivals_s: list[float] = field(repr=False)
    start_s: float
    end_s: float
    client_procs: int = 1
    client_busy: float = 0.0


def max_workers() -> int:
    """Most worker processes ``auto`` starts: the cores less one, at least 1, at most 16."""
    return max(1, min(16, (os.cpu_count() or 2) - 1))


class _Lanes:
    """Where requests stream: this process, worker processes, or first one then the others."""

    def __init__(
        self,
        options: RequestOptions,
        level: int,
        procs: int | None,
        on_first: Callable[[int, float], None],
    ) -> None:
        self.options, self.level, self.procs, self.on_first = options, level, procs, on_first
        self.local = procs in (None, 1)
        self.session: Any = None
        self.local_inflight = 0
        self.active: list[WorkerLane] = []
        self.warm: WorkerLane | None = None
        self.busy = 0.0
        self.used = 1 if self.local else 0
        self._monitor: asyncio.Task[None] | None = None

    async def __aenter__(self) -> _Lanes:
        if self.local:
            self.session = http_session(self.level + 4)
        if self.procs is None and (os.cpu_count() or 1) >= PREWARM_CORES:
            self.warm = self._spawn()
        elif self.procs is not None and self.procs > 1:
            lanes = [self._spawn() for _ in range(self.procs)]
            try:
                await asyncio.wait_for(asyncio.gather(*(w.ready for w in lanes)), READY_TIMEOUT_S)
            except BaseException:
                for lane in lanes:
                    lane.close(grace_s=1.0)
                raise
            self.active, self.used = lanes, len(lanes)
        self._monitor = asyncio.create_task(self._watch())
        return self

    def _spawn(self) -> WorkerLane:
        return WorkerLane(self.options, self.level, self.on_first)

    async def __aexit__(self, *exc: object) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
            with suppress(asyncio.CancelledError):
                await self._monitor
        for lane in [*self.active, *([self.warm] if self.warm else [])]:
            lane.close()
        if self.session is not None:
            await self.session.close()

    async def run(self, index: int, prompt: str, timing: RequestTiming) -> RequestTiming:
        if self.active:
            lane = min(self.active, key=lambda w: w.inflight)
            return await lane.run(index, prompt, timing)
        self.local_inflight += 1
        try:
            return await stream_request(self.session, self.options, prompt, timing, self.on_first)
        finally:
            self.local_inflight -= 1

    async def _watch(self) -> None:
        """Every MONITOR_S: each streaming process's CPU share; hand on when one is busy.

        This process counts the CPU of the thread that runs the event loop only (other threads,
        such as a power monitor's, are not the client's).
        """
        last_wall = time.monotonic()
        last_own = time.thread_time()
        last = {id(w): w.cpu_s() for w in self.active}
        while True:
            await asyncio.sleep(MONITOR_S)
            wall = time.monotonic()
            span = max(wall - last_wall, 1e-6)
            own = time.thread_time()
            shares = [(own - last_own) / span] if self.local and not self.active else []
            for w in self.active:
                cpu = w.cpu_s()
                shares.append((cpu - last.get(id(w), cpu)) / span)
                last[id(w)] = cpu
            last_wall, last_own = wall, own
            peak = max(shares, default=0.0)
            self.busy = max(self.busy, peak)
            if peak > AUTO_BUSY and self.procs is None:
                self._hand_on(last)

    def _hand_on(self, last: dict[int, float]) -> None:
        """Auto: route new requests to the warm worker once it is up; warm the next one."""
        warm = self.warm
        if warm is None:
            if len(self.active) < max_workers():
                self.warm = self._spawn()
            return
        if not warm.ready.done():
            return
        self.warm = None
        if warm.ready.exception() is not None:  # it could not start: stay as we are
            warm.close(grace_s=0.5)
            return
        self.active.append(warm)
        last[id(warm)] = warm.cpu_s()
        self.used = 1 + len(self.active)
        if len(self.active) < max_workers():
            self.warm = self._spawn()


async def generate_load(
    options: RequestOptions,
    prompts: Sequence[str],
    offsets_s: Sequence[float],
    level: int,
    tracker: SteadyStateTracker,
    *,
    request_timeout_s: float | None = None,
    client_procs: int | None = 1,
    on_progress: Callable[[int], None] | None = None,
) -> LoadResult:
    """Send ``prompts`` on the schedule ``offsets_s`` with at most ``level`` in flight.

    Args:
        options: Endpoint, model, API, body fields and time limit of every request.
        prompts: One prompt per request.
        offsets_s: Arrival of each request in seconds after the first.
        level: Most requests in flight at once.
        tracker: Hears every arrival, first token and end.
        request_timeout_s: Replaces ``options.request_timeout_s`` when given (seconds).
        client_procs: Processes that stream (1: this one); ``None``: chosen from the CPU the
            client uses as it runs (see the module's description).
        on_progress: Called with the number of finished requests after each one ends.

    Returns:
        The timings.

    Raises:
        LoadFailed: A request failed (HTTP error, dropped connection, bad chunk, deadline,
            no token).
    """
    if request_timeout_s is not None:
        options = replace(options, request_timeout_s=request_timeout_s)
    slots = asyncio.Semaphore(level)
    timings = [RequestTiming(index=i, sent_s=0.0) for i in range(len(prompts))]
    arrivals: list[float] = [0.0] * len(prompts)
    failed: asyncio.Future[RequestTiming] = asyncio.get_running_loop().create_future()
    done = 0

    async with _Lanes(options, level, client_procs, tracker.first_token) as lanes:

        async def one(i: int) -> None:
            nonlocal done
            async with slots:
                if failed.done():
                    return
                timings[i] = await lanes.run(i, prompts[i], timings[i])
            tracker.finished(i, timings[i].end_s or time.time())
            done += 1
            if on_progress is not None:
                on_progress(done)
            if timings[i].error is not None and not failed.done():
                failed.set_result(timings[i])

        start = time.time()
        tasks: list[asyncio.Task[None]] = []
        for i, offset in enumerate(offsets_s):
            delay = start + offset - time.time()
            if delay > 0:
                await asyncio.wait([failed], timeout=delay)
            if failed.done():
                break
            arrivals[i] = time.time()
            tracker.arrived(i, arrivals[i])
            tasks.append(asyncio.create_task(one(i)))
        waiter = asyncio.gather(*tasks)
        try:
            racing: list[asyncio.Future[Any]] = [waiter, failed]
            await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not waiter.done():  # a failure, or this coroutine cancelled (Ctrl-C)
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                with suppress(asyncio.CancelledError):
                    await waiter  # retrieved, so asyncio does not warn about it
        if failed.done():
            bad = failed.result()
            raise LoadFailed(
                f"request {bad.index + 1} of {len(prompts)} failed: {bad.error}", timings
            )
        await waiter
    if lanes.busy > CLIENT_BOUND:
        warnings.warn(
            f"the client used {100 * lanes.busy:.0f}% of a core in a streaming process at "
            f"level {level} ({lanes.used} process(es)): it may have set the pace; "
            "pass --client-procs with more processes",
            RuntimeWarning,
            stacklevel=2,
        )
    end = max((t.end_s or start) for t in timings)
    return LoadResult(
        timings=timings,
        arrivals_s=arrivals,
        start_s=start,
        end_s=end,
        client_procs=lanes.used,
        client_busy=lanes.busy,
    )
