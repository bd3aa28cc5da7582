"""How a static-batch run generated: the decode loop and, for MoE models, the experts backend.

Two records of one model on one GPU can differ by an order of magnitude in step time, and so in
energy per token, only because one decoded through transformers' eager Python loop and the
other through a compiled forward over a static KV cache (CUDA graphs), or because the MoE
layers ran their experts through a different kernel path. The record says which, so no one
compares the two by accident.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mlenergy.records.base import FrozenModel, NonNegFloat

GenerationBackend = Literal["eager", "compiled-static-cache"]
"""How decode ran: ``eager`` (transformers' forward, a dynamic KV cache, one Python call per
token) or ``compiled-static-cache`` (a static KV cache and a ``torch.compile``'d forward; CUDA
graphs on a GPU)."""

GENERATION_BACKENDS: tuple[GenerationBackend, ...] = ("eager", "compiled-static-cache")
"""The values of :data:`GenerationBackend`."""

ExpertsBackend = Literal["eager", "grouped_mm", "batched_mm"]
"""transformers' experts implementations: ``eager`` (a Python loop over the experts hit),
``grouped_mm`` (one grouped GEMM over tokens sorted by expert) and ``batched_mm`` (each token's
expert weights gathered and multiplied in one batched GEMM)."""

EXPERTS_BACKENDS: tuple[ExpertsBackend, ...] = ("eager", "grouped_mm", "batched_mm")
"""The values of :data:`ExpertsBackend`."""

ExpertsBackendSource = Literal["measured", "device-default", "requested", "as-set"]
"""Why a run used its experts backend: ``measured`` (fastest decode step, timed at start-up),
``device-default`` (the documented default of the device), ``requested`` (named by the user,
``--experts-backend``), ``as-set`` (read from the model as the user left it, e.g. a notebook
cell)."""


class GenerationInfo(FrozenModel):
    """How a static-batch run generated: decode loop, versions, warm-up, experts backend.

    Attributes:
        backend: ``eager`` (transformers' forward with a dynamic KV cache, one Python call per
            token) or ``compiled-static-cache`` (a static KV cache and a ``torch.compile``'d
            decode forward, CUDA graphs on a GPU). Figures of the two do not compare.
        torch: PyTorch version the run generated with.
        transformers: transformers version the run generated with.
        compile_mode: ``torch.compile`` mode of the decode forward (``compiled-static-cache``
            only, e.g. ``reduce-overhead``).
        warmup_s: Wall time in seconds of the preparation before the first measured window
            (compilation, CUDA-graph capture, the experts-backend timing and the warm-up
            generations); never inside a window.
        experts_backend: transformers' experts implementation the MoE layers ran with
            (``eager``, ``grouped_mm``, ``batched_mm``); ``None`` for a dense model.
        experts_backend_source: Why that backend: ``measured`` (fastest at start-up),
            ``device-default`` (the documented default of the device), ``requested`` (named by
            the user) or ``as-set`` (read from the model).
        experts_step_s: When measured: the median decode step time in seconds of each experts
            backend timed at start-up, at this run's batch size.
    """

    backend: GenerationBackend
    torch: str
    transformers: str
    compile_mode: str | None = None
    warmup_s: NonNegFloat | None = None
    experts_backend: ExpertsBackend | None = None
    experts_backend_source: ExpertsBackendSource | None = None
    experts_step_s: dict[str, NonNegFloat] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> GenerationInfo:
        if (self.backend == "compiled-static-cache") != (self.compile_mode is not None):
            raise ValueError("compile_mode is set exactly when the backend is compiled")
        if (self.experts_backend is None) != (self.experts_backend_source is None):
            raise ValueError("experts_backend and experts_backend_source go together")
        if self.experts_step_s and self.experts_backend_source != "measured":
            raise ValueError("experts_step_s is kept only for a measured experts backend")
        unknown = set(self.experts_step_s) - set(EXPERTS_BACKENDS)
        if unknown:
            raise ValueError(f"unknown experts backend(s) in experts_step_s: {sorted(unknown)}")
        return self

    def label(self) -> str:
        """``compiled-static-cache`` or ``eager``, with the experts backend of an MoE run."""
        if self.experts_backend is None:
            return self.backend
        return f"{self.backend}, experts {self.experts_backend}"


def method_label(method: str, backend: str | None) -> str:
    """How a run was measured, as tables show it: ``static-batch · eager``, or the method alone.

    Args:
        method: The workload's method (``static-batch``, ``serving-steady-state``) or, for a
            record without one, its workload kind.
        backend: Its ``generation.backend`` (``eager``, ``compiled-static-cache``); empty or
            ``None`` where the run recorded none (serving runs, older records).
    """
    return f"{method} · {backend}" if backend else method
