"""The bench workflow: validate every input, open the store, run each model's sweep, report.

:func:`run_bench` is what ``mlenergy bench`` calls, and what a notebook calls for the same job.
Every input is checked before anything runs or the store is touched: bad batch sizes or token
counts, unknown presets, missing or malformed config files, hub ids that cannot be resolved,
an unwritable data directory or a damaged store file each raise
:class:`~mlenergy.errors.UserError`. Each finished point is appended to the store at once, so a
Ctrl-C keeps it: :class:`BenchInterrupted` then says what was stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mlenergy.errors import Interrupted, UserError
from mlenergy.measure import measured_gpus, meter_for
from mlenergy.models import load_model
from mlenergy.models.loading import canonical_dtype, check_buildable, check_device, resolve_source
from mlenergy.records import HOST_BOUND_MARK
from mlenergy.store.preflight import open_store_for_append
from mlenergy.workloads.backends import check_generation
from mlenergy.workloads.inference import (
    InferenceSpec,
    check_context_length,
    run_inference_sweep,
    run_interleaved,
)
from mlenergy.workloads.prompts import PromptSource, load_texts

if TYPE_CHECKING:
    from mlenergy.models import ResolvedSource
    from mlenergy.records import RunRecord
    from mlenergy.store import AppendResult, RunStore

_SHOWN_IDS = 5
"""Run ids listed in the interruption message before the rest are counted."""


@dataclass(frozen=True)
class BenchOptions:
    """How to measure, beyond the sweep itself.

    Attributes:
        cpu_tdp_w: CPU full-load power in watts for the CPU power model (no counter), or
            ``None`` for the model's default.
        threads: Torch CPU threads, or ``None`` for torch's choice.
        power_timeline: Record a downsampled power trace on each run.
        progress: Draw a progress bar (terminal or notebook).
        gpu_indices: GPUs to measure instead of those the model occupies (``[]``: none);
            ``None`` applies the scope rule of :mod:`mlenergy.measure.scope`.
        interleave: Measure the repeats of every model and batch size in turn (A B A B ...)
            so the machine's drift falls on all alike; every model is loaded at once and the
            records are stored when the last round ends (a Ctrl-C keeps none of them).
    """

    cpu_tdp_w: float | None = None
    threads: int | None = None
    power_timeline: bool = False
    progress: bool = True
    gpu_indices: tuple[int, ...] | list[int] | None = None
    interleave: bool = False

    def validate(self) -> BenchOptions:
        """Check every value; return ``self``.

        Raises:
            UserError: Naming the bad option.
        """
        if self.cpu_tdp_w is not None and not self.cpu_tdp_w > 0:
            raise UserError(
                f"--cpu-tdp-w {self.cpu_tdp_w} must be positive", "Pass e.g. --cpu-tdp-w 65"
            )
        if self.threads is not None and self.threads < 1:
            raise UserError(f"--threads {self.threads} must be at least 1", "Pass e.g. --threads 1")
        if self.gpu_indices is not None:
            measured_gpus(None, self.gpu_indices)
        return self


@dataclass
class _RecordingStore:
    """A store that remembers the ids it appended (what an interruption reports)."""

    store: RunStore
    stored_ids: list[str] = field(default_factory=list)

    def append(self, records: Iterable[RunRecord]) -> AppendResult:
        result = self.store.append(records)
        self.stored_ids += result.added_ids
        return result


class BenchInterrupted(Interrupted):
    """Ctrl-C during a bench: the points finished so far are stored; the message says which.

    Args:
        stored_ids: Run ids appended before the interruption.
        data_dir: The store folder, or ``None`` when nothing was being stored.
    """

    def __init__(self, stored_ids: list[str], data_dir: Path | None) -> None:
        self.stored_ids = list(stored_ids)
        self.data_dir = data_dir
        super().__init__(_interruption_summary(self.stored_ids, data_dir))


def _interruption_summary(stored_ids: list[str], data_dir: Path | None) -> str:
    if data_dir is None:
        return "nothing was stored (--no-store)"
    if not stored_ids:
        return f"no point had finished; nothing was added to the store in {data_dir}"
    shown = ", ".join(stored_ids[:_SHOWN_IDS])
    more = len(stored_ids) - _SHOWN_IDS
    if more > 0:
        shown += f" and {more} more"
    return (
        f"{len(stored_ids)} finished point(s) stored in {data_dir} ({shown}); "
        f"list them with `mlenergy runs list --data-dir {data_dir}`"
    )


def preflight(
    models: list[str], spec: InferenceSpec, data_dir: Path | None
) -> tuple[list[ResolvedSource], RunStore | None]:
    """Check every model source, the prompts and the store before anything is measured.

    The store is probed before any config is read or model built: an unwritable ``--data-dir``
    must not cost a whole measurement.

    Returns:
        The resolved sources (duplicates dropped, order kept) and the opened store (``None``
        when ``data_dir`` is ``None``).

    Raises:
        UserError: For the first bad input.
    """
    if not models:
        raise UserError("no --model given", "Pass e.g. --model preset:tiny-dense")
    spec.validate()
    canonical_dtype(spec.dtype)
    check_device(spec.device)
    prompt_source = PromptSource.parse(spec.prompts)
    store = open_store_for_append(data_dir) if data_dir is not None else None
    resolved = [resolve_source(m) for m in dict.fromkeys(models)]
    for source in resolved:
        check_context_length(source.config, spec, source.model_id)
        check_generation(source.config, spec.generation, source.model_id)
        if not source.pretrained:
            check_buildable(source.config, spec.dtype, source.model_id)
    if prompt_source.kind != "synthetic":
        load_texts(prompt_source, limit=1)  # unreadable or text-less prompts fail here
    return resolved, store


def run_bench(
    models: list[str],
    spec: InferenceSpec,
    options: BenchOptions | None = None,
    *,
    data_dir: Path | None = None,
    on_record: Callable[[RunRecord], None] | None = None,
) -> list[RunRecord]:
    """Measure every model's batch-size sweep; append each point to the store as it finishes.

    Each model is measured over the GPUs it occupies (``options.gpu_indices`` overrides), by
    the scope rule of :mod:`mlenergy.measure.scope`; a model on the CPU charges no GPU.

    Args:
        models: Model sources (``preset:<name>``, hub ids, folders, config.json paths).
        spec: The sweep (batch sizes, lengths, repeats...).
        options: Meter and torch settings (default: :class:`BenchOptions`).
        data_dir: Store folder, or ``None`` to store nothing.
        on_record: Called with each record as soon as it is made (and stored).

    Returns:
        One record per model and batch size, in order.

    Raises:
        UserError: For bad input, before anything runs or the store is touched.
        BenchInterrupted: On Ctrl-C (instead of ``KeyboardInterrupt``); it names the points
            already stored.
    """
    import torch

    opts = (options or BenchOptions()).validate()
    resolved, store = preflight(models, spec, data_dir)
    if opts.threads is not None:
        torch.set_num_threads(opts.threads)
    recording = _RecordingStore(store) if store is not None else None
    records: list[RunRecord] = []
    meter: Any = None
    if opts.interleave:
        return _run_interleaved(resolved, spec, opts, recording, on_record, data_dir)
    try:
        for source in resolved:
            loaded = load_model(source, spec.dtype, spec.device, spec.seed)
            meter = _meter_for_model(meter, loaded, opts)
            records += run_inference_sweep(
                loaded,
                spec,
                meter,
                store=recording,
                progress=opts.progress,
                on_record=on_record,
                reuse_idle=True,
            )
            del loaded
    except KeyboardInterrupt as exc:
        raise BenchInterrupted(recording.stored_ids if recording else [], data_dir) from exc
    finally:
        close = getattr(meter, "close", None)
        if callable(close):
            close()
    return records


def _run_interleaved(
    resolved: list[Any],
    spec: InferenceSpec,
    opts: BenchOptions,
    recording: _RecordingStore | None,
    on_record: Callable[[RunRecord], None] | None,
    data_dir: Path | None,
) -> list[RunRecord]:
    """Every model loaded at once, repeats interleaved over models and batch sizes."""
    loaded = [load_model(source, spec.dtype, spec.device, spec.seed) for source in resolved]
    gpus = sorted({i for m in loaded for i in measured_gpus(m.model, opts.gpu_indices)})
    meter = meter_for(None, gpus, cpu_tdp_w=opts.cpu_tdp_w)
    try:
        per_model = run_interleaved([(m, {}) for m in loaded], spec, meter, store=recording)
    except KeyboardInterrupt as exc:
        raise BenchInterrupted([], data_dir) from exc
    finally:
        meter.close()
    records = [r for model_records in per_model for r in model_records]
    if on_record is not None:
        for r in records:
            on_record(r)
    return records


def _meter_for_model(previous: Any, loaded: Any, opts: BenchOptions) -> Any:
    """The meter for ``loaded``: ``previous`` when it covers the same GPUs, else a new one."""
    gpus = measured_gpus(loaded.model, opts.gpu_indices)
    if previous is not None and list(previous.gpu_indices) == gpus:
        return previous
    if previous is not None:
        previous.close()
    return meter_for(
        loaded.model, gpus, cpu_tdp_w=opts.cpu_tdp_w, power_timeline=opts.power_timeline
    )


def interval_text(phase: Any) -> str:
    """The half-width of a phase's 95% interval over its energy per token, as text.

    ``±4%``; ``±35% !`` when wider than ±20%; ``-`` without an interval. What spread it comes
    from is the record's ``interval`` (:func:`mlenergy.records.interval_basis`).
    """
    ci = getattr(phase, "energy_per_token_j_ci95", None)
    mean = getattr(phase, "energy_per_token_j", None)
    if ci is None or not mean:
        return "-"
    half = (ci.high - ci.low) / 2.0 / abs(mean)
    return f"±{half:.0%}" + (" !" if phase.wide_interval else "")


def status_text(record: Any) -> str:
    """``ok``, ``ok, host-bound`` (the host-bound rule marks it) or ``failed: <why>``."""
    if record.status != "ok":
        return f"failed: {(record.error or '')[:40]}"
    marked = record.host_bound is not None and record.host_bound.marked
    return f"ok, {HOST_BOUND_MARK}" if marked else "ok"
