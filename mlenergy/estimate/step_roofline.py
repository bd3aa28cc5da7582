"""The roofline terms of one serving step per GPU: bytes, FLOPs and collectives per kernel group.

:mod:`~mlenergy.estimate.physics` evaluates a row's steps at an SM clock from these terms:
:func:`step_shape` gathers what every step of a row shares (the replica's layout, the KV cache
and state it reads, its collectives), :func:`step_work` what one step moves and computes given
the prompt tokens it carries (none in a decode-only step), :func:`step_rates` what the SM clock
sets, and :func:`step_roofline` the step's times at that clock. Only the last two depend on the
clock, so the search for the clock under a power cap evaluates them alone. Times in seconds,
bytes and FLOPs per GPU and step.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mlenergy.estimate.coefficients import Coefficients
from mlenergy.estimate.expert_shards import max_shard_hits, tile_switch
from mlenergy.estimate.features import Features
from mlenergy.estimate.roofline import effective_bandwidth, soft_max


class StepShape(NamedTuple):
    """Per-row terms every step of a row shares (GPUs, sequences, bytes/s, bytes, s)."""

    a: np.ndarray  # GPUs per replica
    br: np.ndarray  # sequences per replica
    tp_eff: np.ndarray  # tensor-parallel degree within a pipeline stage
    ep_on: np.ndarray  # expert parallelism
    ep_shards: np.ndarray  # GPUs the experts are spread over
    t_moe: np.ndarray  # decode tokens that meet the experts of a GPU
    e_eff: np.ndarray  # effective pool of experts routing draws from
    miss: np.ndarray  # chance that a token misses a given expert of the pool
    e_local: np.ndarray  # experts a GPU holds
    bw: np.ndarray  # achieved bandwidth of dense weights, KV cache and state
    bw_exp: np.ndarray  # achieved bandwidth of the routed experts
    w_common: np.ndarray  # weights outside routed experts read per GPU
    kv_bytes: np.ndarray  # KV cache read per GPU
    ssm_bytes: np.ndarray  # recurrent state read and written per GPU
    attn: np.ndarray  # decode attention FLOPs
    t_fp8: np.ndarray  # fp8 expert path, GPU busy time
    tile_on: np.ndarray  # untuned fused-MoE tiles apply
    lockstep: np.ndarray  # replicas run in lockstep
    n_ar: np.ndarray  # tensor-parallel all-reduces per step
    n_a2a: np.ndarray  # expert-parallel exchanges per step
    a2a_share: np.ndarray  # share of exchanged tokens that cross a GPU's links
    lat: np.ndarray  # collective latency per step


def step_shape(
    f: Features,
    c: Coefficients,
    ctx: np.ndarray,
    lockstep: np.ndarray,
    untuned_tiles: np.ndarray,
) -> StepShape:
    """The terms every step of a row shares (none depends on the SM clock).

    Args:
        f: The rows' features.
        c: Coefficients.
        ctx: Mean context of a decoding sequence (tokens).
        lockstep: Whether the replicas run in lockstep (data-parallel attention with expert
            parallelism).
        untuned_tiles: The engine's fused-MoE kernel is untuned (1) or not (0).
    """
    n, dp, pp = f.num_gpus, f.dp, f.pp
    a = n / dp  # GPUs per replica
    tp_eff = np.maximum(a / pp, 1.0)
    br = f.batch / dp
    ep_on = f.ep > 1
    ep_shards = np.where(ep_on, n, a)
    e, k = f.num_experts, f.experts_per_token
    # Expected distinct experts hit per MoE layer; routing is skewed, so tokens draw from an
    # effective pool smaller than E (``routing_spread`` = 1: uniform routing).
    e_eff = np.maximum(k + (e - k) * c.routing_spread, 1.0)
    ctx_w = np.minimum(ctx, np.where(f.window > 0, f.window, ctx))
    kv_shard = np.where(f.latent_kv > 0, 1.0, np.minimum(tp_eff, f.num_kv_heads)) * pp
    layers_per_stage = f.num_layers / pp
    n_ar = np.where(tp_eff > 1, 2.0 * layers_per_stage, 0.0)
    n_a2a = np.where(ep_on, 2.0 * f.n_moe_layers / pp, 0.0)
    return StepShape(
        a=a,
        br=br,
        tp_eff=tp_eff,
        ep_on=ep_on,
        ep_shards=ep_shards,
        t_moe=np.where(ep_on, f.batch, br),
        e_eff=e_eff,
        miss=np.clip(1.0 - k / e_eff, 0.0, 1.0),
        e_local=np.maximum(e / ep_shards, 1.0),
        bw=effective_bandwidth(f.bandwidth, c),
        # A grouped expert GEMM streams many separate small weight matrices (one per expert
        # hit on the GPU) instead of one large one: a ceiling of its own.
        bw_exp=effective_bandwidth(f.bandwidth, c, c.moe_ceiling),
        w_common=f.common_bytes / a,
        kv_bytes=br * (f.kv_full * ctx + f.kv_window * ctx_w) / kv_shard,
        ssm_bytes=2.0 * br * f.ssm_bytes / a,
        attn=br * (f.attn_full * ctx + f.attn_window * ctx_w) / kv_shard,
        # fp8 experts: another grouped-GEMM path with its own per-layer cost (GPU busy time).
        t_fp8=f.fp8_experts * c.fp8_moe_layer_s * f.n_moe_layers / pp,
        tile_on=f.unquantised_experts * ep_on * untuned_tiles,
        lockstep=lockstep,
        n_ar=n_ar,
        n_a2a=n_a2a,
        # Share of a GPU's exchanged tokens that cross its links, per MoE layer and direction:
        # the tokens' other experts with one replica, the other replicas' steps in lockstep.
        a2a_share=np.where(lockstep, dp - 1.0, k * (ep_shards - 1) / n),
        # All-reduce latency grows with log2 of its participants (ring/tree steps); an
        # expert-parallel dispatch or combine costs a fixed latency (one exchange).
        lat=c.collective_s * n_ar * np.log2(2.0 * tp_eff) + c.all_to_all_s * n_a2a,
    )


def _expert_bytes(
    f: Features, c: Coefficients, s: StepShape, tm: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Experts hit per MoE layer, their bytes per GPU, and the busiest GPU's effective bytes.

    Args:
        f: The rows' features.
        c: Coefficients.
        s: The rows' step terms.
        tm: Tokens that meet the experts of a GPU in the step.
    """
    e, p = f.num_experts, c.overlap_p
    hit = np.minimum(s.e_eff * (1.0 - np.power(s.miss, tm)), e)
    w_exp = f.n_moe_layers * f.expert_bytes * hit / s.ep_shards
    # Expert parallelism: each GPU holds E/ep experts and the layer waits for the GPU
    # that hit the most of its own (expected maximum over the shards of a binomial count,
    # normal approximation); the others wait idle, so power keeps the mean traffic.
    hl = max_shard_hits(hit, e, s.ep_shards, s.ep_on)
    w_exp_max = f.n_moe_layers * f.expert_bytes * hl
    if c.moe_min_cols > 0:
        # Grouped expert GEMMs (no split-K) give each thread block a slice of output
        # columns and the whole reduction length K: a matrix with few output columns on a
        # GPU (big experts, one or two hit per shard) fills too few blocks to stream at
        # full bandwidth, so it takes about as long as one of ``moe_min_cols`` columns. The
        # last wave of blocks fills the GPU partly, so the floor sets in gradually: the
        # same soft maximum as the rooflines (``overlap_p``) joins the two.
        h, it = f.hidden_size, f.expert_inter
        ts = np.where(s.ep_on, 1.0, s.a)  # tensor-parallel split of each expert
        hits_gpu = np.where(s.ep_on, hl, hit)
        b_el = f.expert_bytes / np.maximum(3.0 * h * it, 1.0)
        wm = c.moe_min_cols
        gu = h * soft_max(hits_gpu * 2.0 * it / ts, wm, p)
        dn = it / ts * soft_max(hits_gpu * h, wm, p)
        w_exp_max = np.where(it > 0, f.n_moe_layers * b_el * (gu + dn), w_exp_max)
    return hit, w_exp, w_exp_max


