"""Training step of a pipeline-parallel job: stages, 1F1B schedule, bubble, energy of every GPU.

The model is split into ``pipeline_parallel`` stages as
:func:`~mlenergy.estimate.training.estimate_pipeline_stages` splits it (the first stage carries
the input embedding, the last the LM head, layers as even as possible, earlier stages taking
the rest), and each stage's forward and backward of one microbatch is the same per-instruction
model (:func:`~mlenergy.estimate.training_physics.instruction_work`), so the two agree figure for
figure. Parallelism follows Megatron-LM: each stage is tensor-parallel over ``tensor_parallel``
GPUs, the pipeline is replicated ``data_parallel`` times, bf16 weights and gradients are held
whole by every replica and the fp32 Adam states (master weights, two moments) are sharded over
the data-parallel ranks (the distributed optimizer).

One optimizer step:

* **pipeline**: the synchronous 1F1B schedule of ``m`` microbatches takes ``m + pp - 1``
  slots of the slowest stage's forward plus backward; a stage computes for ``m`` slots of its
  own and waits the rest (the bubble, ``(pp - 1) / (m + pp - 1)`` of the pipeline time for
  balanced stages, plus waiting for slower stages);
* **gradient sync** (``data_parallel > 1``): reduce-scatter of the bf16 gradients and
  all-gather of the bf16 weights of the stage over the data-parallel ranks (ring);
* **optimizer**: the Adam update of this GPU's shard (16 bytes per parameter streamed);
* a fixed per-step cost (``Coefficients.step_s``).

Energy counts every GPU for the whole step: its forwards and backwards as the
per-instruction model says, memory-busy power during the gradient sync and update, and the
blocking power (the GPU's idle power, as ``mlenergy optimize pipeline --from-estimate``
assumes when no ``--p-blocking`` is given) while it waits. Memory per GPU: the stage's bf16
weights and gradients, its Adam shard and the activations of the microbatches a 1F1B stage
holds in flight (stage ``i`` holds up to ``pp - i``, so the first stage is the worst).

Power, at any clock, is :mod:`~mlenergy.estimate.power_model`'s, as for the single-stage step
and serving: one voltage relation, and a GPU over its TDP runs at the lower clock that fits.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from mlenergy.errors import UserError
from mlenergy.estimate.coefficients import Coefficients
from mlenergy.estimate.power_model import gpu_power, idle_power_w
from mlenergy.estimate.roofline import effective_bandwidth
from mlenergy.estimate.training_memory import (
    ACTIVATION_BYTES_PER_TOKEN_LAYER_HIDDEN,
    OPTIMIZER_BYTES_PER_PARAM,
    state_bytes,
    usable_gb,
)
from mlenergy.estimate.training_physics import instruction_work, work_at_locked_clock
from mlenergy.reference.gpus import GpuSpec

ADAM_UPDATE_BYTES_PER_PARAM = OPTIMIZER_BYTES_PER_PARAM
"""Bytes streamed per parameter by the Adam update of a shard (states, weight, gradient)."""


@dataclass(frozen=True)
class StageStep:
    """One pipeline stage within a training step (per GPU of the stage).

    Attributes:
        stage: Stage index (0-based; 0 carries the embedding, the last the LM head).
        layers: Transformer layers of the stage.
        parameters: Parameters of the stage (all its tensor-parallel GPUs together).
        memory_gb_per_gpu: Weights, gradients, Adam shard and in-flight activations (GB).
        microbatches_in_flight: Activations held at the peak of the 1F1B schedule.
        forward_s: One microbatch's forward on one GPU (s).
        backward_s: One microbatch's backward on one GPU (s).
        forward_j: Its energy on one GPU (J).
        backward_j: Its energy on one GPU (J).
        busy_fraction: Share of the pipeline time this stage computes (1 - its wait share).
    """

    stage: int
    layers: int
    parameters: float
    memory_gb_per_gpu: float
    microbatches_in_flight: int
    forward_s: float
    backward_s: float
    forward_j: float
    backward_j: float
    busy_fraction: float

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form."""
        return asdict(self)


