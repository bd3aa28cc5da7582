"""Greedy generation as an explicit loop over ``model(...)`` with a KV cache.

The runner needs prefill and decode in separate measurement windows and the time of every
decode step, which ``model.generate`` does not expose. Prefill is one forward pass over the
prompt that yields the first token; decode is one forward pass per further token, feeding the
argmax back (EOS ignored, so every sequence has exactly the requested length).

Step times: on the CPU each step is timed with the wall clock (CPU kernels run synchronously).
On a GPU the loop never waits for the device between steps (a host synchronisation per token
adds bubbles that serving does not have, and lowers power): each step is bracketed by CUDA
events, and the host synchronises once, after the last step, to read them.

Two generators run that loop (:func:`make_generator`): :class:`EagerGenerator` calls the model
with the dynamic KV cache transformers creates (one Python call per token, the ``eager``
backend); :class:`StaticCacheGenerator` prefills eagerly into a preallocated
:class:`transformers.StaticCache` and decodes through ``model.get_compiled_call`` (the
``compiled-static-cache`` backend: ``torch.compile`` with CUDA graphs on a GPU), as
transformers' own ``generate`` does with ``cache_implementation="static"``. Compilation and
graph capture happen in :meth:`StaticCacheGenerator.warm`, before any window opens.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from mlenergy.measure.counter_period import windows_needed
from mlenergy.records.generation import GenerationBackend


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


def rewind(state: GenerationState, first: torch.Tensor) -> None:
    """Return ``state`` to just after prefill so the same decode can run again.

    The cache holds the prompt plus one token per decode step since prefill; those steps are
    counted on the host (``len(state.generated) - 1``), so rewinding never waits for the device.

    Args:
        state: A state after some decode steps (changed in place).
        first: The first generated token ``(batch, 1)``, fed again as the next token.
    """
    extra = len(state.generated) - 1
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
    forward: Callable[..., Any] | None = None,
) -> list[float]:
    """Generate ``steps`` more tokens greedily, one forward pass each.

    Args:
        model: A causal LM in eval mode.
        state: The state after prefill (updated in place).
        steps: Decode steps (tokens per sequence to add).
        cache_arg: Forward argument name of the cache (see :func:`cache_argument`).
        device: Device the model runs on: a CUDA device is timed with events and synchronised
            once, after the last step; other devices by the wall clock per step.
        forward: What runs each step (default: ``model`` itself; a compiled call of it for
            the ``compiled-static-cache`` backend).

    Returns:
        The time of every step in seconds (the inter-token latencies).
    """
    cache_arg = cache_arg or cache_argument(model)
    extra = _logits_kwargs(model)
    run = forward if forward is not None else model
    timer = step_timer(device)
    for _ in range(steps):
        timer.start()
        out = run(
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
    """Greedy generation of exactly ``output_tokens`` tokens, eager (unmeasured; tests).

    Returns:
        ``(batch, output_tokens)`` generated ids.
    """
    state = prefill(model, input_ids)
    decode(model, state, output_tokens - 1, device=input_ids.device)
    return state.output_ids()


class EagerGenerator:
    """The ``eager`` backend: transformers' forward with its dynamic KV cache, per token.

    Args:
        model: A causal LM in eval mode.
        device: The model's torch device.
    """

    backend: GenerationBackend = "eager"
    compile_mode: str | None = None

    def __init__(self, model: Any, device: str) -> None:
        self.model, self.device = model, device
        self.cache_arg = cache_argument(model)

    def prefill(self, input_ids: torch.Tensor) -> GenerationState:
        """One forward pass over the prompts; the state holds the first token."""
        return prefill(self.model, input_ids)

    def decode(self, state: GenerationState, steps: int) -> list[float]:
        """``steps`` greedy decode steps from ``state``; each step's time in seconds."""
        return decode(self.model, state, steps, self.cache_arg, self.device)

    def generate(self, input_ids: torch.Tensor, output_tokens: int) -> torch.Tensor:
        """Exactly ``output_tokens`` tokens per sequence, ``(batch, output_tokens)`` ids."""
        state = self.prefill(input_ids)
        self.decode(state, output_tokens - 1)
        synchronize(self.device)
        return state.output_ids()

    def warm(self, input_ids: torch.Tensor, output_tokens: int) -> None:
        """Nothing to compile: the warm-up generations are the caller's."""


