"""The run record: one measured, modelled or estimated workload and its results."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, model_validator

from mlenergy.records.base import (
    SCHEMA_VERSION,
    EnergySource,
    FrozenModel,
    Interval,
    NonNegFloat,
    NonNegInt,
    PosInt,
    RepeatStats,
    canonical_json,
    sha256_hex,
)
from mlenergy.records.display import html_table, num_cell
from mlenergy.records.generation import GenerationInfo
from mlenergy.records.host_bound import HOST_BOUND_MARK, HostBound
from mlenergy.records.interval import IntervalBasis
from mlenergy.records.provenance import Hardware, ModelInfo, Software
from mlenergy.records.serving import ServingStats


class Phase(StrEnum):
    """Which part of a workload a :class:`PhaseResult` covers."""

    PREFILL = "prefill"
    DECODE = "decode"
    REQUEST = "request"  # prefill + decode: the whole request
    TRAIN = "train"  # training steps


class Workload(FrozenModel):
    """What was run.

    Attributes:
        kind: ``inference`` or ``training``.
        task: Optional workload label (``lm-arena-chat``, ``perplexity``, ``dense-vs-moe``...).
        batch_size: Sequences processed together (for serving data: the engine cap's target).
        avg_batch_size: Achieved average concurrency, when it differs from ``batch_size``.
        max_num_seqs: The serving engine's concurrency cap, when relevant.
        input_tokens: Prompt tokens per sequence.
        output_tokens: Generated tokens per sequence (0 for training).
        num_requests: Sequences in the whole run (``batch_size`` x batches).
        prompt_source: Where prompts came from (``synthetic``, a dataset id, a file path).
        device: ``cpu``, ``cuda`` or another torch device string.
        tensor_parallel: Tensor-parallel degree.
        expert_parallel: Expert-parallel degree.
        data_parallel: Data-parallel degree.
        pipeline_parallel: Pipeline-parallel degree.
        steps: Training steps (training only).
        seq_len: Training sequence length in tokens (training only).
        avg_output_tokens: Mean generated tokens per sequence when it is a measured or
            predicted mean (serving data); ``output_tokens`` is then its rounding.
        method: How the inference was run and measured: ``static-batch`` (fixed batches of
            ``generate``, phases measured apart) or ``serving-steady-state`` (a serving engine
            under load, energy over the steady-state window, as ML.ENERGY measures);
            ``None`` when the record does not say (training, estimates, older records).
    """

    kind: Literal["inference", "training"]
    task: str | None = None
    batch_size: PosInt
    avg_batch_size: float | None = Field(default=None, gt=0)
    max_num_seqs: PosInt | None = None
    input_tokens: NonNegInt
    output_tokens: NonNegInt
    num_requests: PosInt
    prompt_source: str = "synthetic"
    device: str = "cpu"
    tensor_parallel: PosInt = 1
    expert_parallel: PosInt = 1
    data_parallel: PosInt = 1
    pipeline_parallel: PosInt = 1
    steps: PosInt | None = None
    seq_len: PosInt | None = None
    avg_output_tokens: float | None = Field(default=None, gt=0)
    method: Literal["static-batch", "serving-steady-state"] | None = None

    @model_validator(mode="after")
    def _kind_consistent(self) -> Workload:
        if self.kind == "inference" and self.output_tokens < 1:
            raise ValueError("an inference workload needs output_tokens >= 1")
        return self


class PhaseResult(FrozenModel):
    """Results of one phase (prefill, decode, whole request, training).

    Scalars are means over repeats; ``*_repeats`` keep every repeat and the 95% CI.
    ``energy_j`` is ``None`` when no energy figure exists: it is never silently 0.

    Attributes:
        phase: Which phase.
        duration_s: Wall time of the phase in seconds.
        energy_j: Energy of the phase in joules over the measured scope.
        avg_power_w: ``energy_j / duration_s`` in watts.
        tokens: Tokens processed (prefill: input tokens; decode: generated tokens; train:
            tokens seen), summed over the batch.
        energy_per_token_j: ``energy_j / tokens`` in joules per token.
        throughput_tokens_per_s: ``tokens / duration_s``.
        ttft_s: Time to first token in seconds (request phase).
        itl_p50_s: Median inter-token latency in seconds (decode/request phases).
        itl_p90_s: 90th-percentile inter-token latency in seconds.
        itl_p99_s: 99th-percentile inter-token latency in seconds.
        energy_by_device_j: Energy per measured device in joules, e.g. ``{"gpu:0": 12.3}``.
        energy_j_repeats: Per-repeat energies with mean and 95% CI.
        duration_s_repeats: Per-repeat durations with mean and 95% CI.
        energy_per_token_j_interval: Prediction interval of ``energy_per_token_j`` in joules
            per token (estimates: the calibrated 5th-95th percentile band).
        host_energy_j: Energy in joules of the CPU packages (and DRAM) measured beside the GPUs
            (the scope's ``host_*`` fields say which and how); never part of ``energy_j``.
        host_energy_by_device_j: ``host_energy_j`` per device, e.g. ``{"cpu:0": 3.1}``.
        passes_per_window: How many times the phase's work ran inside each measured window so
            that the window spans at least ten counter periods; figures are per pass.
        energy_per_token_j_ci95: 95% confidence interval of ``energy_per_token_j`` in joules
            per token (measured records); the record's ``interval`` says whether it comes from
            the repeats of one run or from fresh runs.
        wide_interval: ``True`` when that interval reaches further than +-20% of the mean: the
            figure is too noisy to compare on its own.
    """

    phase: Phase
    duration_s: NonNegFloat
    energy_j: NonNegFloat | None = None
    avg_power_w: NonNegFloat | None = None
    tokens: NonNegInt
    energy_per_token_j: NonNegFloat | None = None
    throughput_tokens_per_s: NonNegFloat | None = None
    ttft_s: NonNegFloat | None = None
    itl_p50_s: NonNegFloat | None = None
    itl_p90_s: NonNegFloat | None = None
    itl_p99_s: NonNegFloat | None = None
    energy_by_device_j: dict[str, NonNegFloat] = Field(default_factory=dict)
    energy_j_repeats: RepeatStats | None = None
    duration_s_repeats: RepeatStats | None = None
    energy_per_token_j_interval: Interval | None = None
    host_energy_j: NonNegFloat | None = None
    host_energy_by_device_j: dict[str, NonNegFloat] = Field(default_factory=dict)
    passes_per_window: NonNegInt | None = None
    energy_per_token_j_ci95: Interval | None = None
    wide_interval: bool | None = None

    @classmethod
    def from_totals(
        cls,
        phase: Phase,
        duration_s: float,
        energy_j: float | None,
        tokens: int,
        **fields: Any,
    ) -> PhaseResult:
        """Build a phase from its totals, deriving power, energy per token and throughput.

        A derived figure is ``None`` when its inputs give none: no energy, a zero duration or
        zero tokens.

        Args:
            phase: Which phase.
            duration_s: Wall time in seconds.
            energy_j: Energy in joules, or ``None`` when no figure exists.
            tokens: Tokens processed in the phase.
            **fields: Any other :class:`PhaseResult` fields (latencies, repeats, devices).
        """
        return cls(
            phase=phase,
            duration_s=duration_s,
            energy_j=energy_j,
            avg_power_w=energy_j / duration_s if energy_j is not None and duration_s > 0 else None,
            tokens=tokens,
            energy_per_token_j=energy_j / tokens if energy_j is not None and tokens > 0 else None,
            throughput_tokens_per_s=tokens / duration_s if duration_s > 0 and tokens > 0 else None,
            **fields,
        )


class MeasuredScope(FrozenModel):
    """Which devices an energy figure covers.

    Attributes:
        gpu_indices: GPU indices whose energy is included.
        cpu_indices: CPU packages whose energy is included.
        includes_dram: Whether DRAM energy is included.
        description: Free text, e.g. ``"CPU package modelled from utilisation x TDP"``.
        host_cpu_indices: CPU packages (RAPL) measured *beside* the headline GPU energy and
            kept in the phases' ``host_energy_j``; never included in ``energy_j``.
        host_includes_dram: Whether the host figures include DRAM energy.
        host_energy_source: Label of the host figures, e.g. ``measured:zeus-rapl``.
        counter_period_s: Update period in seconds of the slowest energy counter in the
            headline scope (0: continuous); no reported figure comes from a window shorter
            than ten of these.
    """

    gpu_indices: tuple[NonNegInt, ...] = ()
    cpu_indices: tuple[NonNegInt, ...] = ()
    includes_dram: bool = False
    description: str | None = None
    host_cpu_indices: tuple[NonNegInt, ...] = ()
    host_includes_dram: bool = False
    host_energy_source: EnergySource | None = None
    counter_period_s: NonNegFloat | None = None


class IdleBaseline(FrozenModel):
    """Power drawn by the measured scope while nothing runs, measured before the workload.

    Attributes:
        avg_power_w: Average power at rest (W); ``None`` where no counter or model gives it.
        duration_s: How long the rest was measured (s).
        energy_source: Where the figure came from.
    """

    avg_power_w: NonNegFloat | None
    duration_s: NonNegFloat
    energy_source: EnergySource


class PowerTimeline(FrozenModel):
    """A downsampled power trace of the measured scope during the run.

    Attributes:
        t_s: Sample times in seconds since the start of the run.
        power_w: Total power of the measured scope in watts at each time.
        energy_source: Where the samples came from.
    """

    t_s: tuple[float, ...]
    power_w: tuple[NonNegFloat, ...]
    energy_source: EnergySource

    @model_validator(mode="after")
    def _same_length(self) -> PowerTimeline:
        if len(self.t_s) != len(self.power_w):
            raise ValueError("power timeline t_s and power_w differ in length")
        return self


class TrainingCheckpoint(FrozenModel):
    """State of a training run at one evaluation point (the energy-to-quality curve).

    Attributes:
        step: Optimizer steps done.
        tokens_seen: Training tokens processed so far.
        duration_s: Training wall time so far in seconds (evaluation excluded).
        energy_j: Training energy so far in joules (``None`` if no figure exists).
        train_loss: Mean training loss over the last interval (nats per token).
        val_perplexity: Validation perplexity at this point.
        load_balancing_loss: Mean auxiliary load-balancing loss over the last interval (MoE).
    """

    step: NonNegInt
    tokens_seen: NonNegInt
    duration_s: NonNegFloat
    energy_j: NonNegFloat | None
    train_loss: float | None = None
    val_perplexity: float | None = Field(default=None, gt=0)
    load_balancing_loss: float | None = None


class SubmissionInfo(FrozenModel):
    """How a record entered the store through community submission.

    Attributes:
        submission_id: Queue id of the submission.
        submitter: Who submitted it.
        submitted_at: When it was queued (UTC).
        approved_at: When a maintainer approved it (UTC).
        unverified: Why a measured run is shown as unverified: the provenance a real
            measurement records that it lacks (device names, driver, Zeus version, a power
            timeline covering its phases). Empty when nothing is missing.
    """

    submission_id: str
    submitter: str
    submitted_at: datetime
    approved_at: datetime | None = None
    unverified: tuple[str, ...] = ()


def new_run_id() -> str:
    """Return a fresh, unique run id (32 hex digits)."""
    return uuid.uuid4().hex


def utc_now() -> datetime:
    """Return the current time, timezone-aware in UTC."""
    return datetime.now(UTC)


class RunRecord(FrozenModel):
    """One run: a measured or modelled workload, or an estimate, with full provenance.

    ``energy_source`` says where every energy figure on the record came from.

    Attributes:
        schema_version: Version of this record schema.
        record_type: Always ``run``.
        run_id: Unique id (8-64 letters, digits, ``_`` or ``-``).
        created_at: When the record was made (UTC).
        started_at: When the measured work started (UTC), when known.
        ended_at: When the measured work ended (UTC), when known.
        status: ``ok``, or ``failed`` (a point that could not run, e.g. out of memory).
        error: Why a failed run failed.
        model: The model that ran.
        workload: What was run and how.
        hardware: Where it ran.
        software: The versions of everything that can change a measurement.
        energy_source: Where the energy figures came from (``measured:zeus-nvml``,
            ``modelled:cpu-tdp``, ``estimated:mlenergy-<version>``...).
        scope: The devices the energy figures cover.
        repeats: Measured repeats behind each phase figure.
        warmup_runs: Unmeasured warm-up runs before the repeats.
        phases: One result per phase (prefill, decode, the whole request, a training step).
        idle: Power of the measured scope at rest, measured before the work.
        power_timeline: Power samples over the run (W against s), when recorded.
        checkpoints: Training checkpoints (energy so far, validation perplexity).
        expert_utilisation: Fraction of routed tokens per expert, averaged over layers (MoE).
        tags: Free-form labels (``study``, ``sweep_key``, notes on what was assumed).
        submission: How the record entered the store through community submission, if so.
        serving: A serving run's load, latencies, whole-run energy and per-request energies
            (method ``serving-steady-state``; its request phase is the steady-state window).
        interval: Which spread the phases' 95% intervals come from: ``within-run`` (the
            repeats of one process) or ``between-runs`` (fresh processes or server launches),
            with how many; ``None`` when the record has no interval (records made before the
            field, with repeats, carry within-run ones).
        host_bound: The host-bound rule's verdict on a measured GPU run
            (:mod:`mlenergy.measure.host_bound`); ``None`` where it does not apply (no GPU in
            scope, e.g. CPU-modelled runs; no idle baseline) or for records made before it.
        generation: How a static-batch run generated: the decode loop (``eager`` or
            ``compiled-static-cache``), the torch and transformers versions, the warm-up time
            kept out of every window and, for MoE models, the experts backend; ``None`` for
            serving runs, estimates, imports and older records.
    """

    schema_version: Literal["1.0"] = SCHEMA_VERSION
    record_type: Literal["run"] = "run"
    run_id: str = Field(default_factory=new_run_id, pattern=r"^[A-Za-z0-9_\-]{8,64}$")
    created_at: datetime = Field(default_factory=utc_now)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    status: Literal["ok", "failed"] = "ok"
    error: str | None = None
    model: ModelInfo
    workload: Workload
    hardware: Hardware
    software: Software
    energy_source: EnergySource
    scope: MeasuredScope = Field(default_factory=MeasuredScope)
    repeats: PosInt = 1
    warmup_runs: NonNegInt = 0
    phases: tuple[PhaseResult, ...] = ()
    idle: IdleBaseline | None = None
    power_timeline: PowerTimeline | None = None
    checkpoints: tuple[TrainingCheckpoint, ...] = ()
    expert_utilisation: tuple[NonNegFloat, ...] | None = Field(
        default=None, description="Fraction of routed tokens per expert, averaged over layers."
    )
    tags: dict[str, str] = Field(default_factory=dict)
    submission: SubmissionInfo | None = None
    serving: ServingStats | None = Field(
        default=None,
        description="Load, latencies and per-request energies of a serving run "
        "(method serving-steady-state); the request phase holds the steady-state window.",
    )
    interval: IntervalBasis | None = None
    host_bound: HostBound | None = None
    generation: GenerationInfo | None = None

    @model_validator(mode="after")
    def _status_consistent(self) -> RunRecord:
        if self.status == "failed" and not self.error:
            raise ValueError("a failed run needs an error message")
        if self.status == "ok" and not self.phases and not self.checkpoints:
            raise ValueError("a successful run needs at least one phase result")
        return self

    def phase(self, phase: Phase | str) -> PhaseResult | None:
        """Return the result of ``phase``, or ``None`` if the run has none."""
        for p in self.phases:
            if p.phase == phase:
                return p
        return None

    def _repr_html_(self) -> str:
        """A compact HTML table for notebooks: one row per phase, with units and source.

        The caption names model, hardware, energy source and status, and the basis of the
        95% intervals (:func:`interval_basis`); a missing figure shows as ``n/a``, never 0.
        """
        w = self.workload
        gpu = self.hardware.accelerator_model
        count = self.hardware.accelerator_count
        where = f"{count} x {gpu}" if gpu else (self.hardware.cpu_model or "")
        caption = (
            f"run {self.run_id}: {self.model.model_id} ({w.kind}, batch {w.batch_size}, "
            f"{w.input_tokens}+{w.output_tokens} tokens) on {where}; energy source "
            f"{self.energy_source}; status {self.status}"
        )
        basis = interval_basis(self)
        if basis is not None:
            caption += f"; 95% intervals {basis.label()}"
        if self.host_bound is not None and self.host_bound.marked:
            caption += f"; {HOST_BOUND_MARK}"
        header = ["phase", "time", "energy", "avg power", "tokens", "energy/token", "throughput"]
        rows = [
            [
                p.phase.value,
                num_cell(p.duration_s, "s"),
                num_cell(p.energy_j, "J"),
                num_cell(p.avg_power_w, "W"),
                str(p.tokens),
                num_cell(p.energy_per_token_j, "J/token"),
                num_cell(p.throughput_tokens_per_s, "tokens/s"),
            ]
            for p in self.phases
        ]
        if not rows and self.checkpoints:
            last = self.checkpoints[-1]
            duration, energy = num_cell(last.duration_s, "s"), num_cell(last.energy_j, "J")
            rows = [["train", duration, energy, "", "", "", ""]]
        return html_table(header, rows, caption)

    def content_hash(self) -> str:
        """SHA-256 of the record's content, excluding how it was submitted.

        Two appends of the same record (a retry, a resubmission) share a hash; the store and
        the submission intake use it to reject duplicates.
        """
        optional = ("serving", "interval", "host_bound", "generation")
        # absent: hashes of older records stay
        excluded = {"submission", *(name for name in optional if getattr(self, name) is None)}
        data = self.model_dump(mode="json", exclude=excluded)
        return sha256_hex(canonical_json(data))


def within_run_basis(run: RunRecord) -> IntervalBasis | None:
    """The basis of a record measured in one run: ``within-run`` over its ``repeats``.

    ``None`` when it carries no interval (a failed run, one repeat, a single serving window).
    """
    with_ci = any(p.energy_per_token_j_ci95 is not None for p in run.phases)
    if run.status == "ok" and run.repeats >= 2 and with_ci:
        return IntervalBasis(kind="within-run", n=run.repeats)
    return None


def interval_basis(run: RunRecord) -> IntervalBasis | None:
    """The basis of ``run``'s intervals: the stored one, else inferred for older records.

    A record without the field whose phases carry a 95% interval was made before it existed,
    by one run's repeats (:func:`within_run_basis`). ``None`` when the record carries no
    interval at all (one repeat, a single serving window, an estimate).
    """
    return run.interval if run.interval is not None else within_run_basis(run)
