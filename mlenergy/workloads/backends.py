"""How a static-batch point generates: the decode backend and the MoE experts backend.

Before any window opens, :func:`prepare_point` picks and readies both for one model and batch:

* the generation backend (``--generation``): ``compiled-static-cache`` on CUDA (a static KV
  cache and a compiled decode forward, CUDA graphs: the GPU runs the model, not Python),
  ``eager`` elsewhere; ``auto`` applies :data:`DEVICE_DEFAULTS`, and a model class that cannot
  compile a full graph falls back to ``eager`` under ``auto`` (refused when named);
* for MoE models, the experts backend (``--experts-backend``, see
  :mod:`mlenergy.models.experts`): measured by timing a few decode steps of every backend with
  the generator that will be measured, once per model shape and batch in a process.

Compilation, CUDA-graph capture and the experts timing all happen here, and their wall time is
kept apart (``GenerationInfo.warmup_s``), never inside a window.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mlenergy.errors import UserError
from mlenergy.measure.provenance import collect_software
from mlenergy.models.experts import (
    ExpertsChoice,
    choose_experts_backend,
    experts_fields,
    parse_experts_policy,
    set_experts_backend,
)
from mlenergy.records.generation import GENERATION_BACKENDS, GenerationBackend, GenerationInfo

if TYPE_CHECKING:
    import torch

    from mlenergy.models import LoadedModel
    from mlenergy.workloads.generation import EagerGenerator

GENERATION_POLICIES: tuple[str, ...] = ("auto", *GENERATION_BACKENDS)
"""Accepted ``--generation`` values."""

DEVICE_DEFAULTS: dict[str, str] = {"cuda": "compiled-static-cache"}
"""The generation backend ``auto`` picks, by torch device type (others: ``eager``).

