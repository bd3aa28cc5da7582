"""Greedy generation as an explicit loop over ``model(...)`` with a KV cache.

The runner needs prefill and decode in separate measurement windows and the time of every
decode step, which ``model.generate`` does not expose. Prefill is one forward pass over the
prompt that yields the first token; decode is one forward pass per further token, feeding the
argmax back (EOS ignored, so every sequence has exactly the requested length).

Step times: on the CPU each step is timed with the wall clock (CPU kernels run synchronously).
On a GPU the loop never waits for the device between steps (a host synchronisation per token
adds bubbles that serving does not have, and lowers power): each step is bracketed by CUDA
events, and the host synchronises once, after the last step, to read them.
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class GenerationState:
    """What decode continues from: the last token of each sequence and the KV cache.

    Attributes:
        next_tokens: ``(batch, 1)`` token ids to feed next.
        cache: The model's KV cache after the tokens seen so far.
        generated: Every generated ``(batch, 1)`` id tensor so far, in order.
    """

    next_tokens: torch.Tensor
    cache: Any
    generated: list[torch.Tensor]

    def output_ids(self) -> torch.Tensor:
        """All generated ids as a ``(batch, tokens)`` tensor."""
        return torch.cat(self.generated, dim=1)


def cache_argument(model: torch.nn.Module) -> str:
    """Name of the forward argument that takes the KV cache (``cache`` or ``past_key_values``).

    transformers 5.x renamed ``past_key_values`` to ``cache``; older versions only know the
    former.
    """
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _logits_kwargs(model: torch.nn.Module) -> dict[str, int]:
    """``{"logits_to_keep": 1}`` when the model supports it (only the last logits are needed)."""
    params = inspect.signature(model.forward).parameters
    return {"logits_to_keep": 1} if "logits_to_keep" in params else {}


def _cache_of(outputs: Any) -> Any:
    cache = getattr(outputs, "cache", None)
    return cache if cache is not None else outputs.past_key_values


class _WallTimer:
    """Step times from the wall clock (CPU kernels finish before the call returns).

    MPS is synchronised per step, as it has no event timer here.
    """

    def __init__(self, device: torch.device) -> None:
        self._device = device
        self._times: list[float] = []
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = time.perf_counter()

    def stop(self) -> None:
        if self._device.type == "mps":
            synchronize(self._device)
        self._times.append(time.perf_counter() - self._t0)

    def times_s(self) -> list[float]:
        return self._times


class _CudaEventTimer:
    """Step times from CUDA events; the host synchronises once, when they are read."""

    def __init__(self, device: torch.device) -> None:
        self._device = device
        self._events: list[tuple[Any, Any]] = []

    def _event(self) -> Any:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def start(self) -> None:
        self._events.append((self._event(), None))

    def stop(self) -> None:
        begin, _ = self._events[-1]
        self._events[-1] = (begin, self._event())

    def times_s(self) -> list[float]:
        if not self._events:
            return []
        synchronize(self._device)  # the window's edge: one wait for the whole loop
        return [begin.elapsed_time(end) / 1000.0 for begin, end in self._events]


def step_timer(device: torch.device | str) -> _WallTimer | _CudaEventTimer:
    """The step timer for ``device``: CUDA events on a GPU, the wall clock elsewhere."""
    dev = torch.device(device)
    return _CudaEventTimer(dev) if dev.type == "cuda" else _WallTimer(dev)


def rewind(state: GenerationState, prompt_tokens: int, first: torch.Tensor) -> None:
    """Return ``state`` to just after prefill so the same decode can run again.

    Args:
        state: A state after some decode steps (changed in place).
        prompt_tokens: Prompt length in tokens (the cache is cropped back to it).
        first: The first generated token ``(batch, 1)``, fed again as the next token.
    """
    extra = int(state.cache.get_seq_length()) - prompt_tokens
    if extra > 0:
        state.cache.crop(-extra)  # a negative count removes tokens (transformers 4.x and 5.x)
    state.next_tokens = first
    state.generated = [first]


def synchronize(device: torch.device | str) -> None:
    """Wait for queued work on ``device`` (no-op on CPU)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        torch.mps.synchronize()


