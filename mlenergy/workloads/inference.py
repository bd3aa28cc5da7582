"""The inference runner: a batch-size sweep of fixed-length greedy generation, measured.

For each batch size the runner prepares how it generates (the decode backend, ``eager`` or
``compiled-static-cache``, and an MoE model's experts backend: :mod:`mlenergy.workloads.backends`;
compilation and graph capture happen here), warms up, then repeats one request batch
``repeats`` times (:mod:`mlenergy.workloads.point`); the record keeps how it generated and the
time all of that took outside the windows (``RunRecord.generation``).
Each repeat measures two windows of the meter: *prefill* (one forward pass over the prompts,
ending with the first token: the time to first token) and *decode* (the remaining
``output_tokens - 1`` steps, one forward pass each, whose step times are the inter-token
latencies). The *request* phase is their sum.

Windows the counter can resolve: when the meter's counters update in steps (NVML: every few tens
of ms), a window must span ten update periods. The runner times one prefill and one decode
after the warm-up and runs as many passes of each inside one window as reach the meter's
target length (prefill: the same prompts again; decode: the KV cache cropped back to the
prompt between passes), then divides by the passes
(:func:`mlenergy.measure.resolve.measure_resolved`). On the CPU power model (no counter) every
window holds one pass, as before. Every point becomes a
:class:`~mlenergy.records.RunRecord`; a batch size that runs out of memory becomes a failed
record and the sweep goes on.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from mlenergy.errors import UserError
from mlenergy.measure.provenance import collect_hardware, collect_software
from mlenergy.models import load_model
from mlenergy.models.experts import parse_experts_policy
from mlenergy.progress import progress_bar
from mlenergy.records import (
    Hardware,
    IdleBaseline,
    RunRecord,
    Software,
    Workload,
    utc_now,
)
from mlenergy.workloads.backends import parse_generation_policy
from mlenergy.workloads.phases import RepeatWindows, summarise_phases
from mlenergy.workloads.point import measure_point
from mlenergy.workloads.prompts import PromptSet
from mlenergy.workloads.run_spread import mark_one_run

if TYPE_CHECKING:
    from mlenergy.measure import EnergyMeter
    from mlenergy.models import LoadedModel
    from mlenergy.workloads.prompts import PromptSet


@dataclass(frozen=True)
class InferenceSpec:
    """What to run for every model of a sweep.

    Attributes:
        batch_sizes: Batch sizes to sweep (sequences per batch, each >= 1).
        input_tokens: Prompt length in tokens of every sequence (>= 1).
        output_tokens: Generated tokens per sequence (>= 1; EOS ignored).
        repeats: Measured repeats per batch size (>= 1).
        warmup: Unmeasured warm-up generations per batch size (>= 0).
        prompts: Prompt source (``synthetic``, a file, ``hf:<id>``; see ``prompts``).
        seed: Seed of random weights and synthetic prompts.
        dtype: Weight dtype when the runner loads the model itself.
        device: Torch device when the runner loads the model itself.
        idle_s: Seconds of idle power measured once per sweep (0: skip).
        task: Optional workload label recorded on every run.
        tags: Extra tags recorded on every run.
        generation: Decode backend: ``auto`` (compiled on CUDA, eager elsewhere), ``eager``
            or ``compiled-static-cache`` (:mod:`mlenergy.workloads.backends`).
        experts_backend: MoE experts backend: ``auto``, ``measure``, ``eager``,
            ``grouped_mm`` or ``batched_mm`` (:mod:`mlenergy.models.experts`).
    """

    batch_sizes: tuple[int, ...] = (1,)
    input_tokens: int = 64
    output_tokens: int = 64
    repeats: int = 3
    warmup: int = 1
    prompts: str = "synthetic"
    seed: int = 0
    dtype: str = "float32"
    device: str = "cpu"
    idle_s: float = 0.5
    task: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    generation: str = "auto"
    experts_backend: str = "auto"

    def validate(self) -> InferenceSpec:
        """Check every value; return ``self``.

        Raises:
            UserError: Naming the first bad value and its fix.
        """
        if not self.batch_sizes:
            raise UserError("no batch sizes given", "Pass e.g. --batch-sizes 1,4,16")
        for b in self.batch_sizes:
            if not isinstance(b, int) or isinstance(b, bool) or b < 1:
                raise UserError(
                    f"batch size {b!r} is not a positive integer",
                    "Use batch sizes >= 1, e.g. --batch-sizes 1,4,16",
                )
        _check_int("input tokens", self.input_tokens, 1, "--input-tokens 64")
        _check_int("output tokens", self.output_tokens, 1, "--output-tokens 64")
        _check_int("repeats", self.repeats, 1, "--repeats 3")
        _check_int("warm-up runs", self.warmup, 0, "--warmup 1")
        if not (0 <= self.idle_s <= 600):
            raise UserError(f"idle duration {self.idle_s!r} s is out of range", "Use 0 to 600 s")
        parse_generation_policy(self.generation)
        parse_experts_policy(self.experts_backend)
        return self


def check_context_length(config: Any, spec: InferenceSpec, model_id: str) -> None:
    """Refuse sequences longer than the model's ``max_position_embeddings``.

    Raises:
        UserError: If ``input_tokens + output_tokens`` exceeds the model's context.
    """
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    limit = getattr(text_config, "max_position_embeddings", None)
    total = spec.input_tokens + spec.output_tokens
    if isinstance(limit, int) and limit > 0 and total > limit:
        raise UserError(
            f"{spec.input_tokens} input + {spec.output_tokens} output tokens exceed the "
            f"{limit}-token context of {model_id!r}",
            "Use fewer --input-tokens or --output-tokens",
        )


def _check_int(what: str, value: Any, low: int, example: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise UserError(
            f"{what} must be an integer >= {low}, got {value!r}", f"Pass e.g. {example}"
        )


def parse_batch_sizes(text: str) -> tuple[int, ...]:
    """Parse ``"1,4,16"`` into ``(1, 4, 16)``.

    Raises:
        UserError: If an item is not an integer >= 1.
    """
    sizes = []
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        try:
            value = int(item)
        except ValueError:
            raise UserError(
                f"batch size {item!r} is not an integer", "Use e.g. --batch-sizes 1,4,16"
            ) from None
        if value < 1:
            raise UserError(
                f"batch size {value} must be at least 1", "Use e.g. --batch-sizes 1,4,16"
            )
        sizes.append(value)
    if not sizes:
        raise UserError(f"no batch sizes in {text!r}", "Use e.g. --batch-sizes 1,4,16")
    return tuple(dict.fromkeys(sizes))


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an out-of-memory failure (GPU or host)."""
    import torch

    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def _free_memory(device: str) -> None:
    import torch

    gc.collect()
    if device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.empty_cache()


