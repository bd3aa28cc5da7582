"""Which experts backend an MoE model runs with (transformers' experts interface).

transformers 5.x runs the routed experts of its MoE layers (Mixtral, Qwen2/Qwen3-MoE,
DeepSeek-V3 ...) through one of several implementations, switched at run time with
``model.set_experts_implementation``: ``eager`` loops over the experts hit in Python,
``grouped_mm`` sorts the tokens by expert and runs one grouped GEMM, ``batched_mm`` gathers each
token's expert weights and runs one batched GEMM. Which is fastest depends on the device, the
dtype and the tokens per step, and the difference is large (on this project's CPU
``batched_mm`` decoded the study's MoE models 2-5x slower than ``grouped_mm`` at batch 8 and 32,
``benchmarks/experts_backend.py``).

The policy (``--experts-backend``):

* ``auto`` (default): the documented default of the device where there is one
  (:data:`DEVICE_DEFAULTS`, measured by ``benchmarks/experts_backend.py``), else ``measure``;
* ``measure``: time a few decode steps with every backend at start-up and keep the fastest;
* ``eager``, ``grouped_mm`` or ``batched_mm``: that one.

This module decides and applies; the timing itself is the runner's (a ``probe`` callable).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlenergy.errors import UserError
from mlenergy.records.generation import EXPERTS_BACKENDS, ExpertsBackend

if TYPE_CHECKING:
    import torch

EXPERTS_POLICIES: tuple[str, ...] = ("auto", "measure", *EXPERTS_BACKENDS)
"""Accepted ``--experts-backend`` values."""

DEVICE_DEFAULTS: dict[str, str] = {"cpu": "grouped_mm"}
"""The experts backend ``auto`` uses without measuring, by torch device type.

CPU: ``grouped_mm``, the fastest decode step in 15 of 18 rows of ``benchmarks/experts_backend.py
--presets`` on this project's CPU (the study's and the presets' MoE models at batch 1, 8 and 32);
in the other three, all at batch 1, within 1.18x of ``batched_mm``, which was 1.4-5x slower at
batch 8 and 32 (docs/measure.md).
Other devices (CUDA) have no default: the fastest there depends on the GPU, the dtype and the
batch, so ``auto`` measures."""


def parse_experts_policy(text: str) -> str:
    """Check a ``--experts-backend`` value.

    Raises:
        UserError: For a value outside :data:`EXPERTS_POLICIES`.
    """
    value = str(text).strip().lower().replace("-", "_")
    if value not in EXPERTS_POLICIES:
        raise UserError(
            f"unknown experts backend {text!r}",
            "Use one of " + ", ".join(EXPERTS_POLICIES),
        )
    return value


def supports_experts_backend(model: torch.nn.Module) -> bool:
    """Whether ``model`` has MoE layers that run through transformers' experts interface."""
    can_set = getattr(type(model), "_can_set_experts_implementation", None)
    config = getattr(model, "config", None)
    if can_set is None or config is None:
        return False
    try:
        return bool(can_set()) and getattr(config, "_experts_implementation", None) is not None
    except Exception:  # a class whose source cannot be read: not switchable
        return False


def current_experts_backend(model: torch.nn.Module) -> ExpertsBackend | None:
    """The experts backend ``model`` runs with now (``None``: no switchable MoE layers)."""
    if not supports_experts_backend(model):
        return None
    value = getattr(getattr(model, "config", None), "_experts_implementation", None)
    return next((b for b in EXPERTS_BACKENDS if b == value), None)


def set_experts_backend(model: torch.nn.Module, backend: str) -> None:
    """Switch ``model``'s experts backend (``eager``, ``grouped_mm`` or ``batched_mm``).

    Raises:
        UserError: For an unknown backend or a model without switchable MoE layers.
    """
    if backend not in EXPERTS_BACKENDS:
        raise UserError(
            f"unknown experts backend {backend!r}", "Use one of " + ", ".join(EXPERTS_BACKENDS)
        )
    switch = getattr(model, "set_experts_implementation", None)
    if not supports_experts_backend(model) or switch is None:
        raise UserError(
            f"{type(model).__name__} has no MoE layers with a switchable experts backend",
            "Only MoE models (Mixtral, Qwen-MoE, DeepSeek-V3...) have an experts backend",
        )
    if current_experts_backend(model) != backend:
        switch(backend)


@dataclass(frozen=True)
class ExpertsChoice:
    """The experts backend a run uses, and why.

    Attributes:
        backend: ``eager``, ``grouped_mm`` or ``batched_mm``.
        source: ``measured``, ``device-default`` or ``requested`` (see
            :data:`mlenergy.records.generation.ExpertsBackendSource`).
        step_s: When measured: each backend's median decode step time in seconds.
    """

    backend: str
    source: str
    step_s: dict[str, float] = field(default_factory=dict)


def choose_experts_backend(
    model: torch.nn.Module,
    policy: str,
    device: str,
    probe: Callable[[str], float],
) -> ExpertsChoice | None:
    """Decide ``model``'s experts backend by ``policy`` and apply it.

    Args:
        model: The model (dense models are left alone).
        policy: One of :data:`EXPERTS_POLICIES`.
        device: The torch device the model runs on (``auto`` looks up its type).
        probe: Switches nothing; called with the backend already applied, returns the decode
            step time in seconds at the run's shape (only for ``measure``).

    Returns:
        The choice, or ``None`` for a model without switchable MoE layers (a dense model is
        left alone whatever the policy, so one policy serves a bench of dense and MoE models).

    Raises:
        UserError: For a bad policy.
    """
    import torch

    policy = parse_experts_policy(policy)
    if not supports_experts_backend(model):
        return None
    if policy in EXPERTS_BACKENDS:
        set_experts_backend(model, policy)
        return ExpertsChoice(policy, "requested")
    default = DEVICE_DEFAULTS.get(torch.device(device).type)
    if policy == "auto" and default is not None:
        set_experts_backend(model, default)
        return ExpertsChoice(default, "device-default")
    times: dict[str, float] = {}
    for backend in EXPERTS_BACKENDS:
        set_experts_backend(model, backend)
        times[backend] = float(probe(backend))
    best = min(times, key=lambda b: (times[b], EXPERTS_BACKENDS.index(b)))
    set_experts_backend(model, best)
    return ExpertsChoice(best, "measured", times)


def experts_fields(choice: ExpertsChoice | None) -> dict[str, Any]:
    """The :class:`~mlenergy.records.generation.GenerationInfo` fields of ``choice``."""
    if choice is None:
        return {}
    return {
        "experts_backend": choice.backend,
        "experts_backend_source": choice.source,
        "experts_step_s": dict(choice.step_s),
    }