@dataclass(frozen=True)
class PipelineStep:
    """A pipelined optimizer step (times in s, energies in J over every GPU).

    Attributes:
        stages: Per-stage figures.
        microbatches: Microbatches per data-parallel replica per step.
        microbatch_size: Sequences per microbatch.
        pipeline_s: The 1F1B schedule, ``(m + pp - 1)`` slots of the slowest stage.
        bubble_fraction: ``(pp - 1) / (m + pp - 1)``: the schedule's fill-and-drain share.
        sync_s: Data-parallel gradient reduce-scatter and weight all-gather after the flush.
        optimizer_s: Adam update of the slowest stage's shard.
        step_s: The whole step (fixed cost, pipeline, sync, update).
        energy_j: All GPUs over the step.
        blocking_energy_j: The part of ``energy_j`` drawn while GPUs wait (bubble, slower
            stages, other stages' sync and update).
        blocking_power_w: Power of a waiting GPU (W).
        flops_per_gpu_s: Model FLOP/s per GPU averaged over the step.
    """

    stages: tuple[StageStep, ...]
    microbatches: int
    microbatch_size: int
    pipeline_s: float
    bubble_fraction: float
    sync_s: float
    optimizer_s: float
    step_s: float
    energy_j: float
    blocking_energy_j: float
    blocking_power_w: float
    flops_per_gpu_s: float


def microbatch_plan(batch_size: int, data_parallel: int, microbatches: int | None) -> int:
    """Sequences per microbatch for ``batch_size`` global sequences (default size 1).

    Raises:
        UserError: The batch does not split evenly over replicas and microbatches.
    """
    if batch_size % data_parallel:
        raise UserError(
            f"--batch-size {batch_size} does not split over {data_parallel} data-parallel replicas",
            "Pass a batch size that is a multiple of the data-parallel degree",
        )
    per_replica = batch_size // data_parallel
    m = per_replica if microbatches is None else microbatches
    if m < 1:
        raise UserError(f"--microbatches is {m}; it must be >= 1", "Pass a positive count")
    if per_replica % m:
        raise UserError(
            f"--microbatches {m} does not divide the {per_replica} sequences of each "
            "data-parallel replica",
            "Pass a divisor of batch size / data parallel (microbatch size = the quotient)",
        )
    return per_replica // m


def check_stage_count(pipeline_parallel: int, num_layers: int) -> None:
    """Raise :class:`UserError` unless ``1 <= pipeline_parallel <= num_layers``."""
    if pipeline_parallel < 1:
        raise UserError(
            f"--pipeline-parallel is {pipeline_parallel}; it must be >= 1", "Pass 1 or more"
        )
    if pipeline_parallel > num_layers:
        raise UserError(
            f"--pipeline-parallel {pipeline_parallel} is more than the model's {num_layers} layers",
            f"Use at most {num_layers} pipeline stages",
        )


def stage_memory_gb(
    params: float, layers: int, in_flight: int, tokens: int, hidden: int, tp: int, dp: int
) -> tuple[float, float]:
    """(weights + gradients + Adam shard, activations) per GPU of a stage, in GB."""
    state = state_bytes(params / tp, dp, fully_sharded=False)
    act = ACTIVATION_BYTES_PER_TOKEN_LAYER_HIDDEN * tokens * hidden * layers * in_flight / tp
    return state / 1e9, act / 1e9


def pipeline_schedule(
    fwd_bwd_s: list[float], microbatches: int
) -> tuple[float, float, list[float]]:
    """(1F1B time s, bubble fraction, busy fraction per stage) of one pipeline.

    Args:
        fwd_bwd_s: Each stage's forward plus backward of one microbatch (s).
        microbatches: Microbatches per step.
    """
    pp = len(fwd_bwd_s)
    slots = microbatches + pp - 1
    pipeline_s = slots * max(fwd_bwd_s)
    busy = [microbatches * t / pipeline_s for t in fwd_bwd_s]
    return pipeline_s, (pp - 1) / slots, busy


def gradient_sync_s(params_gpu: float, dp: int, c: Coefficients, g: GpuSpec) -> float:
    """Ring reduce-scatter of bf16 gradients plus all-gather of bf16 weights (s)."""
    if dp <= 1:
        return 0.0
    link = c.eta_link * g.interconnect_gb_s * 1e9
    return 2.0 * (2.0 * params_gpu * (dp - 1) / dp / link + c.collective_s * np.log2(2.0 * dp))