@torch.inference_mode()
def prefill(model: torch.nn.Module, input_ids: torch.Tensor) -> GenerationState:
    """Run the prompt through the model and pick the first token (greedy).

    Args:
        model: A causal LM in eval mode.
        input_ids: ``(batch, input_tokens)`` prompt ids on the model's device.

    Returns:
        The state after the prompt, holding the first generated token.
    """
    out = model(input_ids=input_ids, use_cache=True, **_logits_kwargs(model))
    first = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
    return GenerationState(next_tokens=first, cache=_cache_of(out), generated=[first])


@torch.inference_mode()
def decode(
    model: torch.nn.Module,
    state: GenerationState,
    steps: int,
    cache_arg: str | None = None,
    device: torch.device | str = "cpu",
) -> list[float]:
    """Generate ``steps`` more tokens greedily, one forward pass each.

    Args:
        model: A causal LM in eval mode.
        state: The state after prefill (updated in place).
        steps: Decode steps (tokens per sequence to add).
        cache_arg: Forward argument name of the cache (see :func:`cache_argument`).
        device: Device the model runs on: a CUDA device is timed with events and synchronised
            once, after the last step; other devices by the wall clock per step.

    Returns:
        The time of every step in seconds (the inter-token latencies).
    """
    cache_arg = cache_arg or cache_argument(model)
    extra = _logits_kwargs(model)
    timer = step_timer(device)
    for _ in range(steps):
        timer.start()
        out = model(
            input_ids=state.next_tokens,
            use_cache=True,
            **extra,
            **{cache_arg: state.cache},
        )
        state.next_tokens = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
        state.cache = _cache_of(out)
        state.generated.append(state.next_tokens)
        timer.stop()
    return timer.times_s()


def generate(model: torch.nn.Module, input_ids: torch.Tensor, output_tokens: int) -> torch.Tensor:
    """Greedy generation of exactly ``output_tokens`` tokens (unmeasured; warm-up and tests).

    Returns:
        ``(batch, output_tokens)`` generated ids.
    """
    state = prefill(model, input_ids)
    decode(model, state, output_tokens - 1, device=input_ids.device)
    return state.output_ids()


class PassRunner:
    """Prefill and decode passes of one batch, repeated back to back inside one window.

    Args:
        model: A causal LM in eval mode.
        input_ids: ``(batch, input_tokens)`` prompt ids on the model's device.
        steps: Decode steps per pass.
        cache_arg: Forward argument name of the cache.
        device: The model's device.
    """

    def __init__(
        self, model: Any, input_ids: torch.Tensor, steps: int, cache_arg: str, device: str
    ) -> None:
        self.model, self.input_ids, self.steps = model, input_ids, steps
        self.cache_arg, self.device = cache_arg, device
        self.state: Any = None

    def prefill(self, passes: int) -> None:
        """``passes`` prefills of the prompts; keeps the last state for decode."""
        for _ in range(passes):
            self.state = prefill(self.model, self.input_ids)
        synchronize(self.device)

    def decode(self, passes: int) -> list[float]:
        """``passes`` decodes from the prefill state (cache cropped back between them)."""
        if self.state is None:
            self.state = prefill(self.model, self.input_ids)
        first = self.state.generated[0]
        prompt = int(self.input_ids.shape[1])
        steps: list[float] = []
        for _ in range(passes):
            if len(self.state.generated) > 1:
                rewind(self.state, prompt, first)
            steps += decode(self.model, self.state, self.steps, self.cache_arg, self.device)
        return steps

    def passes_for(self, target_s: float) -> tuple[int, int]:
        """Passes of prefill and decode that fill ``target_s`` (1 and 1 without a target)."""
        import time

        from mlenergy.measure.counter_period import windows_needed

        if target_s <= 0:
            return 1, 1
        t0 = time.perf_counter()
        self.prefill(1)
        t1 = time.perf_counter()
        if self.steps > 0:
            self.decode(1)
            synchronize(self.device)
        t2 = time.perf_counter()
        self.state = None
        return windows_needed(t1 - t0, target_s), windows_needed(t2 - t1, target_s)