class StepRates(NamedTuple):
    """Per-row terms the SM clock sets (dimensionless, s)."""

    speed: np.ndarray  # SM clock over the datasheet clock
    rate: np.ndarray  # achieved fraction of peak FLOP/s in a decode-only step
    rate_pf: np.ndarray  # achieved fraction of peak FLOP/s of a mixed step's matmuls
    t_c_attn: np.ndarray  # decode attention compute time


def step_rates(f: Features, c: Coefficients, s: StepShape, clock: np.ndarray) -> StepRates:
    """The terms of the rows' steps at an SM clock (MHz)."""
    speed = clock / f.spec_clock
    rate = c.eta_comp * speed
    return StepRates(
        speed=speed,
        rate=rate,
        rate_pf=c.eta_prefill * speed,
        t_c_attn=s.attn / (f.peak_dense * rate),
    )


class StepWork(NamedTuple):
    """What one step moves and computes per GPU, whatever the SM clock (s, FLOP)."""

    t_w_common: np.ndarray  # streaming the weights outside routed experts
    t_w_exp: np.ndarray  # streaming the busiest GPU's routed experts
    t_kv_ssm: np.ndarray  # streaming the KV cache and the recurrent state
    dense: np.ndarray  # decode rows' FLOPs at the dense rate (dequantising included)
    bf16: np.ndarray  # decode rows' FLOPs at the BF16 rate
    expert: np.ndarray  # decode tokens' expert FLOPs per GPU
    p_dense: np.ndarray  # prompt tokens' FLOPs at the dense rate (attention included)
    p_bf16: np.ndarray  # prompt tokens' FLOPs at the BF16 rate
    p_expert: np.ndarray  # prompt tokens' expert FLOPs per GPU
    t_tile: np.ndarray  # untuned fused-MoE tiles (GPU busy time)
    t_comm: np.ndarray  # collectives
    t_mem: np.ndarray  # memory-busy time
    t_quant: np.ndarray  # streaming scaled low-precision weights