def memory_busy_power_w(c: Coefficients, g: GpuSpec, clock: float) -> float:
    """Power of a GPU streaming memory or links with idle tensor cores (W)."""
    r = clock / g.max_sm_clock_mhz
    power = gpu_power(blocking_power_w(c, g), g.tdp_w, r, 0.0, 1.0, c)
    return min(float(power.total), g.tdp_w)


def blocking_power_w(c: Coefficients, g: GpuSpec) -> float:
    """Power of a GPU waiting in the schedule: its idle power (W)."""
    return float(idle_power_w(g.idle_power_w, g.tdp_w, c))


def step_energy(
    stages: list[StageStep],
    microbatches: int,
    post_s: list[float],
    step_s: float,
    gpus_per_stage: int,
    p_block: float,
    p_post: float,
) -> tuple[float, float]:
    """(energy J, blocking energy J) of every GPU over one step.

    Args:
        stages: Per-stage figures.
        microbatches: Microbatches each stage computes per step.
        post_s: Each stage's gradient sync plus update time (s), drawn at ``p_post``.
        step_s: The step time (s).
        gpus_per_stage: ``tensor_parallel x data_parallel``.
        p_block: Power while waiting (W).
        p_post: Power during sync and update (W).
    """
    total = blocking = 0.0
    for s, post in zip(stages, post_s, strict=True):
        wait_s = step_s - microbatches * (s.forward_s + s.backward_s) - post
        blocking += p_block * wait_s
        total += microbatches * (s.forward_j + s.backward_j) + p_post * post + p_block * wait_s
    return total * gpus_per_stage, blocking * gpus_per_stage


def pipelined_step(
    c: Coefficients,
    g: GpuSpec,
    prec: str,
    spec: Any,
    prof: Any,
    *,
    pipeline_parallel: int,
    tensor_parallel: int,
    data_parallel: int,
    batch_size: int,
    seq_len: int,
    microbatches: int | None,
    clock_mhz: float,
) -> PipelineStep:
    """One optimizer step of a TP x PP x DP job under the synchronous 1F1B schedule.

    Args:
        c: Coefficients.
        g: The GPU.
        prec: Matmul precision.
        spec: The model's architecture (:func:`~mlenergy.estimate.configs.resolve_model`).
        prof: Its FLOPs and bytes (:func:`~mlenergy.estimate.profile.build_profile`).
        pipeline_parallel: Stages.
        tensor_parallel: GPUs per stage and replica.
        data_parallel: Pipeline replicas.
        batch_size: Global sequences per step.
        seq_len: Tokens per sequence.
        microbatches: Microbatches per replica (default: microbatch size 1).
        clock_mhz: Locked SM clock (MHz).

    Raises:
        UserError: Bad split or a stage that does not fit in the GPU's memory.
    """
    pp, tp, dp = pipeline_parallel, tensor_parallel, data_parallel
    check_stage_count(pp, prof.num_layers)
    mb_size = microbatch_plan(batch_size, dp, microbatches)
    m = batch_size // dp // mb_size
    tokens = mb_size * seq_len
    stages: list[StageStep] = []
    flops_step = 0.0  # model FLOPs of one replica's step on one GPU of every stage
    for i, layers in enumerate(split_layers(prof.num_layers, pp, None)):
        flops_tok, params = stage_work(prof, spec, layers, i == 0, i == pp - 1, seq_len)
        in_flight = min(pp - i, m)
        state_gb, act_gb = stage_memory_gb(
            params, layers, in_flight, tokens, prof.hidden_size, tp, dp
        )
        _check_fits(i, state_gb, act_gb, g)
        fwd_bwd = []
        for mult, reads in ((1.0, 1.0), (2.0, 3.0)):
            work = instruction_work(
                c,
                flops_tok * tokens * mult / tp,
                reads * params / tp * 2.0,
                layers,
                tokens,
                prof.hidden_size,
                tp,
            )
            t, power = work_at_locked_clock(c, g, prec, work, clock_mhz)
            fwd_bwd.append((t, power * t))
        (f_s, f_j), (b_s, b_j) = fwd_bwd
        flops_step += 3.0 * flops_tok * tokens * m / tp
        stages.append(
            StageStep(i, layers, params, state_gb + act_gb, in_flight, f_s, b_s, f_j, b_j, 0.0)
        )
    pipeline_s, bubble, busy = pipeline_schedule([s.forward_s + s.backward_s for s in stages], m)
    stages = [replace_busy(s, b) for s, b in zip(stages, busy, strict=True)]
    bandwidth = effective_bandwidth(g.memory_bandwidth_tb_s * 1e12, c)
    sync = [gradient_sync_s(s.parameters / tp, dp, c, g) for s in stages]
    update = [ADAM_UPDATE_BYTES_PER_PARAM * s.parameters / tp / dp / bandwidth for s in stages]
    post = [a + b for a, b in zip(sync, update, strict=True)]
    slowest = int(np.argmax(post))
    step_s = c.step_s + pipeline_s + post[slowest]
    p_block = blocking_power_w(c, g)
    energy, blocking = step_energy(
        stages, m, post, step_s, tp * dp, p_block, memory_busy_power_w(c, g, clock_mhz)
    )
    return PipelineStep(
        stages=tuple(stages),
        microbatches=m,
        microbatch_size=mb_size,
        pipeline_s=pipeline_s,
        bubble_fraction=bubble,
        sync_s=sync[slowest],
        optimizer_s=update[slowest],
        step_s=step_s,
        energy_j=energy,
        blocking_energy_j=blocking,
        blocking_power_w=p_block,
        flops_per_gpu_s=flops_step / pp / step_s,
    )


