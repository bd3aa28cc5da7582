"""An emulated continuous-batching server: its schedule, its GPU's power and each request's truth.

:class:`BatchingEngine` schedules requests the way vLLM's engine does, one step at a time:

* at most ``max_num_seqs`` requests run at once; the rest wait in a first-come queue, which
  costs nothing (no GPU work is done for a waiting request);
* each step decodes one token for every running request that has its first token, and gives
  what is left of a token budget (``max_batched_tokens``) to prompts still being prefilled,
  first come first served (chunked prefill); a prompt whose last chunk is in the step gets its
  first output token at the step's end;
* a step takes ``step_s + seq_s x decoders + ctx_s x context + prefill_s x prompt tokens``
  seconds and costs ``step_j + seq_j x decoders + ctx_j x context + prefill_j x prompt tokens``
  joules on top of the idle power ``idle_w``, which the GPU draws all the time.

The GPU's power is therefore piecewise constant: ``idle_w`` between steps and
``idle_w + step energy / step time`` during one. Each request's **true energy** is what its
work caused plus an equal share of what its step shared: the step's fixed cost and the idle
power over the step (``step_j + idle_w x step time``) are split equally among the requests in
the step; a decoder adds ``seq_j`` and its context's cost; a prefilling request adds
``prefill_j`` per prompt token of its chunk. The power between steps (no request running) is
nobody's.

These physics are not a per-request split rule: a prompt token and an output token cost
different energy, a step's fixed cost is per step (so per token it depends on the batch), and
time spent waiting costs nothing. Clients see none of it, only when tokens arrive.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SimPhysics:
    """The emulated GPU's costs and the server's limits.

    Attributes:
        idle_w: Power drawn at all times, watts.
        step_s: Fixed time of a step (reading the weights), seconds.
        step_j: Fixed energy of a step above idle, joules.
        seq_s: Time per decoding request in a step, seconds.
        seq_j: Energy per decoding request in a step, joules.
        ctx_s: Time per 1,000 tokens of a decoder's context in a step, seconds.
        ctx_j: Energy per 1,000 tokens of a decoder's context in a step, joules.
        prefill_s: Time per prompt token prefilled, seconds.
        prefill_j: Energy per prompt token prefilled, joules.
        max_num_seqs: Most requests running at once (the server's cap).
        max_batched_tokens: Tokens one step processes at most (decoders count one each).
    """

    idle_w: float = 90.0
    step_s: float = 0.012
    step_j: float = 3.5
    seq_s: float = 0.0002
    seq_j: float = 0.06
    ctx_s: float = 0.00002
    ctx_j: float = 0.006
    prefill_s: float = 0.00005
    prefill_j: float = 0.03
    max_num_seqs: int = 8
    max_batched_tokens: int = 2048


@dataclass
class SimRequest:
    """One request inside the emulated server.

    Attributes:
        rid: The request's id.
        prompt_tokens: Prompt length in tokens.
        output_tokens: Tokens it generates before it ends.
        received_s: Time the server received it, seconds (the engine's clock).
        admitted_s: Time it left the queue and started running (``None``: still waiting).
        prefilled: Prompt tokens prefilled so far.
        token_times_s: Time each output token was produced (step end), seconds.
        true_j: Its true energy so far, joules (see the module docstring).
    """

    rid: int
    prompt_tokens: int
    output_tokens: int
    received_s: float
    admitted_s: float | None = None
    prefilled: int = 0
    token_times_s: list[float] = field(default_factory=list)
    true_j: float = 0.0

    @property
    def done(self) -> bool:
        """Whether every output token has been produced."""
        return len(self.token_times_s) >= self.output_tokens


@dataclass(frozen=True)
class Step:
    """One engine step.

    Attributes:
        start_s: When it began, seconds.
        end_s: When it ended (its tokens are produced then), seconds.
        power_w: GPU power during it, watts (idle included).
        tokens: ``(rid, finished)`` for each output token produced at ``end_s``.
        running: Requests in the server (running) during the step.
        waiting: Requests in the queue during the step.
        members: Ids of the requests the step worked on (decoders and prefill chunks).
    """

    start_s: float
    end_s: float
    power_w: float
    tokens: tuple[tuple[int, bool], ...]
    running: int
    waiting: int
    members: tuple[int, ...] = ()


class BatchingEngine:
    """The scheduler and its physics (see the module docstring).

    Args:
        physics: Costs and limits.
    """

    def __init__(self, physics: SimPhysics) -> None:
        self.physics = physics
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.requests: dict[int, SimRequest] = {}
        self.steps: list[Step] = []

    def add(self, request: SimRequest) -> None:
        """Queue a request the server has just received."""
        self.requests[request.rid] = request
        self.waiting.append(request)

    @property
    def busy(self) -> bool:
        """Whether a request is running or waiting."""
        return bool(self.running or self.waiting)

    def step(self, now: float) -> Step | None:
        """Run the next step from ``now``; ``None`` when there is nothing to do.

        The step's tokens are produced at its end; finished requests leave then.
        """
        ph = self.physics
        while self.waiting and len(self.running) < ph.max_num_seqs:
            request = self.waiting.popleft()
            request.admitted_s = now
            self.running.append(request)
        decoders = [r for r in self.running if r.prefilled >= r.prompt_tokens]
        budget = ph.max_batched_tokens - len(decoders)
        chunks: list[tuple[SimRequest, int]] = []
        for r in self.running:
            if r.prefilled < r.prompt_tokens and budget > 0:
                chunk = min(r.prompt_tokens - r.prefilled, budget)
                chunks.append((r, chunk))
                budget -= chunk
        if not decoders and not chunks:
            return None
        ctx = [(r.prompt_tokens + len(r.token_times_s)) / 1000.0 for r in decoders]
        prompt = sum(c for _, c in chunks)
        seconds = ph.step_s + ph.seq_s * len(decoders) + ph.ctx_s * sum(ctx) + ph.prefill_s * prompt
        joules = ph.step_j + ph.seq_j * len(decoders) + ph.ctx_j * sum(ctx) + ph.prefill_j * prompt
        shared = (ph.step_j + ph.idle_w * seconds) / (len(decoders) + len(chunks))
        end = now + seconds
        tokens: list[tuple[int, bool]] = []
        for r, k in zip(decoders, ctx, strict=True):
            r.true_j += shared + ph.seq_j + ph.ctx_j * k
            r.token_times_s.append(end)
            tokens.append((r.rid, r.done))
        for r, chunk in chunks:
            r.true_j += shared + ph.prefill_j * chunk
            r.prefilled += chunk
            if r.prefilled >= r.prompt_tokens:
                r.token_times_s.append(end)
                tokens.append((r.rid, r.done))
        step = Step(
            start_s=now,
            end_s=end,
            power_w=ph.idle_w + joules / seconds,
            tokens=tuple(tokens),
            running=len(self.running),
            waiting=len(self.waiting),
            members=tuple(r.rid for r in decoders) + tuple(r.rid for r, _ in chunks),
        )
        self.running = [r for r in self.running if not r.done]
        self.steps.append(step)
        return step

    def stretch(self, step: Step, extra_s: float) -> None:
        """The step lasted ``extra_s`` seconds longer, at idle power: its requests share that.

        A real-time driver whose clock wakes late calls it, so that the step's tokens, the
        GPU's power and the truth stay consistent.
        """
        share = self.physics.idle_w * extra_s / max(1, len(step.members))
        for rid in step.members:
            self.requests[rid].true_j += share

    def power_steps(self, t0: float) -> list[tuple[float, float]]:
        """The GPU's power as ``(offset from t0, watts)`` steps (idle between engine steps).

        Args:
            t0: Origin of the offsets, seconds on the engine's clock (before the first step).
        """
        out: list[tuple[float, float]] = [(0.0, self.physics.idle_w)]
        for s in self.steps:
            out.append((s.start_s - t0, s.power_w))
            out.append((s.end_s - t0, self.physics.idle_w))
        cleaned: list[tuple[float, float]] = []
        for offset, watts in out:  # a step starting where the last ended replaces its idle
            if cleaned and offset <= cleaned[-1][0]:
                cleaned[-1] = (cleaned[-1][0], watts)
            else:
                cleaned.append((offset, watts))
        return cleaned
