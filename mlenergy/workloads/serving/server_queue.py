"""When each request ran in the server, as opposed to waiting in its queue.

A server runs at most its cap of requests at once (vLLM's ``max_num_seqs``); a client level
above it leaves the rest in the server's queue, where they cost nothing. The client cannot see
the queue, so it is rebuilt:

* **The cap.** Given when ``--launch`` set it (``{max_num_seqs}``); else the most requests the
  server's ``/metrics`` said were running while others waited; else, for a server without
  metrics, the most requests the client saw decoding at once (between their first token and
  their end) for 99% of the time, when that is below ``level - 1`` (otherwise no request was
  ever held back). When the metrics never show a request waiting, there is no queue.
* **Admission.** Servers admit first come, first served: a request starts running when it is
  sent, if fewer than ``cap`` earlier requests are still running, else when the earliest of
  those ends (its slot frees). It cannot start after its own first token.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from mlenergy.workloads.serving.timing import RequestTiming


@dataclass(frozen=True)
class ServerCap:
    """The server's concurrency cap as far as it is known.

    Attributes:
        cap: Most requests running at once (``None``: no queue was seen).
        source: How it is known: ``--launch {max_num_seqs}``, ``/metrics``, ``client``, or
            ``None`` when there is no cap to apply.
        queue_seen: Whether requests waited in the server's queue (``/metrics`` waiting > 0,
            or fewer decoding at once than the client had in flight).
    """

    cap: int | None
    source: str | None
    queue_seen: bool


def most_decoding(requests: Sequence[RequestTiming], share: float = 0.99) -> int:
    """Most requests between their first token and their end, for ``share`` of the time.

    A client that is late reading one stream's end sees two requests decoding in one slot for a
    moment; the overlaps that last less than ``1 - share`` of the busy time are ignored.
    """
    events = sorted(
        (t, kind)
        for r in requests
        if r.first_token_s is not None and r.end_s is not None
        for t, kind in ((r.first_token_s, 1), (r.end_s, -1))
    )
    held: dict[int, float] = {}  # count -> seconds held
    now = 0
    for (t, kind), (t_next, _) in zip(events, [*events[1:], events[-1]], strict=True):
        now += kind
        held[now] = held.get(now, 0.0) + (t_next - t)
    busy = sum(v for n, v in held.items() if n > 0)
    if busy <= 0:
        return max(held, default=0)
    covered = 0.0
    for n in sorted(held):
        covered += held[n] if n > 0 else 0.0
        if covered >= share * busy:
            return n
    return max(held)


def infer_cap(
    requests: Sequence[RequestTiming],
    level: int,
    scrapes: Sequence[dict[str, float]] = (),
    declared: int | None = None,
) -> ServerCap:
    """The server's cap (see the module docstring).

    Args:
        requests: The requests of the run.
        level: The client's level (most in flight).
        scrapes: ``/metrics`` readings (``running``, ``waiting`` counts) over the run.
        declared: The cap the launch command set, if any.
    """
    if declared is not None:
        return ServerCap(declared, "--launch {max_num_seqs}", declared < level)
    running = [s["running"] for s in scrapes if "running" in s]
    if running:
        if any(s.get("waiting", 0.0) > 0 for s in scrapes):
            return ServerCap(round(max(running)), "/metrics", True)
        return ServerCap(None, None, False)
    decoding = most_decoding(requests)
    if decoding < level - 1:
        return ServerCap(decoding, "client", True)
    return ServerCap(None, None, False)


@dataclass(frozen=True)
class ServerSpans:
    """When each request ran in the server, and when its prompt was prefilled (unix seconds).

    Attributes:
        admitted_s: When each request left the queue (its sending time when there is none).
        prefill_start_s: When the server began its prompt: its admission, or the first token
            of the prompt admitted before it when the server was still prefilling that one
            (prompts are prefilled first come, first served).
    """

    admitted_s: list[float]
    prefill_start_s: list[float]


_SAME_STEP_S = 1e-3
"""First tokens closer than this came out of the same engine step, seconds."""


def server_spans(requests: Sequence[RequestTiming], cap: int | None) -> ServerSpans:
    """Rebuild admissions and prefills, first come, first served (see the module docstring).

    Requests are taken in the order of their first tokens, which is the order the server
    admitted them: requests sent together reach the server in an order the client cannot see.

    Args:
        requests: Finished requests (``first_token_s`` and ``end_s`` set).
        cap: The server's cap (``None``: each request runs as soon as it is sent).

    Returns:
        Admission and prefill start of each request, in the order given.
    """
    admitted = [r.sent_s for r in requests]
    prefill = list(admitted)
    running: list[float] = []  # end times of the requests in the server
    last_admitted = -float("inf")
    done_prefill = -float("inf")  # first token of the last earlier prompt (another step)
    previous_first = -float("inf")
    order = sorted(range(len(requests)), key=lambda i: (_first(requests[i]), requests[i].sent_s))
    for i in order:
        r = requests[i]
        first = _first(r)
        start = r.sent_s
        if cap is not None:
            start = max(start, last_admitted)
            while running and running[0] <= start:
                heapq.heappop(running)
            if len(running) >= cap:
                start = max(start, heapq.heappop(running))
            heapq.heappush(running, r.end_s if r.end_s is not None else first)
            last_admitted = start = min(start, first)
        if first - previous_first > _SAME_STEP_S:
            done_prefill = previous_first
        previous_first = first
        admitted[i] = start
        prefill[i] = min(first, max(start, done_prefill))
    return ServerSpans(admitted, prefill)


def _first(r: RequestTiming) -> float:
    if r.first_token_s is not None:
        return r.first_token_s
    return r.end_s if r.end_s is not None else r.sent_s