def replace_busy(stage: StageStep, busy_fraction: float) -> StageStep:
    """``stage`` with its busy share of the pipeline time set."""
    return StageStep(**{**asdict(stage), "busy_fraction": float(busy_fraction)})


def _check_fits(stage: int, state_gb: float, act_gb: float, g: GpuSpec) -> None:
    """Raise :class:`UserError` when a stage needs more than the GPU's usable memory."""
    usable = usable_gb(g.memory_gb)
    if state_gb + act_gb > usable:
        raise UserError(
            f"training step does not fit: pipeline stage {stage} needs {state_gb:.1f} GB "
            f"weights/grads/Adam + {act_gb:.1f} GB activations per GPU > {usable:.1f} GB usable "
            f"on {g.name}",
            "Use more pipeline stages or tensor parallelism, more data parallelism (Adam "
            "states shard over it), more --microbatches, or a GPU with more memory",
        )


def split_layers(num_layers: int, stages: int, layers_per_stage: list[int] | None) -> list[int]:
    """Layers per stage: as given, else as even as possible (earlier stages take the rest).

    Raises:
        UserError: The split does not add up to ``num_layers`` or leaves a stage empty.
    """
    if stages < 1:
        raise UserError(f"--stages is {stages}; it must be >= 1", "Pass a positive count")
    if layers_per_stage is not None:
        if len(layers_per_stage) != stages or sum(layers_per_stage) != num_layers:
            raise UserError(
                f"--layers-per-stage {layers_per_stage} does not split {num_layers} layers "
                f"into {stages} stages",
                "Give one count per stage that sums to the model's layers",
            )
        if min(layers_per_stage) < 1:
            raise UserError("--layers-per-stage has an empty stage", "Give each stage a layer")
        return list(layers_per_stage)
    if stages > num_layers:
        raise UserError(
            f"--stages {stages} is more than the model's {num_layers} layers", "Use fewer stages"
        )
    base, extra = divmod(num_layers, stages)
    return [base + (1 if s < extra else 0) for s in range(stages)]


def stage_work(prof: Any, spec: Any, layers: int, first: bool, last: bool, seq_len: int):
    """(forward FLOPs per token, parameters) of one stage."""
    head = float(spec.vocab_size * spec.hidden_size)
    body_flops = prof.dense_flops_per_token + prof.expert_flops_per_token - 2.0 * head
    attn = (
        prof.attn_full_flops * seq_len / 2
        + prof.attn_window_flops * min(seq_len, prof.window or seq_len) / 2
    )
    per_layer_flops = (body_flops + attn) / prof.num_layers
    embeddings = head * (1 if spec.tie_embeddings else 2)
    per_layer_params = (prof.total_params - embeddings) / prof.num_layers
    flops = layers * per_layer_flops + (2.0 * head if last else 0.0)
    params = layers * per_layer_params + (head if first else 0.0) + (head if last else 0.0)
    return flops, params