@dataclass
class _Context:
    loaded: LoadedModel
    spec: InferenceSpec
    meter: EnergyMeter
    prompts: PromptSet
    hardware: Hardware
    software: Software
    idle: IdleBaseline | None


def _workload(ctx: _Context, batch_size: int) -> Workload:
    return Workload(
        kind="inference",
        task=ctx.spec.task,
        batch_size=batch_size,
        input_tokens=ctx.spec.input_tokens,
        output_tokens=ctx.spec.output_tokens,
        num_requests=batch_size,
        prompt_source=ctx.prompts.source.label,
        device=ctx.loaded.device,
    )


def _tags(ctx: _Context) -> dict[str, str]:
    import torch

    tags = {
        "runner": "mlenergy.workloads.inference",
        "prompt_tokenizer": ctx.prompts.tokenizer_kind,
        "torch_threads": str(torch.get_num_threads()),
        "seed": str(ctx.spec.seed),
    }
    tags.update(ctx.spec.tags)
    return tags


def _common(ctx: _Context, batch_size: int, started: Any) -> dict[str, Any]:
    """The fields every record of one point shares."""
    spec = ctx.spec
    return {
        "started_at": started,
        "model": ctx.loaded.info,
        "workload": _workload(ctx, batch_size),
        "hardware": ctx.hardware,
        "software": ctx.software,
        "energy_source": ctx.meter.energy_source,
        "scope": ctx.meter.scope,
        "repeats": spec.repeats,
        "warmup_runs": spec.warmup,
        "idle": ctx.idle,
        "tags": _tags(ctx),
    }


