"""Training-step mode: energy and time of one optimizer step (dense or MoE), per GPU physics.

Same hardware model as serving (:mod:`mlenergy.estimate.physics`) and the same power model
(:mod:`mlenergy.estimate.power_model`), with the
work of a training step: 6 FLOPs per active weight per token (forward, input and weight
gradients) plus attention, weights read three times, an Adam update touching 16 bytes per
parameter (bf16 weights and grads, fp32 master and two moments), fully sharded data
parallelism (FSDP / ZeRO-3: weights, gradients and Adam states split over the data-parallel
ranks, weights all-gathered and gradients reduce-scattered each step) and tensor-parallel
activation all-reduces. Activations are stored without recomputation.

The reference data holds no training measurements, so the achieved tensor-core fraction is a
documented prior (``TRAIN_MFU_PRIOR``), not a fit: treat training estimates as first-order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlenergy.errors import UserError
from mlenergy.estimate.coefficients import Coefficients, default_coefficients
from mlenergy.estimate.configs import resolve_model
from mlenergy.estimate.power_model import lowest_clock_mhz
from mlenergy.estimate.profile import build_profile, normalise_precision
from mlenergy.estimate.table_rows import energy_source
from mlenergy.estimate.training_memory import (
    ACTIVATION_BYTES_PER_TOKEN_LAYER_HIDDEN,
    OPTIMIZER_BYTES_PER_PARAM,
    state_bytes,
    usable_gb,
)
from mlenergy.estimate.training_physics import (
    TrainingWork,
    instruction_work,
    work_at_locked_clock,
)
from mlenergy.estimate.training_pipeline import (
    StageStep,
    pipelined_step,
    split_layers,
    stage_work,
)
from mlenergy.reference.gpus import GpuSpec, resolve_gpu


@dataclass(frozen=True)
class TrainingEstimate:
    """One training step (units in names; energy is GPU energy over all GPUs).

    The pipeline fields are set with ``pipeline_parallel > 1``
    (:mod:`~mlenergy.estimate.training_pipeline`): ``microbatches`` per data-parallel replica
    of ``microbatch_size`` sequences, the 1F1B ``bubble_fraction`` ``(pp - 1) / (m + pp - 1)``,
    the energy GPUs draw while waiting (``blocking_energy_j`` at ``blocking_power_w`` each),
    per-stage figures (``stages``), and the step's parts: ``pipeline_duration_s``,
    ``gradient_sync_s`` and ``optimizer_update_s``. ``memory_gb_per_gpu`` is then the largest
    stage's.
    """

    model: str
    gpu: str
    num_gpus: int
    tensor_parallel: int
    data_parallel: int
    precision: str
    batch_size: int
    seq_len: int
    step_duration_s: float
    energy_per_step_j: float
    energy_per_token_j: float
    throughput_tokens_per_s: float
    avg_power_w: float
    mfu: float
    memory_gb_per_gpu: float
    energy_source: str
    pipeline_parallel: int = 1
    microbatches: int = 1
    microbatch_size: int | None = None
    bubble_fraction: float = 0.0
    blocking_energy_j: float | None = None
    blocking_power_w: float | None = None
    stages: tuple[StageStep, ...] = ()
    pipeline_duration_s: float | None = None
    gradient_sync_s: float | None = None
    optimizer_update_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form."""
        return asdict(self)

    @classmethod
    def from_step(
        cls,
        *,
        batch_size: int,
        seq_len: int,
        step_s: float,
        energy_j: float,
        **fields: Any,
    ) -> TrainingEstimate:
        """An estimate from one step's duration (s) and energy (J, all GPUs).

        Energy per token, throughput and average power follow from them and the step's
        ``batch_size x seq_len`` tokens; ``fields`` are the other attributes.
        """
        tokens = batch_size * seq_len
        return cls(
            batch_size=int(batch_size),
            seq_len=int(seq_len),
            step_duration_s=step_s,
            energy_per_step_j=energy_j,
            energy_per_token_j=energy_j / tokens,
            throughput_tokens_per_s=tokens / step_s,
            avg_power_w=energy_j / step_s,
            energy_source=energy_source(),
            **fields,
        )


