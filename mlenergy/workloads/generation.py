"""Greedy generation as an explicit loop over ``model(...)`` with a KV cache.

The runner needs prefill and decode in separate measurement windows and the time of every
decode step, which ``model.generate`` does not expose. Prefill is one forward pass over the
prompt that yields the first token; decode is one forward pass per further token, feeding the
argmax back (EOS ignored, so every sequence has exactly the requested length).
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
        device: Device to synchronise after each step so step times are exact.

    Returns:
        The wall time of every step in seconds (the inter-token latencies).
    """
    cache_arg = cache_arg or cache_argument(model)
    extra = _logits_kwargs(model)
    times: list[float] = []
    for _ in range(steps):
        t0 = time.perf_counter()
        out = model(
            input_ids=state.next_tokens,
            use_cache=True,
            **extra,
            **{cache_arg: state.cache},
        )
        state.next_tokens = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
        state.cache = _cache_of(out)
        state.generated.append(state.next_tokens)
        synchronize(device)
        times.append(time.perf_counter() - t0)
    return times


def generate(model: torch.nn.Module, input_ids: torch.Tensor, output_tokens: int) -> torch.Tensor:
    """Greedy generation of exactly ``output_tokens`` tokens (unmeasured; warm-up and tests).

    Returns:
        ``(batch, output_tokens)`` generated ids.
    """
    state = prefill(model, input_ids)
    decode(model, state, output_tokens - 1, device=input_ids.device)
    return state.output_ids()