def _failed(exc: BaseException, ctx: _Context, batch_size: int, common: dict) -> RunRecord:
    """The ``failed`` record of an out-of-memory point."""
    _free_memory(ctx.loaded.device)
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return RunRecord(
        status="failed",
        error=f"out of memory at batch size {batch_size}: {message}"[:1000],
        ended_at=utc_now(),
        **common,
    )


def run_point(
    ctx: _Context, batch_size: int, on_step: Callable[[], None] | None = None
) -> RunRecord:
    """Measure one batch size; return an ``ok`` record, or a ``failed`` one on out-of-memory."""
    spec = ctx.spec
    start_s = time.time()
    common = _common(ctx, batch_size, utc_now())
    try:
        ids = ctx.prompts.batch(batch_size, spec.input_tokens).to(ctx.loaded.device)
        point = measure_point(
            ctx.loaded, ctx.meter, ids, spec.output_tokens, spec.repeats, spec.warmup, on_step,
            generation=spec.generation, experts_backend=spec.experts_backend,
        )  # fmt: skip
        phases = summarise_phases(point.repeats, batch_size, spec.input_tokens, spec.output_tokens)
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        return _failed(exc, ctx, batch_size, common)
    _free_memory(ctx.loaded.device)
    record = RunRecord(
        status="ok",
        phases=phases,
        ended_at=utc_now(),
        expert_utilisation=point.expert_utilisation,
        power_timeline=ctx.meter.timeline(start_s),
        generation=point.generation,
        **common,
    )
    return mark_one_run(record)


def run_inference_sweep(
    loaded_or_model_id: LoadedModel | str,
    spec: InferenceSpec,
    meter: EnergyMeter,
    store: Any = None,
    progress: bool = True,
    on_record: Callable[[RunRecord], None] | None = None,
    reuse_idle: bool = False,
) -> list[RunRecord]:
    """Run the batch-size sweep of ``spec`` on one model.

    Args:
        loaded_or_model_id: A :class:`~mlenergy.models.LoadedModel`, or a source string for
            :func:`~mlenergy.models.load_model` (loaded with ``spec.dtype``, ``device``, ``seed``).
        spec: What to run.
        meter: The energy meter (its label and scope go on every record).
        store: A :class:`mlenergy.store.RunStore` to append each record to as soon as it is
            made (so an interrupted sweep keeps its finished points), or ``None``.
        progress: Show a progress bar (stderr on a terminal, a widget in a notebook).
        on_record: Called with each record as soon as it is made.
        reuse_idle: Reuse the meter's last idle baseline (``meter.idle``) when it has one,
            instead of measuring idle power again (several models in one command).

    Returns:
        One record per batch size, in order (failed ones for out-of-memory points).

    Raises:
        UserError: For a bad spec, model source or prompt source (before anything runs).
    """
    spec.validate()
    if isinstance(loaded_or_model_id, str):
        loaded = load_model(loaded_or_model_id, spec.dtype, spec.device, spec.seed)
    else:
        loaded = loaded_or_model_id
    check_context_length(loaded.config, spec, loaded.model_id)
    prompts = PromptSet.prepare(spec.prompts, loaded.vocab_size, loaded.tokenizer, spec.seed)
    idle = None
    if spec.idle_s > 0:
        previous = getattr(meter, "idle", None)
        idle = previous if reuse_idle and previous is not None else meter.measure_idle(spec.idle_s)
    ctx = _Context(loaded, spec, meter, prompts, collect_hardware(meter), collect_software(), idle)
    records: list[RunRecord] = []
    total = len(spec.batch_sizes) * (spec.repeats + spec.warmup)
    with progress_bar(total, loaded.model_id, unit="generation", enabled=progress) as bar:
        for batch_size in spec.batch_sizes:
            bar.describe(f"{loaded.model_id} batch {batch_size}")
            steps = _StepCounter(bar)
            record = run_point(ctx, batch_size, on_step=steps)
            bar.advance(max(0, spec.repeats + spec.warmup - steps.count))  # a failed point's rest
            if store is not None:
                store.append([record])
            if on_record is not None:
                on_record(record)
            records.append(record)
            bar.note(done=len(records), failed=sum(r.status != "ok" for r in records))
    return records