def step_work(
    f: Features,
    c: Coefficients,
    s: StepShape,
    extra_tok: np.ndarray,
    extra_attn: np.ndarray,
    extra_exp: np.ndarray,
) -> StepWork:
    """Bytes, FLOPs and collectives of one step (see :func:`step_roofline` for its times).

    Args:
        f: The rows' features.
        c: Coefficients.
        s: The rows' step terms (:func:`step_shape`).
        extra_tok: Prompt tokens the step carries per replica.
        extra_attn: Their attention FLOPs.
        extra_exp: Prompt tokens that meet the experts of a GPU.
    """
    a, br, ep_shards, pp = s.a, s.br, s.ep_shards, f.pp
    tm = s.t_moe + extra_exp
    hit, w_exp, w_exp_max = _expert_bytes(f, c, s, tm)
    q_elems = f.quant_common / a + f.n_moe_layers * f.quant_expert * hit / ep_shards
    # Time to stream the stored bytes of scaled low-precision weights (s).
    t_quant = (
        f.quant_common_bytes / a / s.bw
        + f.n_moe_layers * f.quant_expert_bytes * hit / ep_shards / s.bw_exp
    )
    # Untuned expert-parallel shards of unquantised experts: the Triton fused-MoE
    # kernel's default tile grows (16 to 64 rows) once the step's tokens exceed the
    # experts the GPU holds, a fixed cost per MoE layer (GPU busy time).
    t_tile = s.tile_on * c.moe_tile_s * tile_switch(tm / s.e_local) * f.n_moe_layers / pp
    # Prompt tokens join the tensor-parallel all-reduces; the expert-parallel exchange
    # of a replica's prompt is not charged (with one replica every GPU holds the tokens).
    # Replicas in lockstep instead all-gather every replica's step, padded to the
    # busiest one's tokens (prompt included), into each MoE layer and reduce-scatter it
    # back: each GPU receives ``dp - 1`` replicas' tokens per direction.
    tp_eff = s.tp_eff
    act_ar = (br + extra_tok) * f.hidden_size * 2.0
    act_a2a = np.where(s.lockstep, br + extra_tok, br) * f.hidden_size * 2.0
    comm_bytes = s.n_ar * act_ar * 2.0 * (tp_eff - 1) / tp_eff + s.n_a2a * act_a2a * s.a2a_share
    return StepWork(
        t_w_common=s.w_common / s.bw,
        t_w_exp=w_exp_max / s.bw_exp,
        t_kv_ssm=(s.kv_bytes + s.ssm_bytes) / s.bw,
        dense=br * (f.dense_flops + f.ssm_flops) / a + c.dequant_flops * q_elems,
        bf16=br * f.bf16_flops / a,
        expert=s.t_moe * f.expert_flops / ep_shards,
        # Prompt tokens: dense part on the replica's GPUs, experts over the EP shards.
        p_dense=extra_tok * (f.dense_flops + f.ssm_flops) + extra_attn,
        p_bf16=extra_tok * f.bf16_flops,
        p_expert=extra_exp * f.expert_flops / ep_shards,
        t_tile=t_tile,
        t_comm=s.lat + comm_bytes / (c.eta_link * f.link),
        t_mem=(s.w_common + s.kv_bytes + s.ssm_bytes) / s.bw + w_exp / s.bw_exp + s.t_fp8 + t_tile,
        t_quant=t_quant,
    )


