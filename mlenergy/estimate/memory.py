"""Per-GPU memory of a serving configuration and the fit rule of a serving engine (vLLM).

A serving engine takes ``gpu_memory_utilization`` (vLLM default 0.9) of the device memory,
loads its shard of the weights, profiles one forward pass of ``max_num_batched_tokens``
tokens (activation peak, sampler logits) and gives what is left to the KV cache. If the
weights and that workspace do not fit, the engine cannot start: an error whatever the
workload. If the KV cache of ``batch_size`` sequences at their mean context does not fit in
what is left, the engine would cap concurrency or preempt: an error when the prompt length
was given (the asked-for batch cannot run), a warning when it was a task-default guess.

One vectorised function (:func:`memory_bytes`) serves the single and the batch paths.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from mlenergy.estimate.features import Features
from mlenergy.estimate.profile import ModelProfile
from mlenergy.models.architecture import ArchitectureSpec

GPU_MEMORY_UTILIZATION = 0.9
"""Fraction of device memory the engine may use (vLLM's default ``gpu_memory_utilization``)."""
BYTES_PER_MEMORY_GB = float(2**30)
"""Datasheet "GB" of HBM parts are binary: an "80 GB" H100 has 80 GiB of HBM (nvidia-smi shows
81559 MiB; the driver's share is in :data:`FIXED_OVERHEAD_BYTES`). GDDR parts with ECC on
(L4, L40S) expose about 1/16 less, which this rule does not model."""
FIXED_OVERHEAD_BYTES = 1.5 * 2**30
"""Per-GPU memory outside weights, activations and KV: CUDA context, NCCL and cuBLAS
buffers, driver reservation (bytes)."""
MAX_BATCHED_TOKENS = 8192
"""Tokens of the engine's profiling forward pass (vLLM's server default on large GPUs)."""
LOGIT_BYTES = 8.0
"""Sampler bytes per sequence and vocabulary entry (fp32 logits and probabilities)."""
ACT_BYTES = 2.0
"""Bytes per activation element (bf16)."""


@dataclass(frozen=True, slots=True)
class MemoryFeatures:
    """Per-model inputs of the fit rule beside :class:`~mlenergy.estimate.features.Features`.

    Attributes:
        weights_common: Weights outside the routed experts, embeddings included (bytes).
        weights_experts: Routed experts of all layers (bytes).
        act_fixed: Activation elements per batched token not sharded by tensor parallelism.
        act_attn: Attention projections' elements per token (sharded).
        act_mlp: Dense MLP's elements per token (sharded).
        act_moe: Fused-MoE caches of the routed experts per token (sharded).
        act_moe_h: Routed tokens' hidden states per token.
        logit_seq: Sampler bytes per sequence.
        seqs: The engine's concurrency cap ``max_num_seqs`` (else the batch, all replicas).
    """

    weights_common: np.ndarray
    weights_experts: np.ndarray
    act_fixed: np.ndarray
    act_attn: np.ndarray
    act_mlp: np.ndarray
    act_moe: np.ndarray
    act_moe_h: np.ndarray
    logit_seq: np.ndarray
    seqs: np.ndarray

    def replace(self, **columns: np.ndarray) -> MemoryFeatures:
        """The same memory features with the named columns replaced."""
        return dataclasses.replace(self, **columns)


MEMORY_KEYS = tuple(f.name for f in dataclasses.fields(MemoryFeatures) if f.name != "seqs")
"""Per-model memory quantities of :func:`memory_row` (bytes or elements per token)."""


def memory_row(spec: ArchitectureSpec, prof: ModelProfile) -> dict[str, float]:
    """Per-model memory quantities (the per-model fields of :class:`MemoryFeatures`).

    Weights in bytes (all GPUs together); activations in elements per batched token (the
    ``act_attn``/``act_mlp``/``act_moe`` parts are sharded by tensor parallelism); sampler
    bytes per sequence.
    """
    k = prof.experts_per_token if prof.is_moe else 0
    moe_inter = spec.moe_intermediate_size or spec.intermediate_size
    return {
        "weights_common": prof.common_bytes + prof.embedding_bytes,
        "weights_experts": prof.expert_bytes * prof.num_experts * prof.n_moe_layers,
        "act_fixed": 4.0 * spec.hidden_size,  # residual, normed input, attention/MLP outputs
        "act_attn": float((spec.num_heads + 2 * spec.num_kv_heads) * spec.head_dim),
        "act_mlp": 3.0 * spec.intermediate_size,  # gate/up output and activation
        "act_moe": 3.0 * k * moe_inter,  # fused-MoE caches of the k routed experts
        "act_moe_h": float(k * spec.hidden_size),
        "logit_seq": LOGIT_BYTES * spec.vocab_size,
    }


def usable_bytes(memory_gb: float | np.ndarray) -> float | np.ndarray:
    """Memory the engine may use per GPU (bytes) on a GPU of ``memory_gb`` datasheet GB."""
    return GPU_MEMORY_UTILIZATION * memory_gb * BYTES_PER_MEMORY_GB


def memory_bytes(
    f: Features, m: MemoryFeatures
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-GPU memory need in bytes: (weights, workspace, KV cache and state, KV per sequence).

    Args:
        f: The rows' features (workload and KV layout).
        m: Their memory features.

    Weights: non-expert weights over the GPUs of a replica, routed experts over the
    expert-parallel shards. Workspace: :data:`FIXED_OVERHEAD_BYTES` plus the activation peak
    of a :data:`MAX_BATCHED_TOKENS`-token forward pass and the sampler's logits of
    ``seqs / dp`` sequences. KV: ``batch / dp`` sequences at mean context ``I + O/2``
    (windowed layers capped; MLA latent cache replicated across TP; GQA sharded at most
    ``kv_heads`` ways; pipeline stages split the layers) plus recurrent state.
    """
    a = f.num_gpus / f.dp
    shards = np.where(f.ep > 1, f.num_gpus, a)
    weights = m.weights_common / a + m.weights_experts / shards
    tp_eff = np.maximum(a / f.pp, 1.0)
    act = (
        m.act_fixed
        + m.act_attn / tp_eff
        + np.maximum(m.act_mlp / tp_eff, m.act_moe / tp_eff + m.act_moe_h)
    )
    seqs = np.minimum(m.seqs / f.dp, MAX_BATCHED_TOKENS)
    workspace = FIXED_OVERHEAD_BYTES + MAX_BATCHED_TOKENS * ACT_BYTES * act
    workspace = workspace + seqs * m.logit_seq
    ctx = f.input_tokens + 0.5 * f.output_tokens
    ctx_w = np.where(f.window > 0, np.minimum(ctx, f.window), ctx)
    kv_shard = np.where(f.latent_kv > 0, 1.0, np.minimum(tp_eff, f.num_kv_heads)) * f.pp
    per_seq = (f.kv_full * ctx + f.kv_window * ctx_w) / kv_shard + f.ssm_bytes / a
    kv = f.batch / f.dp * per_seq
    return weights, workspace, kv, per_seq


def kv_capacity(f: Features, m: MemoryFeatures, memory_gb: np.ndarray | float) -> np.ndarray:
    """Sequences (all replicas) whose KV cache at their mean context fits beside the weights.

    What is left of the usable memory after weights and workspace (:func:`memory_bytes`),
    over one sequence's KV cache and state, times the replicas; ``inf`` for a model without
    a per-sequence cache, 0 when the weights and workspace alone do not fit.
    """
    weights, workspace, _, per_seq = memory_bytes(f, m)
    free = np.maximum(usable_bytes(memory_gb) - weights - workspace, 0.0)
    safe = np.where(per_seq > 0, per_seq, 1.0)
    return np.where(per_seq > 0, np.floor(free / safe) * f.dp, np.inf)


def queue_note(fit: float, context: float, peak: bool) -> str:
    """The caveat of an offline job with more requests than the KV cache holds at once."""
    at = "each reaching" if peak else "at a mean context of"
    return (
        f"at most {fit:g} sequences fit in the KV cache at once ({at} {context:.0f} "
        "tokens): the job's other requests queue"
    )


def offline_kv_limit(
    f: Features,
    m: MemoryFeatures,
    memory_gb: np.ndarray,
    offline: np.ndarray,
    equal_lengths: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Offline jobs decode no more sequences together than the KV cache holds; the rest queue.

    The engine admits a request only when its KV cache fits (vLLM's scheduler). With equal
    output lengths the sequences of a batch grow together to ``I + O`` tokens, so that is
    the context that must fit; with varying lengths (a steady stream at the cap) the mean
    context ``I + O/2``, as in serving.

    Returns:
        Each row's batch, lowered for the ``offline`` rows whose batch does not fit (rows
        where not even one sequence fits are left to the fit rule), and each row's
        :func:`queue_note` (empty where nothing changed).
    """
    notes = np.full(len(offline), "", dtype=object)
    if not offline.any():
        return f.batch, notes
    out_len = f.output_tokens
    # ``I + O/2`` of memory_bytes at twice the output length is the peak context I + O.
    peak = f.replace(output_tokens=np.where(equal_lengths, 2.0 * out_len, out_len))
    fit = kv_capacity(peak, m, memory_gb)
    limited = offline & (fit >= 1) & (fit < f.batch)
    context = f.input_tokens + np.where(equal_lengths, 1.0, 0.5) * out_len
    for i in np.flatnonzero(limited):
        notes[i] = queue_note(fit[i], context[i], bool(equal_lengths[i]))
    return np.where(limited, fit, f.batch), notes


def fit_verdict(
    *,
    weights: float,
    workspace: float,
    kv: float,
    per_seq: float,
    batch: float,
    dp: float,
    ctx: float,
    memory_gb: float,
    gpu_name: str,
    input_given: bool,
) -> tuple[str, str, str]:
    """Apply the fit rule to one configuration (per-GPU figures in bytes).

    Returns:
        ``(error, fix, warning)``: ``error`` non-empty when the configuration cannot run
        (weights and workspace over the usable memory, or the KV cache of ``batch``
        sequences over what is left when the prompt length was given), with a ``fix``;
        ``warning`` non-empty when only a task-default prompt length makes the KV cache
        overflow. All messages carry the per-GPU memory arithmetic in GB (1e9 bytes).
    """
    usable = float(usable_bytes(memory_gb))
    gb = 1e9
    of = (
        f"{usable / gb:.1f} GB usable (gpu_memory_utilization {GPU_MEMORY_UTILIZATION:g} x "
        f"{memory_gb * BYTES_PER_MEMORY_GB / gb:.1f} GB = {memory_gb:g} GiB of {gpu_name})"
    )
    if weights + workspace > usable:
        short = weights / max(usable - workspace, 1.0)
        return (
            f"weights do not fit: per GPU {weights / gb:.1f} GB weights + "
            f"{workspace / gb:.1f} GB activations/workspace = "
            f"{(weights + workspace) / gb:.1f} GB > {of}; the weights need {short:.2f}x "
            "the memory left for them",
            "Use more GPUs (tensor, expert or pipeline parallel) or lower-precision weights",
            "",
        )
    free = usable - weights - workspace
    if kv <= free:
        return "", "", ""
    seqs = batch / dp
    fit = int(free // per_seq) * int(dp) if per_seq > 0 else 0
    arithmetic = (
        f"per GPU {weights / gb:.1f} GB weights + {workspace / gb:.1f} GB "
        f"activations/workspace + {kv / gb:.1f} GB KV cache ({seqs:g} sequences x "
        f"{ctx:.0f} tokens mean context) = {(weights + workspace + kv) / gb:.1f} GB > {of}; "
        f"at most {fit} sequences fit"
    )
    if input_given:
        return (
            f"batch_size {batch:g} does not fit: {arithmetic}",
            "Lower the batch size or the lengths, or use more GPUs",
            "",
        )
    return (
        "",
        "",
        f"KV cache at the task-default prompt length may not fit: {arithmetic}; the engine "
        "would cap concurrency or preempt. Give input_tokens to check",
    )