@dataclass
class _Arm:
    """One compared configuration of an interleaved run: a model at one batch size."""

    ctx: _Context
    batch_size: int
    ids: Any
    common: dict[str, Any]
    repeats: list[RepeatWindows] = field(default_factory=list)
    utilisation: tuple[float, ...] | None = None
    failed: RunRecord | None = None
    prepared: Any = None
    generation: Any = None


def run_interleaved(
    models: list[tuple[LoadedModel, dict[str, str]]],
    spec: InferenceSpec,
    meter: EnergyMeter,
    store: Any = None,
) -> list[list[RunRecord]]:
    """Measure several models (and batch sizes) with their repeats interleaved: A B A B ...

    Every (model, batch size) is one *arm*. All arms warm up first; then round ``r`` measures
    repeat ``r`` of every arm in turn, so a slow drift of the machine (a neighbour starting,
    a clock throttling) falls on every arm alike and the repeats' spread shows it. Records are
    made and stored once the last round ends.

    Args:
        models: Each model with the tags to record on its runs.
        spec: What to run (its ``tags`` are added to every model's).
        meter: The energy meter.
        store: A store to append the records to, or ``None``.

    Returns:
        Per model, one record per batch size (failed ones for out-of-memory arms).
    """
    spec.validate()
    idle = meter.measure_idle(spec.idle_s) if spec.idle_s > 0 else None
    hardware, software = collect_hardware(meter), collect_software()
    arms: list[list[_Arm]] = []
    for loaded, tags in models:
        check_context_length(loaded.config, spec, loaded.model_id)
        prompts = PromptSet.prepare(spec.prompts, loaded.vocab_size, loaded.tokenizer, spec.seed)
        ctx = _Context(
            loaded, replace(spec, tags={**spec.tags, **tags}), meter, prompts, hardware,
            software, idle,
        )  # fmt: skip
        arms.append(
            [
                _Arm(ctx, b, prompts.batch(b, spec.input_tokens).to(loaded.device),
                     _common(ctx, b, utc_now()))
                for b in spec.batch_sizes
            ]
        )  # fmt: skip
    flat = [arm for model_arms in arms for arm in model_arms]
    for arm in flat:
        _arm_step(arm, spec, 0, spec.warmup)
    for _ in range(spec.repeats):
        for arm in flat:
            _arm_step(arm, spec, 1, 0)
    out: list[list[RunRecord]] = []
    for model_arms in arms:
        records = [_arm_record(arm, spec) for arm in model_arms]
        if store is not None:
            store.append(records)
        out.append(records)
    return out


def _arm_step(arm: _Arm, spec: InferenceSpec, repeats: int, warmup: int) -> None:
    """Warm an arm up or measure one more repeat of it (a failed arm is left alone)."""
    if arm.failed is not None:
        return
    try:
        point = measure_point(
            arm.ctx.loaded, arm.ctx.meter, arm.ids, spec.output_tokens, repeats, warmup,
            generation=spec.generation, experts_backend=spec.experts_backend,
            prepared=arm.prepared,
        )  # fmt: skip
    except Exception as exc:
        if not is_out_of_memory(exc):
            raise
        arm.failed = _failed(exc, arm.ctx, arm.batch_size, arm.common)
        return
    arm.repeats += point.repeats
    if arm.prepared is None:  # the first call prepared it: its warm-up time is the record's
        arm.prepared, arm.generation = point.prepared, point.generation
    if warmup and point.expert_utilisation is not None:
        arm.utilisation = point.expert_utilisation


def _arm_record(arm: _Arm, spec: InferenceSpec) -> RunRecord:
    if arm.failed is not None:
        return arm.failed
    phases = summarise_phases(arm.repeats, arm.batch_size, spec.input_tokens, spec.output_tokens)
    tags = {**arm.common["tags"], "repeat_order": "interleaved"}
    record = RunRecord(
        status="ok",
        phases=phases,
        ended_at=utc_now(),
        expert_utilisation=arm.utilisation,
        generation=arm.generation,
        **{**arm.common, "tags": tags},
    )
    return mark_one_run(record)


@dataclass
class _StepCounter:
    """Advances a progress bar by one generation and counts how often it did."""

    bar: Any
    count: int = 0

    def __call__(self) -> None:
        self.count += 1
        self.bar.advance()