def step_roofline(
    f: Features,
    c: Coefficients,
    s: StepShape,
    w: StepWork,
    r: StepRates,
    rate_mm: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Times of one step at an SM clock (s): GPU, compute, the prompts' compute.

    Its collectives, memory-busy and dequantising times do not depend on the clock
    (``w.t_comm``, ``w.t_mem``, ``w.t_quant``).

    Args:
        f: The rows' features.
        c: Coefficients.
        s: The rows' step terms (:func:`step_shape`).
        w: The step's bytes and FLOPs (:func:`step_work`).
        r: The terms of the clock (:func:`step_rates`).
        rate_mm: Achieved fraction of peak FLOP/s of the decode rows' matmuls.
    """
    p = c.overlap_p
    # The decode rows' matmuls run at ``rate_mm``: ``eta_comp`` in a decode-only step,
    # ``eta_prefill`` in a mixed step, where they share taller GEMMs with the prompt rows.
    t_c_dense = w.dense / (f.peak_dense * rate_mm) + w.bf16 / (f.peak_bf16 * rate_mm)
    t_c_exp = w.expert / (f.peak_expert * rate_mm)
    rate_pf = r.rate_pf
    t_p_dense = w.p_dense / (f.peak_dense * rate_pf) + w.p_bf16 / (f.peak_bf16 * rate_pf)
    t_p_dense = t_p_dense / s.a
    t_p_exp = w.p_expert / (f.peak_expert * rate_pf)
    # Dense matmuls, routed-expert matmuls and attention are separate kernels run one
    # after the other: each is bound by its own bytes or FLOPs (a roofline per group).
    t_gpu = (
        soft_max(w.t_w_common, t_c_dense + t_p_dense, p)
        + soft_max(w.t_w_exp, t_c_exp + t_p_exp, p)
        + soft_max(w.t_kv_ssm, r.t_c_attn, p)
        + s.t_fp8
        + w.t_tile
    )
    t_comp = t_c_dense + t_c_exp + r.t_c_attn
    return t_gpu, t_comp, t_p_dense + t_p_exp