class StaticCacheGenerator(EagerGenerator):
    """The ``compiled-static-cache`` backend: a static KV cache and a compiled decode forward.

    The prompts are prefilled eagerly into a :class:`transformers.StaticCache` sized for the
    prompt and every generated token (reset before each prefill, so its tensors keep their
    addresses); each decode step calls ``model.get_compiled_call`` (``torch.compile`` of the
    model's forward; mode ``reduce-overhead``, CUDA graphs, on a GPU). Greedy decode is the
    same computation as the eager backend's: on the CPU in float32 the tokens match exactly
    (tests); fused kernels may round differently in bfloat16.

    Args:
        model: A causal LM in eval mode whose class can compile a full graph.
        device: The model's torch device.
        max_tokens: Prompt plus generated tokens per sequence (the cache's length).
        compile: ``False`` runs the same static-cache loop uncompiled (tests and
            ``benchmarks/generation_backend.py``; a record of it is refused, as
            ``GenerationInfo`` needs a compile mode for this backend).
    """

    backend: GenerationBackend = "compiled-static-cache"

    def __init__(self, model: Any, device: str, max_tokens: int, compile: bool = True) -> None:
        import torch._dynamo
        from transformers import StaticCache
        from transformers.generation.configuration_utils import CompileConfig

        super().__init__(model, device)
        self.cache = StaticCache(config=model.config, max_cache_len=max_tokens)
        self.compile_mode = compile_mode(device) if compile else None
        self.forward: Any = model
        if self.compile_mode is not None:
            # Every batch size and experts backend is a graph of its own: keep them compiled
            # rather than let dynamo fall back to eager after its default of 8.
            limit = torch._dynamo.config.recompile_limit
            torch._dynamo.config.recompile_limit = max(limit, RECOMPILE_LIMIT)
            self.forward = model.get_compiled_call(CompileConfig(mode=self.compile_mode))

    @torch.inference_mode()
    def prefill(self, input_ids: torch.Tensor) -> GenerationState:
        """Reset the static cache, then one eager forward pass over the prompts."""
        self.cache.reset()
        out = self.model(
            input_ids=input_ids,
            use_cache=True,
            **_logits_kwargs(self.model),
            **{self.cache_arg: self.cache},
        )
        first = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
        return GenerationState(next_tokens=first, cache=self.cache, generated=[first])

    def decode(self, state: GenerationState, steps: int) -> list[float]:
        """``steps`` greedy decode steps through the compiled forward."""
        return decode(self.model, state, steps, self.cache_arg, self.device, self.forward)

    def warm(self, input_ids: torch.Tensor, output_tokens: int) -> None:
        """Compile and capture before any window: at least ``WARM_CALLS`` decode calls.

        CUDA graph trees record on a later call than the first; decode is rewound and run
        again until the forward has been called that often.
        """
        state = self.prefill(input_ids)
        steps = max(1, output_tokens - 1)
        calls = 0
        while calls < WARM_CALLS:
            if len(state.generated) > 1:
                rewind(state, state.generated[0])
            calls += len(self.decode(state, steps))
        synchronize(self.device)


WARM_CALLS = 3
"""Decode calls :meth:`StaticCacheGenerator.warm` makes at least: compile, record, replay."""

RECOMPILE_LIMIT = 64
"""Graphs dynamo keeps per compiled forward before falling back to eager (torch: 8)."""


def compile_mode(device: str) -> str:
    """The ``torch.compile`` mode of the decode forward on ``device``.

    ``reduce-overhead`` (CUDA graphs) on a GPU, as transformers' ``generate``; ``default``
    elsewhere, where CUDA graphs do not exist.
    """
    return "reduce-overhead" if torch.device(device).type == "cuda" else "default"


def make_generator(backend: str, model: Any, device: str, max_tokens: int) -> EagerGenerator:
    """The generator of ``backend`` (``eager`` or ``compiled-static-cache``) for one shape.

    Args:
        backend: ``eager`` or ``compiled-static-cache``.
        model: The model.
        device: Its torch device.
        max_tokens: Prompt plus generated tokens per sequence.
    """
    if backend == "compiled-static-cache":
        return StaticCacheGenerator(model, device, max_tokens)
    if backend != "eager":
        raise ValueError(f"unknown generation backend {backend!r}")
    return EagerGenerator(model, device)


class PassRunner:
    """Prefill and decode passes of one batch, repeated back to back inside one window.

    Args:
        generator: The generator (eager or compiled static cache) of this batch's shape.
        input_ids: ``(batch, input_tokens)`` prompt ids on the model's device.
        steps: Decode steps per pass.
    """

    def __init__(self, generator: EagerGenerator, input_ids: torch.Tensor, steps: int) -> None:
        self.generator, self.input_ids, self.steps = generator, input_ids, steps
        self.device = generator.device
        self.state: Any = None

    def prefill(self, passes: int) -> None:
        """``passes`` prefills of the prompts; keeps the last state for decode."""
        for _ in range(passes):
            self.state = self.generator.prefill(self.input_ids)
        synchronize(self.device)

    def decode(self, passes: int) -> list[float]:
        """``passes`` decodes from the prefill state (cache cropped back between them)."""
        if self.state is None:
            self.state = self.generator.prefill(self.input_ids)
        first = self.state.generated[0]
        steps: list[float] = []
        for _ in range(passes):
            if len(self.state.generated) > 1:
                rewind(self.state, first)
            steps += self.generator.decode(self.state, self.steps)
        return steps

    def passes_for(self, target_s: float) -> tuple[int, int]:
        """Passes of prefill and decode that fill ``target_s`` (1 and 1 without a target)."""
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
