"""The estimator's description of one serving configuration (batch, lengths, parallelism)."""

from __future__ import annotations

from dataclasses import dataclass

from mlenergy.estimate.engines import CURRENT_ENGINE


@dataclass(frozen=True)
class ServingSetup:
    """One configuration to estimate.

    Attributes:
        batch_size: Average number of sequences decoding together (all replicas).
        input_tokens: Mean prompt length in tokens.
        output_tokens: Mean output length in tokens.
        visual_tokens: Mean prompt tokens per request that come from images or video (0 for
            text prompts).
        num_gpus: GPUs used.
        tensor_parallel: Tensor-parallel degree.
        expert_parallel: Expert-parallel degree (>1: experts sharded over all GPUs).
        data_parallel: Data-parallel replicas.
        pipeline_parallel: Pipeline stages.
        sm_clock_mhz: Locked SM clock in MHz (``None``: the GPU's maximum).
        power_limit_w: Power limit per GPU in watts (``None``: TDP).
        engine: The engine profile's name (:mod:`~mlenergy.estimate.engines`); its overhead
            terms apply.
        max_num_seqs: The engine's concurrency cap over all replicas (``None``: none given);
            ``batch_size`` may not exceed it.
        input_tokens_given: False when ``input_tokens`` is a task default (a guess): then a
            KV cache that does not fit is a warning, not an error.
    """

    batch_size: float
    input_tokens: float
    output_tokens: float
    visual_tokens: float = 0.0
    num_gpus: int = 1
    tensor_parallel: int = 1
    expert_parallel: int = 1
    data_parallel: int = 1
    pipeline_parallel: int = 1
    sm_clock_mhz: float | None = None
    power_limit_w: float | None = None
    engine: str = CURRENT_ENGINE
    max_num_seqs: float | None = None
    input_tokens_given: bool = True