def estimate_training(
    model: str,
    gpu: str | GpuSpec,
    batch_size: int,
    seq_len: int,
    num_gpus: int | None = None,
    tensor_parallel: int = 1,
    data_parallel: int | None = None,
    precision: str | None = "bfloat16",
    sm_clock_mhz: float | None = None,
    configs_dir: str | Path | None = None,
    coefficients: Coefficients | None = None,
    pipeline_parallel: int = 1,
    microbatches: int | None = None,
) -> TrainingEstimate:
    """Estimate one optimizer step of ``batch_size`` sequences of ``seq_len`` tokens.

    Args:
        model: Config path or model id.
        gpu: Catalog name, spec file or :class:`GpuSpec`.
        batch_size: Sequences per optimizer step (global).
        seq_len: Tokens per sequence.
        num_gpus: GPUs (default ``tensor_parallel * data_parallel``).
        tensor_parallel: Tensor-parallel degree.
        data_parallel: Data-parallel degree (default ``num_gpus / tensor_parallel``).
        precision: Compute precision of the matmuls (bfloat16 or fp8).
        sm_clock_mhz: Locked SM clock (default: maximum).
        configs_dir: Folder of model configs.
        coefficients: Hardware/power coefficients (default: shipped).
        pipeline_parallel: Pipeline stages; above 1 the step is the 1F1B schedule of
            :mod:`~mlenergy.estimate.training_pipeline` (num_gpus = TP x PP x DP).
        microbatches: Microbatches per data-parallel replica with ``pipeline_parallel > 1``
            (default: the replica's sequences, microbatch size 1).

    Raises:
        UserError: Bad input or a step that does not fit in memory.
    """
    c = coefficients or default_coefficients()
    spec, fp8 = resolve_model(model, configs_dir)
    prec = "fp8" if fp8 else normalise_precision(precision)
    g = resolve_gpu(gpu)
    if batch_size < 1 or seq_len < 1:
        raise UserError("batch_size and seq_len must be >= 1 for a training step")
    if spec.num_heads % tensor_parallel:
        raise UserError(
            f"tensor_parallel ({tensor_parallel}) does not divide num_attention_heads "
            f"({spec.num_heads})"
        )
    model_parallel = tensor_parallel * max(pipeline_parallel, 1)
    n = num_gpus or model_parallel * (data_parallel or 1)
    dp = data_parallel or max(n // model_parallel, 1)
    if model_parallel * dp != n:
        raise UserError(
            f"tensor_parallel x pipeline_parallel x data_parallel ({model_parallel * dp}) != "
            f"num_gpus ({n})",
            "Pass --num-gpus as the product of the parallel degrees, or leave it out",
        )
    prof = build_profile(spec, prec)
    if pipeline_parallel != 1 or microbatches is not None:
        return _pipelined_estimate(
            str(model),
            c,
            g,
            prec,
            spec,
            prof,
            n,
            tensor_parallel,
            dp,
            pipeline_parallel,
            batch_size,
            seq_len,
            microbatches,
            float(sm_clock_mhz or g.max_sm_clock_mhz),
        )
    tokens = batch_size * seq_len
    tokens_gpu = tokens / dp
    params_gpu = prof.total_params / tensor_parallel  # parameters this GPU computes with
    state_gpu = params_gpu / dp  # fully sharded (FSDP / ZeRO-3) over data-parallel ranks
    act = ACTIVATION_BYTES_PER_TOKEN_LAYER_HIDDEN * tokens_gpu * prof.hidden_size
    act *= prof.num_layers / tensor_parallel
    state = state_bytes(params_gpu, dp, fully_sharded=True)
    mem_gb = (state + act) / 1e9
    if mem_gb > usable_gb(g.memory_gb):
        raise UserError(
            f"training step does not fit: {state / 1e9:.1f} GB weights/grads/Adam + "
            f"{act / 1e9:.1f} GB activations per GPU > {usable_gb(g.memory_gb):.1f} GB usable",
            "Use more GPUs, a smaller batch or shorter sequences",
        )
    attn = (
        prof.attn_full_flops * seq_len / 2
        + prof.attn_window_flops * min(seq_len, prof.window or seq_len) / 2
    )
    flops_gpu = 3.0 * tokens_gpu * (prof.dense_flops_per_token + prof.expert_flops_per_token + attn)
    flops_gpu /= tensor_parallel
    work = TrainingWork(
        flops=flops_gpu,
        mem_bytes=3.0 * prof.weight_bytes / tensor_parallel + OPTIMIZER_BYTES_PER_PARAM * state_gpu,
        tp_all_reduces=4.0 * prof.num_layers if tensor_parallel > 1 else 0.0,
        tp_bytes=4.0 * tokens_gpu * prof.hidden_size * (tensor_parallel - 1) / tensor_parallel,
        tp=tensor_parallel,
        # FSDP: all-gather bf16 weights for forward and backward, reduce-scatter bf16 grads.
        dp_bytes=3.0 * 2.0 * params_gpu * (dp - 1) / dp if dp > 1 else 0.0,
        host_s=c.step_s + 3.0 * c.layer_s * prof.num_layers,
    )
    t_step, power_gpu = work_at_locked_clock(
        c, g, prec, work, float(sm_clock_mhz or g.max_sm_clock_mhz)
    )
    energy = power_gpu * n * t_step
    peak = g.peak_tflops(prec) * 1e12
    mfu = flops_gpu / (t_step * peak)
    return TrainingEstimate.from_step(
        batch_size=batch_size,
        seq_len=seq_len,
        step_s=t_step,
        energy_j=energy,
        model=str(model),
        gpu=g.name,
        num_gpus=n,
        tensor_parallel=tensor_parallel,
        data_parallel=dp,
        precision=prec,
        mfu=mfu,
        memory_gb_per_gpu=mem_gb,
    )


def _pipelined_estimate(
    model: str,
    c: Coefficients,
    g: GpuSpec,
    prec: str,
    spec: Any,
    prof: Any,
    n: int,
    tp: int,
    dp: int,
    pp: int,
    batch_size: int,
    seq_len: int,
    microbatches: int | None,
    clock_mhz: float,
) -> TrainingEstimate:
    """:func:`estimate_training` of a pipeline-parallel step (``pp > 1`` or microbatches)."""
    if pp == 1:
        raise UserError(
            "--microbatches applies to a pipeline (--pipeline-parallel > 1)",
            "Leave --microbatches out, or pass --pipeline-parallel",
        )
    step = pipelined_step(
        c,
        g,
        prec,
        spec,
        prof,
        pipeline_parallel=pp,
        tensor_parallel=tp,
        data_parallel=dp,
        batch_size=batch_size,
        seq_len=seq_len,
        microbatches=microbatches,
        clock_mhz=clock_mhz,
    )
    return TrainingEstimate.from_step(
        batch_size=batch_size,
        seq_len=seq_len,
        step_s=step.step_s,
        energy_j=step.energy_j,
        model=model,
        gpu=g.name,
        num_gpus=n,
        tensor_parallel=tp,
        data_parallel=dp,
        precision=prec,
        mfu=step.flops_per_gpu_s / (g.peak_tflops(prec) * 1e12),
        memory_gb_per_gpu=max(s.memory_gb_per_gpu for s in step.stages),
        pipeline_parallel=pp,
        microbatches=step.microbatches,
        microbatch_size=step.microbatch_size,
        bubble_fraction=step.bubble_fraction,
        blocking_energy_j=step.blocking_energy_j,
        blocking_power_w=step.blocking_power_w,
        stages=step.stages,
        pipeline_duration_s=step.pipeline_s,
        gradient_sync_s=step.sync_s,
        optimizer_update_s=step.optimizer_s,
    )


PIPELINE_CLOCK_STEP_MHZ = 15.0
"""SM clock step of an estimated pipeline profile (the locked clocks NVIDIA GPUs accept)."""
PIPELINE_LOWEST_CLOCK_FRACTION = 0.5
"""Lowest clock of an estimated profile as a fraction of the maximum (below it, nothing saves)."""


@dataclass(frozen=True)
class StageInstructionEstimate:
    """Time and energy of one microbatch's forward or backward on one GPU of a stage.

    Attributes:
        stage: Pipeline stage (0-based).
        instruction: ``forward`` or ``backward``.
        frequency_mhz: Locked SM clock (MHz).
        time_s: Time of one microbatch (s).
        energy_j: GPU energy of one microbatch on one GPU of the stage (J).
        energy_source: The estimator's label.
    """

    stage: int
    instruction: str
    frequency_mhz: int
    time_s: float
    energy_j: float
    energy_source: str


def pipeline_clocks(gpu: GpuSpec) -> list[int]:
    """SM clocks of an estimated profile: max down to half of it in 15 MHz steps (MHz)."""
    top = float(gpu.max_sm_clock_mhz)
    low = max(lowest_clock_mhz(gpu.min_sm_clock_mhz, top), PIPELINE_LOWEST_CLOCK_FRACTION * top)
    return [round(float(f)) for f in np.arange(top, low - 1e-9, -PIPELINE_CLOCK_STEP_MHZ)]


def estimate_pipeline_stages(
    model: str,
    gpu: str | GpuSpec,
    stages: int,
    tensor_parallel: int = 1,
    microbatch_size: int = 1,
    seq_len: int = 2048,
    layers_per_stage: list[int] | None = None,
    data_parallel: int = 1,
    precision: str | None = "bfloat16",
    clocks_mhz: list[int] | None = None,
    configs_dir: str | Path | None = None,
    coefficients: Coefficients | None = None,
) -> list[StageInstructionEstimate]:
    """Forward and backward of one microbatch on each pipeline stage, at every SM clock.

    The first stage carries the input embedding (memory only), the last the LM head (memory and
    FLOPs); layers are split evenly unless ``layers_per_stage`` says otherwise. Each stage is
    tensor-parallel over ``tensor_parallel`` GPUs (two activation all-reduces per layer in the
    forward, two in the backward). Backward does twice the forward's FLOPs and reads the
    weights twice. Time at clock ``f``: compute scales with ``f``, memory and collectives do
    not; power: :mod:`~mlenergy.estimate.power_model` at that clock (dynamic power falls with
    ``f x V(f)^2``, static power does not; over the TDP the GPU runs at the clock that fits),
    so energy falls with the clock, bottoms out and rises again as static power dominates.
    Memory: weights, gradients and Adam states of the stage (Adam states sharded over
    ``data_parallel``, as Megatron's distributed optimizer) plus the activations of up to
    ``stages`` microbatches in flight (1F1B).

    Raises:
        UserError: Bad input, or a stage that does not fit in the GPU's memory.
    """
    c = coefficients or default_coefficients()
    spec, fp8 = resolve_model(model, configs_dir)
    prec = "fp8" if fp8 else normalise_precision(precision)
    g = resolve_gpu(gpu)
    for name, value in (
        ("--tensor-parallel", tensor_parallel),
        ("--microbatch-size", microbatch_size),
        ("--seq-len", seq_len),
        ("--data-parallel", data_parallel),
    ):
        if value < 1:
            raise UserError(f"{name} is {value}; it must be >= 1", "Pass a positive count")
    if spec.num_heads % tensor_parallel:
        raise UserError(
            f"tensor_parallel ({tensor_parallel}) does not divide num_attention_heads "
            f"({spec.num_heads})"
        )
    prof = build_profile(spec, prec)
    split = split_layers(prof.num_layers, stages, layers_per_stage)
    tokens = microbatch_size * seq_len
    clocks = clocks_mhz or pipeline_clocks(g)
    out: list[StageInstructionEstimate] = []
    for stage, layers in enumerate(split):
        flops_tok, params = stage_work(prof, spec, layers, stage == 0, stage == stages - 1, seq_len)
        params_gpu = params / tensor_parallel
        act = ACTIVATION_BYTES_PER_TOKEN_LAYER_HIDDEN * tokens * prof.hidden_size * layers
        act *= min(stages - stage, stages) / tensor_parallel
        mem_gb = (state_bytes(params_gpu, data_parallel, fully_sharded=False) + act) / 1e9
        if mem_gb > usable_gb(g.memory_gb):
            raise UserError(
                f"stage {stage} does not fit: {mem_gb:.1f} GB per GPU > "
                f"{usable_gb(g.memory_gb):.1f} GB usable on {g.name}",
                "Use more stages, more tensor parallelism, --data-parallel or smaller microbatches",
            )
        for inst, mult, reads in (("forward", 1.0, 1.0), ("backward", 2.0, 3.0)):
            for clock in clocks:
                work = instruction_work(
                    c,
                    flops_tok * tokens * mult / tensor_parallel,
                    reads * params_gpu * 2.0,
                    layers,
                    tokens,
                    prof.hidden_size,
                    tensor_parallel,
                )
                t, power = work_at_locked_clock(c, g, prec, work, float(clock))
                e = power * t
                out.append(StageInstructionEstimate(stage, inst, int(clock), t, e, energy_source()))
    return out


def format_pipeline(est: TrainingEstimate) -> str:
    """The stage split, schedule and bubble of a pipelined training estimate as text lines."""
    layers = ",".join(str(s.layers) for s in est.stages)
    mem = ", ".join(f"{s.memory_gb_per_gpu:.1f}" for s in est.stages)
    slow = max(est.stages, key=lambda s: s.forward_s + s.backward_s)
    waiting = (est.blocking_energy_j or 0.0) / est.energy_per_step_j
    return (
        f"  pipeline         : PP{est.pipeline_parallel} 1F1B, {est.microbatches} microbatches"
        f" of {est.microbatch_size} sequence(s) per replica; layers per stage {layers}\n"
        f"  bubble           : {est.bubble_fraction:.1%} of the {est.pipeline_duration_s:.3f} s"
        f" pipeline (slowest stage {slow.stage}: "
        f"{(slow.forward_s + slow.backward_s) * 1e3:.1f} ms per microbatch)\n"
        f"  waiting GPUs     : {waiting:.1%} of the energy at {est.blocking_power_w:.0f} W each\n"
        f"  memory per GPU   : {mem} GB by stage (stage 0 has the embedding, "
        f"stage {est.pipeline_parallel - 1} the LM head)\n"
        f"  after the flush  : {est.gradient_sync_s:.3f} s gradient sync, "
        f"{est.optimizer_update_s:.3f} s Adam update"
    )
