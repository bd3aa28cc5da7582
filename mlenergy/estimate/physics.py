"""The physical model: time and power of steady-state LLM serving, vectorised with numpy.

One serving step of a data-parallel replica decodes one token for each of its ``B/dp``
sequences and, in steady state, ``B/dp / O`` new requests of ``I`` tokens start per step.
Chunked prefill puts their prompt tokens into the same steps as the decode tokens: a fraction
``q`` of the steps (Poisson arrivals, at least what a budget of ``PREFILL_TOKEN_BUDGET``
batched tokens per step needs) is a *mixed* step, the rest decode-only. Per GPU and step:

* memory traffic: weights outside routed experts once per step (sharded over the replica's
  GPUs), routed experts actually hit by the step's tokens (expected distinct experts
  ``E (1 - (1 - k/E)^T)`` per MoE layer), the KV cache of every sequence at its mean context
  ``I + O/2`` (windowed layers capped at the window; MLA latent cache replicated across TP),
  and the recurrent state of Mamba layers, at an effective bandwidth
  ``1 / (1 / (eta_mem BW) + 1 / mem_ceiling)``; the routed experts' grouped GEMMs stream at
  the same form with a ceiling of their own, ``moe_ceiling``;
* compute: matmul FLOPs (2 per active weight per token; experts at their own precision),
  attention FLOPs growing with the context, prefill FLOPs of the new requests;
* time: ``c_step + c_layer * L + c_moe * L_moe + c_seq * B/dp + t_gpu + t_comm`` where ``t_gpu``
  sums one soft roofline ``(t_bytes^p + t_flops^p)^(1/p)`` per kernel group (dense matmuls,
  routed-expert matmuls, attention/state) plus ``c_fp8_moe * L_moe`` when the experts are fp8 on
  a GPU with fp8 tensor cores (and ``c_tile * L_moe`` when expert parallelism shards unquantised
  experts and the step's tokens exceed the experts a GPU holds: the untuned fused-MoE kernel's
  larger default tile, :func:`~mlenergy.estimate.expert_shards.tile_switch`), with achievable
  fractions of datasheet bandwidth and FLOP/s, fixed launch costs and per-collective latencies
  fitted on measurements (:mod:`mlenergy.calibrate.calibration`); with expert parallelism the
  expert roofline reads the experts of the busiest GPU
  (:func:`~mlenergy.estimate.expert_shards.max_shard_hits`), and a GPU's grouped expert GEMM with
  fewer output columns than ``moe_min_cols`` streams about as slowly as one of that many (the
  same soft maximum joins the two); in a mixed step the prompt tokens join the same rooflines
  (they share the weight reads), their FLOPs and the matmuls of the decode rows they ride with
  (one taller GEMM: decode plus prompt rows) run at ``eta_prefill`` of the peak, and the step
  pays a per-layer cost ``c_prefill_layer * L`` (a mixed batch runs outside the captured CUDA
  graphs); the mean step is ``(1 - q) decode + q mixed`` (a mixed step of a Mamba hybrid also
  pays ``c_mamba_prefill * L_mamba`` of compute-busy GPU time, its chunked-scan prefill path; a
  step carrying multimodal prompts also waits ``c_visual * V`` per prompt of ``V`` visual
  tokens, host time in which the GPUs idle: the engine takes in the prompt's pixel tensors) and
  the median inter-token latency the decode step while fewer than half the steps are mixed
  (:func:`median_step`). With data-parallel attention plus expert parallelism the replicas run
  in lockstep, so the prompts of all replicas stall every one of them: each replica pads its
  step to the busiest one's tokens and every MoE layer all-gathers the padded steps of all
  replicas (vLLM's data-parallel padding and all-gather dispatch), so a prompt's tokens pass
  through the experts, and over the links, once per replica. The 2024 engine of the v2
  data pays more per MoE layer, a slowdown factor on all host costs and a host cost per step for
  each GPU of the replica beyond the first;
* power per GPU: ``idle + (TDP - idle) * (a0 r + a_c u_comp r v(r)^2 + a_m u_busy +
  a_q u_quant)`` capped at the power limit, where ``u`` are busy fractions (``u_busy``:
  memory traffic, the fp8 expert path, collectives and the GPU share of the per-sequence
  work; ``u_quant``: time spent streaming the stored bytes of scaled low-precision weights
  that are dequantised on the fly), ``r`` is the SM clock over its maximum and ``v(r)`` the
  relative core voltage; above the cap the clock is lowered until power fits (as the driver
  does). The terms, ``v(r)`` and the throttling are :mod:`~mlenergy.estimate.power_model`'s,
  shared with the training step and pipeline instructions.

Energy per output token is total power over output throughput.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from mlenergy.estimate.coefficients import Coefficients, row_overheads
from mlenergy.estimate.features import Features
from mlenergy.estimate.power_model import (
    POWER_CAP_TOLERANCE,
    gpu_power,
    idle_power_w,
    throttled_clock,
)
from mlenergy.estimate.prediction import Prediction, median_step
from mlenergy.estimate.step_roofline import (
    StepShape,
    StepWork,
    step_rates,
    step_roofline,
    step_shape,
    step_work,
)

PREFILL_TOKEN_BUDGET = 8192.0
"""Prompt tokens one step may carry (vLLM's ``max_num_batched_tokens`` server default with
chunked prefill on large GPUs)."""


def lockstep_replicas(ep: np.ndarray, dp: np.ndarray) -> np.ndarray:
    """Whether the replicas run in lockstep: data-parallel attention with expert parallelism.

    They run every MoE layer as one all-to-all group, so a prompt on any replica stalls all
    of them.

    Args:
        ep: Expert-parallel degree per row.
        dp: Data-parallel replicas per row.
    """
    return (np.asarray(ep) > 1) & (np.asarray(dp) > 1)


@dataclass(frozen=True)
class JobStep:
    """A step of an offline job, given explicitly (the serving mode derives it from steady state).

    Attributes:
        context: Mean context of the decoding sequences per row (tokens), in place of the
            steady state's ``I + O/2``.
        prefill_chunk: Prompt tokens per replica that every step carries (the prefill
            steps), or ``None`` for decode-only steps.
        prefilling: Which rows are such prefill steps (``None``: every row, when
            ``prefill_chunk`` is given); the others take the steady state's prompt arrivals,
            so steps of both kinds are evaluated together.
    """

    context: np.ndarray
    prefill_chunk: np.ndarray | None = None
    prefilling: np.ndarray | None = None

    def rows(self, idx: np.ndarray) -> JobStep:
        """The same step for the rows ``idx``."""
        chunk = None if self.prefill_chunk is None else self.prefill_chunk[idx]
        prefilling = None if self.prefilling is None else self.prefilling[idx]
        return JobStep(self.context[idx], chunk, prefilling)


class _AtClock(NamedTuple):
    """Per-row figures of one GPU at one SM clock (seconds, watts)."""

    t_step: np.ndarray  # mean step
    t_decode: np.ndarray  # decode-only step
    t_mix: np.ndarray  # step carrying prompt tokens
    q_mix: np.ndarray  # fraction of steps carrying prompt tokens
    t_prefill: np.ndarray  # what the prompts add to the mean step
    power_gpu: np.ndarray
    idle: np.ndarray
    dyn_base: np.ndarray
    dyn_comp: np.ndarray
    dyn_mem: np.ndarray
    dyn_seq: np.ndarray


class _PowerTerms(NamedTuple):
    """Per-row terms of a step's power that the SM clock leaves alone (W, s, share)."""

    idle: np.ndarray | float  # idle power per GPU
    busy: np.ndarray  # busy time not bound by tensor cores per step
    seq_share: np.ndarray  # the per-sequence work's share of it


