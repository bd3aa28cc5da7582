"""Run the emulated server (:mod:`.serving_sim`) against a client in virtual time.

:func:`simulate` plays a whole benchmark level without a network or a wall clock: a client that
keeps at most ``level`` requests in flight (as :mod:`mlenergy.workloads.serving.loadgen` does),
loopback latencies, the engine's steps, the power samples a meter would have taken and the
``/metrics`` scrapes the runner would have made. A 300 s scenario takes a second or two of CPU.
What comes out is exactly what :func:`mlenergy.workloads.serving.energy_split.split_energy`
reads on a real run, plus the truth to hold it to.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from mlenergy.measure.emulated import PowerProfile
from mlenergy.testing.serving_sim import BatchingEngine, SimPhysics, SimRequest, Step
from mlenergy.workloads.serving.arrivals import arrival_offsets_s
from mlenergy.workloads.serving.steady_state import Window, steady_state_window
from mlenergy.workloads.serving.timing import RequestTiming

T0 = 1_700_000_000.0
"""Virtual unix time at which a simulated run starts, seconds."""


@dataclass(frozen=True)
class SimScenario:
    """One benchmark level against the emulated server.

    Attributes:
        name: What the scenario is called in reports.
        physics: The server's costs and cap.
        level: Most requests the client keeps in flight.
        num_requests: Requests sent.
        prompt_tokens: Prompt length of request ``i`` (a function of ``i``), tokens.
        output_tokens: Output length of request ``i``, tokens.
        request_rate: Mean arrivals per second (``inf``: all at once).
        sampling: ``"counter"`` (mean power over each sampling period, as the in-process
            sampler reads energy counters) or ``"instant"`` (the power at the sample's moment,
            as Zeus's ``PowerMonitor`` reads it on real GPUs).
        sample_period_s: Sampling period, seconds.
        scrape_period_s: Period of the ``/metrics`` scrapes, seconds (0: none).
        latency_s: Mean one-way loopback latency, seconds.
        seed: Seed of the latencies, the sampler's jitter and the arrivals.
    """

    name: str
    physics: SimPhysics
    level: int
    num_requests: int
    prompt_tokens: Callable[[int], int]
    output_tokens: Callable[[int], int]
    request_rate: float = math.inf
    sampling: str = "counter"
    sample_period_s: float = 0.1
    scrape_period_s: float = 1.0
    latency_s: float = 0.0003
    seed: int = 0


@dataclass
class SimRun:
    """What a simulated level produced.

    Attributes:
        timings: What the client saw of each request, in send order (unix-like seconds).
        truth_j: Each request's true energy, joules, same order.
        samples: Power samples ``(time, watts)``, each held until the next (Zeus's convention).
        scrapes: ``(time, {"running": n, "waiting": m})`` as ``/metrics`` would have said.
        profile: The GPU's exact power over time.
        window: The steady-state window (``None``: the level was never reached).
        admitted_s: When the server admitted each request (left its queue), same order.
        steps: The engine's steps.
    """

    timings: list[RequestTiming]
    truth_j: list[float]
    samples: list[tuple[float, float]]
    scrapes: list[tuple[float, dict[str, float]]]
    profile: PowerProfile
    window: Window | None
    admitted_s: list[float] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)


def _samples(
    profile: PowerProfile, start: float, end: float, sc: SimScenario, rng: np.random.Generator
) -> list[tuple[float, float]]:
    """Power samples over ``[start, end]``: forward-held, as Zeus's timelines hold them."""
    times = [start]
    while times[-1] < end:  # a sampler thread wakes a little late each period
        times.append(times[-1] + sc.sample_period_s + float(rng.uniform(0.0, 0.002)))
    if sc.sampling == "instant":
        out: list[tuple[float, float]] = []
        for t in times:
            watts = profile.power_w(t)
            if not out or out[-1][1] != watts or t == times[-1]:  # Zeus drops repeats
                out.append((t, watts))
        return out
    out = [(a, profile.energy_j(a, b) / (b - a)) for a, b in itertools.pairwise(times)]
    return [*out, (times[-1], out[-1][1])]


def _scrapes(steps: list[Step], start: float, end: float, period: float) -> list:
    if period <= 0 or not steps:
        return []
    starts = [s.start_s for s in steps]
    out = []
    t = start + period
    while t < end:
        i = int(np.searchsorted(starts, t, side="right")) - 1
        s = steps[i] if i >= 0 and steps[i].end_s >= t else None
        running, waiting = (s.running, s.waiting) if s is not None else (0, 0)
        out.append((t, {"running": float(running), "waiting": float(waiting)}))
        t += period
    return out


def simulate(sc: SimScenario) -> SimRun:
    """Play the scenario in virtual time (see the module docstring)."""
    rng = np.random.default_rng(sc.seed)
    engine = BatchingEngine(sc.physics)
    offsets = arrival_offsets_s(sc.num_requests, sc.request_rate, 1.0, sc.seed)
    timings = [RequestTiming(index=i, sent_s=0.0) for i in range(sc.num_requests)]
    events: list[tuple[float, int, str, int]] = []
    order = 0

    def push(t: float, kind: str, rid: int) -> None:
        nonlocal order
        order += 1
        heapq.heappush(events, (t, order, kind, rid))

    def latency() -> float:
        return sc.latency_s * 0.5 + float(rng.exponential(sc.latency_s * 0.5))

    for i, off in enumerate(offsets):
        push(T0 + off, "arrive", i)
    queue: list[int] = []
    in_flight = 0
    step: Step | None = None

    def send(now: float) -> None:
        nonlocal in_flight
        while queue and in_flight < sc.level:
            i = queue.pop(0)
            in_flight += 1
            timings[i].sent_s = now
            timings[i].prompt_tokens = sc.prompt_tokens(i)
            timings[i].prompt_tokens_reported = True
            push(now + latency(), "receive", i)

    while events or step is not None:
        if step is not None and (not events or step.end_s <= events[0][0]):
            for rid, finished in step.tokens:
                push(step.end_s + latency(), "end" if finished else "token", rid)
            step = engine.step(step.end_s)
            continue
        t, _, kind, i = heapq.heappop(events)
        if kind == "arrive":
            queue.append(i)
            send(t)
        elif kind == "receive":
            engine.add(SimRequest(i, sc.prompt_tokens(i), sc.output_tokens(i), t))
            if step is None:
                step = engine.step(t)
        else:
            r = timings[i]
            t = max(t, r.chunk_times_s[-1] + 1e-6) if r.chunk_times_s else t
            if r.first_token_s is None:
                r.first_token_s = t
            r.chunk_times_s.append(t)
            if kind == "end":
                r.end_s = t
                r.output_tokens = len(r.chunk_times_s)
                r.finish_reason = "length"
                in_flight -= 1
                send(t)
    end = max(r.end_s or T0 for r in timings)
    profile = PowerProfile.piecewise(engine.power_steps(T0), t0=T0)
    return SimRun(
        timings=timings,
        truth_j=[engine.requests[i].true_j for i in range(sc.num_requests)],
        samples=_samples(profile, T0 - 0.05, end + 0.2, sc, rng),
        scrapes=_scrapes(engine.steps, T0, end, sc.scrape_period_s),
        profile=profile,
        window=steady_state_window(timings, sc.level, [T0 + o for o in offsets]),
        admitted_s=[engine.requests[i].admitted_s or 0.0 for i in range(sc.num_requests)],
        steps=engine.steps,
    )


def lengths(values: Sequence[int] | int, seed: int = 0, spread: float = 0.0) -> Callable:
    """Per-request lengths: a constant, a cycle through ``values``, or log-uniform +-spread.

    Args:
        values: One length (all equal) or a list cycled through by request index.
        seed: Seed of the random spread.
        spread: Draw each length log-uniformly within ``x / (1 + spread)`` to
            ``x x (1 + spread)`` of its base value (0: exact).
    """
    base = [values] if isinstance(values, int) else list(values)
    factors = np.exp(np.random.default_rng(seed).uniform(-1, 1, 100_000) * math.log1p(spread))
    return lambda i: max(1, round(base[i % len(base)] * float(factors[i % factors.size])))
