"""The load generator: send every request on its schedule, at most ``level`` in flight.

Requests arrive on the schedule of :mod:`~mlenergy.workloads.serving.arrivals`; an arrived
request waits for one of ``level`` slots, then streams (:func:`~.client.stream_request`). The
:class:`~.steady_state.SteadyStateTracker` hears every arrival, first token and end as it
happens, so its callbacks can open and close a Zeus window at those moments. The first failed
request stops the run (the level is not a valid measurement): outstanding requests are
cancelled and :class:`LoadFailed` names the failure.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass

import httpx

from mlenergy.workloads.serving.client import RequestOptions, stream_request
from mlenergy.workloads.serving.steady_state import SteadyStateTracker
from mlenergy.workloads.serving.timing import RequestTiming


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
    """

    timings: list[RequestTiming]
    arrivals_s: list[float]
    start_s: float
    end_s: float


def http_client(level: int, request_timeout_s: float) -> httpx.AsyncClient:
    """An HTTP client with ``level`` connections and no proxy from the environment."""
    limits = httpx.Limits(max_connections=level + 4, max_keepalive_connections=level + 4)
    timeout = httpx.Timeout(request_timeout_s, connect=10.0)
    return httpx.AsyncClient(limits=limits, timeout=timeout, trust_env=False)


async def generate_load(
    options: RequestOptions,
    prompts: Sequence[str],
    offsets_s: Sequence[float],
    level: int,
    tracker: SteadyStateTracker,
    *,
    request_timeout_s: float = 600.0,
    on_progress: Callable[[int], None] | None = None,
) -> LoadResult:
    """Send ``prompts`` on the schedule ``offsets_s`` with at most ``level`` in flight.

    Args:
        options: Endpoint, model, API and body fields of every request.
        prompts: One prompt per request.
        offsets_s: Arrival of each request in seconds after the first.
        level: Most requests in flight at once.
        tracker: Hears every arrival, first token and end.
        request_timeout_s: Seconds a request may wait for its next chunk.
        on_progress: Called with the number of finished requests after each one ends.

    Returns:
        The timings.

    Raises:
        LoadFailed: A request failed (HTTP error, dropped connection, no token).
    """
    slots = asyncio.Semaphore(level)
    timings = [RequestTiming(index=i, sent_s=0.0) for i in range(len(prompts))]
    arrivals: list[float] = [0.0] * len(prompts)
    failed: asyncio.Future[RequestTiming] = asyncio.get_running_loop().create_future()
    done = 0

    async with http_client(level, request_timeout_s) as client:

        async def one(i: int) -> None:
            nonlocal done
            async with slots:
                if failed.done():
                    return
                await stream_request(client, options, prompts[i], timings[i], tracker.first_token)
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
        await asyncio.wait([waiter, failed], return_when=asyncio.FIRST_COMPLETED)
        if failed.done():
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            with suppress(asyncio.CancelledError):
                await waiter  # retrieved, so asyncio does not warn about it
            bad = failed.result()
            raise LoadFailed(
                f"request {bad.index + 1} of {len(prompts)} failed: {bad.error}", timings
            )
        await waiter
    end = max((t.end_s or start) for t in timings)
    return LoadResult(timings=timings, arrivals_s=arrivals, start_s=start, end_s=end)
