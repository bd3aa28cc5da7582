"""Provenance records: the hardware, software and model a run used."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mlenergy.records.base import FrozenModel, NonNegInt, PosInt
from mlenergy.records.model_kind import ModelKind, model_kind

Weights = Literal["pretrained", "random", "trained"]
"""Where a model's weights came from: a checkpoint, random initialisation, or training here."""


class Hardware(FrozenModel):
    """The machine a run executed on (or, for an estimate, the machine it predicts).

    Attributes:
        accelerator_model: GPU/accelerator name as reported by the driver or the catalog
            (e.g. ``"NVIDIA H100 80GB HBM3"``, ``"H100-SXM5-80GB"``); ``None`` for CPU-only runs.
        accelerator_count: Number of accelerators used by the run (0 for CPU-only).
        accelerator_memory_gb: Memory of one accelerator in GB, when known.
        accelerator_tdp_w: Thermal design power of one accelerator in watts, when known.
        driver_version: GPU driver version, when known.
        cpu_model: CPU model string, when known.
        cpu_cores: Logical CPU cores available to the run, when known.
        cpu_tdp_w: CPU package TDP in watts used by the CPU power model, when relevant.
        memory_gb: Host memory in GB, when known.
    """

    accelerator_model: str | None = None
    accelerator_count: NonNegInt = 0
    accelerator_memory_gb: float | None = Field(default=None, gt=0)
    accelerator_tdp_w: float | None = Field(default=None, gt=0)
    driver_version: str | None = None
    cpu_model: str | None = None
    cpu_cores: PosInt | None = None
    cpu_tdp_w: float | None = Field(default=None, gt=0)
    memory_gb: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _accelerator_consistent(self) -> Hardware:
        if self.accelerator_count > 0 and not self.accelerator_model:
            raise ValueError("accelerator_count > 0 needs an accelerator_model")
        return self


class Software(FrozenModel):
    """Versions of everything that can change a measurement. ``None`` means not installed.

    Attributes:
        python: Python version.
        torch: PyTorch version.
        transformers: transformers version.
        zeus: Zeus version (the energy meter).
        mlenergy: mlenergy version.
        git_commit: Commit of the mlenergy checkout, when run from one.
    """

    python: str
    torch: str | None = None
    transformers: str | None = None
    zeus: str | None = None
    mlenergy: str
    git_commit: str | None = None
    engine: str | None = Field(
        default=None, description="Serving engine and version, e.g. 'vllm 0.11.1', if any."
    )


class ModelInfo(FrozenModel):
    """What model ran.

    Attributes:
        model_id: Hub id, ``preset:<name>``, ``config:<name>@<fingerprint>`` (random
            weights built from a config file: the model it names, else the file's name, and
            the first 8 hex digits of :attr:`config_fingerprint`),
            ``study:<study>/<size>/<variant>`` (a model trained by a study), or the path of a
            local checkpoint folder.
        config_fingerprint: First 16 hex digits of the SHA-256 of the canonical model config.
        architecture: Architecture family (the config's ``model_type``, e.g. ``llama``,
            ``mixtral``, ``qwen3_moe``, ``deepseek_v3``).
        is_moe: True for Mixture-of-Experts models.
        num_experts: Routed experts per MoE layer (``None`` for dense).
        experts_per_token: Routed experts each token uses (``None`` for dense).
        num_shared_experts: Always-on shared experts per MoE layer (``None`` for dense).
        total_params: Total parameters (count).
        active_params: Parameters used per token (count); equals total for dense models.
        dtype: Weight dtype as run (``float32``, ``bfloat16``, ``fp8``, ``mxfp4``...).
        weights: ``pretrained`` (real checkpoint), ``random`` (built from a config) or
            ``trained`` (trained by this project, e.g. in the dense-vs-MoE study).
    """

    model_id: str = Field(min_length=1)
    config_fingerprint: str = Field(pattern=r"^[0-9a-f]{16}$")
    architecture: str
    is_moe: bool
    num_experts: PosInt | None = None
    experts_per_token: PosInt | None = None
    num_shared_experts: NonNegInt | None = None
    total_params: PosInt
    active_params: PosInt
    dtype: str
    weights: Weights

    @property
    def kind(self) -> ModelKind:
        """``dense``, ``moe`` or ``hybrid``: the one rule of :mod:`mlenergy.records.model_kind`."""
        return model_kind(self.architecture, self.is_moe, self.model_id)

    @model_validator(mode="after")
    def _moe_consistent(self) -> ModelInfo:
        if self.active_params > self.total_params:
            raise ValueError(
                f"active_params ({self.active_params}) exceeds total_params ({self.total_params})"
            )
        if self.is_moe and (self.num_experts is None or self.experts_per_token is None):
            raise ValueError("an MoE model needs num_experts and experts_per_token")
        if (
            self.num_experts is not None
            and self.experts_per_token is not None
            and self.experts_per_token > self.num_experts
        ):
            raise ValueError("experts_per_token exceeds num_experts")
        return self