class _Steps(NamedTuple):
    """Per-row terms of a row's decode-only and mixed steps that the SM clock leaves alone.

    Everything of :func:`_at_clock` but the compute times and the power: the search for the
    clock under a power cap evaluates only those at each clock it tries.
    """

    s: StepShape
    work0: StepWork  # a decode-only step
    work1: StepWork  # a step carrying prompt tokens
    q: np.ndarray  # fraction of steps carrying prompt tokens
    host_dec: np.ndarray  # host time of a decode-only step (s)
    host_mix: np.ndarray  # host time of a step carrying prompts (s)
    mamba: np.ndarray  # a hybrid's chunked-scan prefill time at the datasheet clock (s)
    t_mem: np.ndarray  # mean step's memory-busy time (s)
    t_comm: np.ndarray  # mean step's collectives (s)
    t_quant: np.ndarray  # mean step's time streaming scaled low-precision weights (s)
    power: _PowerTerms


def _steps(f: Features, c: Coefficients, job: JobStep | None = None) -> _Steps:
    """The terms of every row's steps that do not depend on the SM clock (see :func:`_at_clock`).

    The mean step mixes decode-only steps (the median inter-token latency) and steps that
    also carry a chunk of new prompts (chunked prefill: the prompt tokens share the step's
    kernels, and its weight reads, with the decode tokens). ``job`` gives an offline job's
    step instead of the steady state's (see :class:`JobStep`); the roofline terms of a step
    are :mod:`~mlenergy.estimate.step_roofline`'s.
    """
    dp, pp = f.dp, f.pp
    # Mean context of a decoding sequence: ``I + O/2`` in steady state; an offline job's
    # decode segments give their own (``job.context``, see offline.py).
    ctx = f.input_tokens + 0.5 * f.output_tokens if job is None else job.context
    eng = row_overheads(f.engine, c)  # the row's engine profile's own overhead terms
    lockstep = lockstep_replicas(f.ep, dp)
    s = step_shape(f, c, ctx, lockstep, eng["untuned_moe_tiles"])
    a, br = s.a, s.br
    slow = eng["host_slowdown"]
    moe_s = c.moe_layer_s + eng["moe_layer_s"]
    layers_per_stage = f.num_layers / pp
    fixed = c.step_s + c.layer_s * layers_per_stage + moe_s * f.n_moe_layers / pp
    q, m, pf_attn = _prompt_arrivals(f, job, br, lockstep)
    pf_tok = m * f.input_tokens  # prompt tokens of a step that carries prompts

    zero = np.zeros_like(br)
    w0 = step_work(f, c, s, zero, zero, zero)
    # An engine whose driver process hands every step's inputs to each other worker of the
    # replica before the GPUs start (the 2024 one) waits per extra GPU (host time).
    t_workers = eng["worker_s"] * (a - 1.0)
    host_dec = (fixed + c.seq_s * br) * slow + t_workers
    # Replicas in lockstep pad their step to the busiest one's tokens (vLLM's data-parallel
    # padding), and the MoE layers take the padded steps of all ``dp`` replicas: a prompt's
    # tokens pass through the experts once per replica.
    pf_exp = np.where(lockstep, dp * pf_tok, pf_tok)
    w1 = step_work(f, c, s, pf_tok, m * pf_attn, pf_exp)
    # A step that carries prompt tokens runs a mixed batch beyond the captured CUDA-graph
    # sizes (kernels launched one by one): a fixed host cost per layer.
    host_mix = host_dec + c.prefill_layer_s * layers_per_stage * slow
    # Multimodal prompts: the engine takes in each prompt's pixel tensors before the step
    # that prefills it (host time per visual token, with the GPUs waiting).
    host_mix = host_mix + c.visual_token_s * m * f.visual_tokens

    def avg(x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
        return (1.0 - q) * x0 + q * x1

    t_mem = avg(w0.t_mem, w1.t_mem)
    t_comm = avg(w0.t_comm, w1.t_comm)
    return _Steps(
        s=s,
        work0=w0,
        work1=w1,
        q=q,
        host_dec=host_dec,
        host_mix=host_mix,
        mamba=c.mamba_prefill_s * f.n_mamba_layers / pp,
        t_mem=t_mem,
        t_comm=t_comm,
        t_quant=avg(w0.t_quant, w1.t_quant),
        power=_power_terms(f, c, br, t_mem + t_comm),
    )


def _at_clock(f: Features, c: Coefficients, st: _Steps, clock: np.ndarray) -> _AtClock:
    """Evaluate time and power at an SM clock (MHz) for every row (``st``: :func:`_steps`)."""
    s, w0, w1, q = st.s, st.work0, st.work1, st.q
    r = step_rates(f, c, s, clock)
    g0, comp0, _ = step_roofline(f, c, s, w0, r, r.rate)
    t_dec = st.host_dec + g0 + w0.t_comm
    g1, comp1, pfc1 = step_roofline(f, c, s, w1, r, r.rate_pf)
    # Mamba hybrids: the prompt's chunked-scan prefill path (conv1d, chunk cumsum, chunk
    # state, state passing, chunk scan) costs GPU time per Mamba layer far beyond its FLOPs;
    # it keeps the SMs busy (compute power) and slows with the SM clock.
    t_mamba = st.mamba / r.speed
    t_mix = st.host_mix + g1 + w1.t_comm + t_mamba
    t_step = (1.0 - q) * t_dec + q * t_mix
    # Prefill time: what the steps carrying prompts take beyond decode-only steps. At large
    # batches a mixed step can be the shorter (its decode rows share the taller GEMM): then
    # the prompts cost no time of their own, never a negative one.
    t_pf = np.maximum(t_step - t_dec, 0.0)
    t_comp = (1.0 - q) * comp0 + q * comp1
    # Busy time bound by tensor cores: the matmuls and attention, the prompts' share of the
    # mixed steps and a hybrid's chunked-scan prefill.
    comp_busy = t_comp + q * (pfc1 + t_mamba)
    power_gpu, idle, dyn_base, dyn_comp, dyn_mem, dyn_seq = _step_power(
        f, c, st.power, clock, t_step, comp_busy, st.t_quant
    )
    return _AtClock(
        t_step, t_dec, t_mix, q, t_pf, power_gpu, idle, dyn_base, dyn_comp, dyn_mem, dyn_seq
    )


def _prompt_arrivals(
    f: Features, job: JobStep | None, br: np.ndarray, lockstep: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fraction of steps carrying prompts, prompts in such a step, attention FLOPs per prompt.

    In steady state ``B/dp / O`` prompts start per step and replica. With data-parallel
    attention plus expert parallelism the replicas run every MoE layer in lockstep (one
    all-to-all group), so a prompt on any replica stalls all of them: their prefills
    serialise. An offline job's prefill step (``job.prefill_chunk``, on the rows
    ``job.prefilling``) carries a chunk of prompt tokens per replica in every step.
    """
    i = f.input_tokens
    pf_seqs = np.where(lockstep, f.batch, br)
    n_pf = pf_seqs / np.maximum(f.output_tokens, 1.0)  # prompts per step (stalling group)
    # Fraction of steps that carry prompt tokens: Poisson arrivals, at least as many steps as
    # the per-step token budget (max_num_batched_tokens) needs.
    q = np.clip(np.maximum(-np.expm1(-n_pf), n_pf * i / PREFILL_TOKEN_BUDGET), 1e-12, 1.0)
    m = n_pf / q  # prompts in a step that has any
    if job is not None and job.prefill_chunk is not None:
        # The prefill steps of an offline job (offline.py): every step carries a chunk of
        # ``prefill_chunk`` prompt tokens per replica, whatever decodes beside it.
        m_chunk = job.prefill_chunk / np.maximum(i, 1.0)
        if job.prefilling is None:
            q, m = np.ones_like(br), m_chunk
        else:
            q, m = np.where(job.prefilling, 1.0, q), np.where(job.prefilling, m_chunk, m)
    i_w = np.minimum(i, np.where(f.window > 0, f.window, i))
    pf_attn = 0.5 * i * (f.attn_full * i + f.attn_window * i_w)
    return q, m, pf_attn


def _power_terms(
    f: Features, c: Coefficients, br: np.ndarray, mem_comm_busy: np.ndarray
) -> _PowerTerms:
    """The clock-free terms of :func:`_step_power`.

    Args:
        f: The rows' features.
        c: Coefficients.
        br: Sequences per replica.
        mem_comm_busy: Memory traffic and collectives per step (s).
    """
    # Busy time not bound by tensor cores: weight/KV traffic, the fp8 expert path,
    # collectives (NCCL kernels keep SMs and links busy) and the GPU share of the
    # per-sequence work (sampling, logits, attention metadata: not slowed by the old
    # engine's host overhead).
    seq_gpu = c.seq_busy * c.seq_s * br
    busy = mem_comm_busy + seq_gpu
    return _PowerTerms(idle_power_w(f.idle, f.tdp, c), busy, seq_gpu / busy)


def _step_power(
    f: Features,
    c: Coefficients,
    terms: _PowerTerms,
    clock: np.ndarray,
    t_step: np.ndarray,
    comp_busy: np.ndarray,
    t_quant: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """Power per GPU (W) of a mean step and its parts: total, idle, base, compute, memory, seq.

    Args:
        f: The rows' features.
        c: Coefficients.
        terms: The clock-free terms (:func:`_power_terms`).
        clock: SM clock (MHz).
        t_step: Mean step (s).
        comp_busy: Tensor-core busy time per step (s).
        t_quant: Time streaming scaled low-precision weights per step (s).
    """
    idle = terms.idle
    r = clock / f.max_clock
    u_comp = np.clip(comp_busy / t_step, 0.0, 1.0)
    u_busy = np.clip(terms.busy / t_step, 0.0, 1.0)
    seq_share = terms.seq_share
    # Dequantising scaled low-precision weights keeps the SM ALUs busy while they stream.
    # (per byte streamed: the dequantising kernels work through the stored bytes, so an
    # MXFP4 weight, half the bytes of an fp8 one, keeps them busy half as long).
    u_quant = np.clip(t_quant / t_step, 0.0, 1.0)
    pw = gpu_power(idle, f.tdp, r, u_comp, u_busy, c, u_quant)
    # The memory-busy term splits into memory traffic and the per-sequence work (overhead).
    dyn_mem = pw.memory * (1.0 - seq_share) + pw.quant
    dyn_seq = pw.memory * seq_share
    power_gpu = idle + pw.base + pw.compute + dyn_mem + dyn_seq
    parts = (power_gpu, idle, pw.base, pw.compute, dyn_mem, dyn_seq)
    return tuple(np.asarray(part, dtype=float) for part in parts)


def predict(f: Features, c: Coefficients, job: JobStep | None = None) -> Prediction:
    """Predict serving time, power and energy for every row of the features.

    Args:
        f: The rows' features.
        c: Model coefficients.
        job: An offline job's step (:class:`JobStep`); ``None``: steady-state serving.
    """
    cap = np.where(np.isnan(f.power_limit), f.tdp, np.minimum(f.power_limit, f.tdp))
    clock = np.where(np.isnan(f.clock), f.max_clock, f.clock)
    clock = np.clip(clock, f.min_clock, f.max_clock)
    steps = _steps(f, c, job)
    res = _at_clock(f, c, steps, clock)
    if (res.power_gpu > cap * POWER_CAP_TOLERANCE).any():
        # The driver lowers the clock of the rows over the cap (the others keep theirs).
        def rows(idx: np.ndarray):
            sub = f.rows(idx)
            sub_steps = _steps(sub, c, None if job is None else job.rows(idx))
            return lambda clk: _at_clock(sub, c, sub_steps, clk).power_gpu

        first = res.power_gpu
        clock = throttled_clock(lambda _: first, clock, f.min_clock, cap, rows)
        res = _at_clock(f, c, steps, clock)
    # A user's limit below the draw at the lowest clock cannot be met (the driver cannot lower
    # the clock further): flag the row and keep its uncapped lowest-clock power, never a power
    # cut below what the workload draws at that throughput. Without a user limit (cap = TDP)
    # the power stays clipped at TDP as before (the fitted coefficients depend on it).
    infeasible = ~np.isnan(f.power_limit) & (res.power_gpu > cap * POWER_CAP_TOLERANCE)
    power_gpu = np.where(infeasible, res.power_gpu, np.minimum(res.power_gpu, cap))
    dyn = res.power_gpu - res.idle
    scale = np.where(dyn > 0, (power_gpu - res.idle) / np.where(dyn > 0, dyn, 1.0), 1.0)
    n = f.num_gpus
    t = res.t_step
    thr = f.batch / t
    power = n * power_gpu
    per_tok = n * t / f.batch  # GPU-seconds per output token
    energy = power / thr
    share_pf = np.clip(res.t_prefill / t, 0.0, 1.0)
    no_job = np.full(len(t), np.nan)  # steady-state serving has no job durations
    return Prediction(
        throughput_tokens_per_s=thr,
        avg_power_w=power,
        energy_per_token_j=energy,
        step_s=t,
        clock_mhz=clock,
        energy_static_j=res.idle * per_tok,
        energy_overhead_j=(res.dyn_base + res.dyn_seq) * scale * per_tok,
        energy_compute_j=res.dyn_comp * scale * per_tok,
        energy_memory_j=res.dyn_mem * scale * per_tok,
        energy_prefill_j=energy * share_pf,
        energy_decode_j=energy * (1.0 - share_pf),
        t_prefill_s=res.t_prefill,
        decode_step_s=res.t_decode,
        median_step_s=median_step(res.t_decode, res.t_mix, res.q_mix),
        power_limit_infeasible=infeasible,
        min_clock_power_w=res.power_gpu,
        job_duration_s=no_job,
        prefill_duration_s=no_job.copy(),
    )