CUDA: ``compiled-static-cache``; an eager decode step of a 1.1B model at batch 1 on an H200
spent 35-50x the time its weights take to read (docs/gpu-check.md). CPU: ``eager``; on this
project's CPU compiling one decode shape of ``preset:tiny-dense`` took 86-238 s, far more than
the compiled step (0.37-0.96x of eager's) saves in a default CPU bench of about 760 steps
(``benchmarks/generation_backend.py``, docs/measure.md)."""

PROBE_STEPS = 8
"""Decode steps timed per experts backend when it is measured (fewer if the run has fewer)."""

_MEASURED: dict[tuple[Any, ...], ExpertsChoice] = {}
"""Experts choices measured in this process, by model shape, batch and generation backend."""


def parse_generation_policy(text: str) -> str:
    """Check a ``--generation`` value.

    Raises:
        UserError: For a value outside :data:`GENERATION_POLICIES`.
    """
    value = str(text).strip().lower()
    if value not in GENERATION_POLICIES:
        raise UserError(
            f"unknown generation backend {text!r}", "Use one of " + ", ".join(GENERATION_POLICIES)
        )
    return value


def can_compile(model: Any) -> bool:
    """Whether ``model``'s class declares that its forward compiles as one graph."""
    return bool(getattr(model, "_can_compile_fullgraph", False))


def resolve_generation(policy: str, model: Any, device: str) -> GenerationBackend:
    """The generation backend ``policy`` means for ``model`` on ``device``.

    Raises:
        UserError: For a bad policy, or ``compiled-static-cache`` named for a model class that
            cannot compile a full graph.
    """
    import torch

    policy = parse_generation_policy(policy)
    if policy == "auto":
        default = DEVICE_DEFAULTS.get(torch.device(device).type, "eager")
        compiled = default == "compiled-static-cache" and can_compile(model)
        return "compiled-static-cache" if compiled else "eager"
    if policy == "compiled-static-cache":
        if not can_compile(model):
            raise UserError(
                f"{type(model).__name__} cannot decode compiled with a static cache "
                "(its transformers class does not compile a full graph)",
                "Use --generation eager",
            )
        return "compiled-static-cache"
    return "eager"


def check_generation(config: Any, policy: str, origin: str) -> None:
    """Refuse, before anything runs, ``compiled-static-cache`` for a class that cannot compile.

    Args:
        config: The model's transformers config.
        policy: The ``--generation`` value.
        origin: The model's id, for the message.

    Raises:
        UserError: For a bad policy, or the compiled backend named for such a model.
    """
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING

    if parse_generation_policy(policy) != "compiled-static-cache":
        return
    # A model class here; transformers types the mapping's values wider (class pairs too).
    model_class: Any = MODEL_FOR_CAUSAL_LM_MAPPING.get(type(config), None)
    if model_class is not None and not can_compile(model_class):
        raise UserError(
            f"{origin!r} ({model_class.__name__}) cannot decode compiled with a static cache "
            "(its transformers class does not compile a full graph)",
            "Use --generation eager",
        )


@dataclass
class PreparedPoint:
    """A generator ready for one batch, and what the record says about it.

    Attributes:
        generator: Compiled and captured where it compiles; the experts backend applied.
        experts: The experts choice (``None`` for a dense model).
        prepare_s: Wall time in seconds spent preparing (compilation, capture, experts timing).
    """

    generator: EagerGenerator
    experts: ExpertsChoice | None
    prepare_s: float

    def apply(self) -> None:
        """Switch the model back to this point's experts backend (several points share it)."""
        if self.experts is not None:
            set_experts_backend(self.generator.model, self.experts.backend)

    def info(self, warmup_s: float = 0.0) -> GenerationInfo:
        """The record's :class:`GenerationInfo`, ``warmup_s`` (warm-up generations) added."""
        software = collect_software()
        return GenerationInfo(
            backend=self.generator.backend,
            torch=software.torch or "unknown",
            transformers=software.transformers or "unknown",
            compile_mode=self.generator.compile_mode,
            warmup_s=self.prepare_s + warmup_s,
            **experts_fields(self.experts),
        )


def _probe(generator: EagerGenerator, input_ids: torch.Tensor, output_tokens: int) -> float:
    """Median decode step time (s) of ``generator`` as it is now, after its warm-up."""
    # lazy: torch, only when a model runs (plans and checks import this module)
    from mlenergy.workloads.generation import synchronize

    generator.warm(input_ids, output_tokens)
    state = generator.prefill(input_ids)
    steps = min(PROBE_STEPS, output_tokens - 1)
    if steps < 1:  # one token per sequence: the prefill is the whole request
        t0 = time.perf_counter()
        generator.prefill(input_ids)
        synchronize(generator.device)
        return time.perf_counter() - t0
    return statistics.median(generator.decode(state, steps))


def _shape_key(loaded: LoadedModel, input_ids: torch.Tensor, output_tokens: int, backend: str):
    return (
        loaded.info.config_fingerprint,
        loaded.info.dtype,
        loaded.device,
        tuple(input_ids.shape),
        output_tokens,
        backend,
    )


def prepare_point(
    loaded: LoadedModel,
    input_ids: torch.Tensor,
    output_tokens: int,
    generation: str = "auto",
    experts_backend: str = "auto",
) -> PreparedPoint:
    """Pick both backends for one batch, compile and capture, all before any window.

    Args:
        loaded: The model.
        input_ids: ``(batch, input_tokens)`` prompt ids on the model's device.
        output_tokens: Tokens per sequence the point generates.
        generation: ``auto``, ``eager`` or ``compiled-static-cache``.
        experts_backend: ``auto``, ``measure``, ``eager``, ``grouped_mm`` or ``batched_mm``.

    Returns:
        The ready generator, the experts choice and the preparation time.

    Raises:
        UserError: For a bad policy, a backend the model cannot use.
    """
    # lazy: torch, only when a model runs (plans and checks import this module)
    from mlenergy.workloads.generation import make_generator

    t0 = time.perf_counter()
    model, device = loaded.model, loaded.device
    backend = resolve_generation(generation, model, device)
    policy = parse_experts_policy(experts_backend)
    max_tokens = int(input_ids.shape[1]) + output_tokens
    generator = make_generator(backend, model, device, max_tokens)
    key = _shape_key(loaded, input_ids, output_tokens, backend)
    known = _MEASURED.get(key) if policy in ("auto", "measure") else None
    if known is not None and known.source == "measured":
        set_experts_backend(model, known.backend)
        choice: ExpertsChoice | None = known
    else:
        choice = choose_experts_backend(
            model, policy, device, lambda _b: _probe(generator, input_ids, output_tokens)
        )
        if choice is not None and choice.source == "measured":
            _MEASURED[key] = choice
    generator.warm(input_ids, output_tokens)
    return PreparedPoint(generator, choice, time.perf_counter() - t0)
