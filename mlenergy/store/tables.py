"""Flat, typed table rows for records: the columns DuckDB, the leaderboard and notebooks query.

One run becomes one row of :data:`RUN_COLUMNS`; one quality result one row of
:data:`QUALITY_COLUMNS`. Units are in the column names (joules, seconds, watts, tokens); a
figure the record lacks is ``None`` (NaN in pandas), never 0. ``avg_output_tokens`` is the exact
mean output length where the record has one (``output_tokens`` is then its rounding); segments
written before a column existed read it as null.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pydantic import ValidationError

from mlenergy.errors import StoreError, first_line
from mlenergy.records import ModelInfo, PhaseResult, QualityResult, RunRecord, canonical_json
from mlenergy.records.quality import ModelRef

PHASES: tuple[str, ...] = ("prefill", "decode", "request", "train")
"""Phases that get their own group of flat columns, in column order."""

_PHASE_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("duration_s", pa.float64()),
    ("energy_j", pa.float64()),
    ("avg_power_w", pa.float64()),
    ("tokens", pa.int64()),
    ("energy_per_token_j", pa.float64()),
    ("throughput_tokens_per_s", pa.float64()),
    ("energy_j_ci95_low", pa.float64()),
    ("energy_j_ci95_high", pa.float64()),
)

_TS = pa.timestamp("us", tz="UTC")

_MODEL_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("model_id", pa.string()),
    ("config_fingerprint", pa.string()),
    ("architecture", pa.string()),
    ("is_moe", pa.bool_()),
    ("num_experts", pa.int64()),
    ("experts_per_token", pa.int64()),
    ("total_params", pa.int64()),
    ("active_params", pa.int64()),
    ("dtype", pa.string()),
    ("weights", pa.string()),
)
"""Columns describing the model, shared by the run and quality tables."""

_RUN_BASE: tuple[tuple[str, pa.DataType], ...] = (
    ("run_id", pa.string()),
    ("created_at", _TS),
    ("status", pa.string()),
    ("error", pa.string()),
    ("energy_source", pa.string()),
    ("source_kind", pa.string()),
    *_MODEL_FIELDS,
    ("workload_kind", pa.string()),
    ("task", pa.string()),
    ("batch_size", pa.int64()),
    ("avg_batch_size", pa.float64()),
    ("max_num_seqs", pa.int64()),
    ("input_tokens", pa.int64()),
    ("output_tokens", pa.int64()),
    ("avg_output_tokens", pa.float64()),
    ("num_requests", pa.int64()),
    ("device", pa.string()),
    ("tensor_parallel", pa.int64()),
    ("expert_parallel", pa.int64()),
    ("data_parallel", pa.int64()),
    ("pipeline_parallel", pa.int64()),
    ("accelerator_model", pa.string()),
    ("accelerator_count", pa.int64()),
    ("cpu_model", pa.string()),
    ("repeats", pa.int64()),
    ("submitter", pa.string()),
    ("unverified", pa.bool_()),
    ("idle_power_w", pa.float64()),
    ("ttft_s", pa.float64()),
    ("itl_p50_s", pa.float64()),
    ("itl_p90_s", pa.float64()),
    ("itl_p99_s", pa.float64()),
    ("final_val_perplexity", pa.float64()),
    ("train_energy_j_total", pa.float64()),
    ("content_hash", pa.string()),
    ("tags_json", pa.string()),
)

RUN_FIELDS: tuple[tuple[str, pa.DataType], ...] = _RUN_BASE + tuple(
    (f"{p}_{name}", typ) for p in PHASES for name, typ in _PHASE_FIELDS
)
RUN_COLUMNS: tuple[str, ...] = tuple(name for name, _ in RUN_FIELDS)
"""The flat run columns, in order (the team contract's exact names)."""

QUALITY_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("quality_id", pa.string()),
    ("created_at", _TS),
    *_MODEL_FIELDS,
    ("task", pa.string()),
    ("metric", pa.string()),
    ("value", pa.float64()),
    ("stderr", pa.float64()),
    ("higher_is_better", pa.bool_()),
    ("num_tokens", pa.int64()),
    ("num_samples", pa.int64()),
    ("dataset", pa.string()),
    ("linked_run_ids_json", pa.string()),
    ("submitter", pa.string()),
    ("content_hash", pa.string()),
    ("tags_json", pa.string()),
)
QUALITY_COLUMNS: tuple[str, ...] = tuple(name for name, _ in QUALITY_FIELDS)
"""The flat quality columns, in order."""

RECORD_JSON = "record_json"
"""Segment column holding the full record as JSON (the source of truth; flat columns derive)."""

RUN_SCHEMA = pa.schema([*RUN_FIELDS, (RECORD_JSON, pa.string())])
"""Arrow schema of a run segment file."""
QUALITY_SCHEMA = pa.schema([*QUALITY_FIELDS, (RECORD_JSON, pa.string())])
"""Arrow schema of a quality segment file."""


def _phase_columns(prefix: str, phase: PhaseResult | None) -> dict[str, Any]:
    if phase is None:
        return {f"{prefix}_{name}": None for name, _ in _PHASE_FIELDS}
    ci = phase.energy_j_repeats.ci95 if phase.energy_j_repeats is not None else None
    return {
        f"{prefix}_duration_s": phase.duration_s,
        f"{prefix}_energy_j": phase.energy_j,
        f"{prefix}_avg_power_w": phase.avg_power_w,
        f"{prefix}_tokens": phase.tokens,
        f"{prefix}_energy_per_token_j": phase.energy_per_token_j,
        f"{prefix}_throughput_tokens_per_s": phase.throughput_tokens_per_s,
        f"{prefix}_energy_j_ci95_low": ci.low if ci is not None else None,
        f"{prefix}_energy_j_ci95_high": ci.high if ci is not None else None,
    }


def _first(phases: list[PhaseResult | None], attr: str) -> float | None:
    for phase in phases:
        if phase is not None and getattr(phase, attr) is not None:
            return getattr(phase, attr)
    return None


def model_columns(model: ModelInfo | ModelRef) -> dict[str, Any]:
    """The model-description columns of one model (the same in the run and quality tables).

    :mod:`mlenergy.analysis.tables` reuses them for its study frames.
    """
    return {name: getattr(model, name) for name, _ in _MODEL_FIELDS}


def flatten_run(run: RunRecord, content_hash: str | None = None) -> dict[str, Any]:
    """Return the flat columns of one run (see :data:`RUN_COLUMNS`).

    Latency columns come from the request phase (time to first token) and the decode phase
    (inter-token latency), falling back to any phase that has them. ``final_val_perplexity``
    is the last checkpoint's validation perplexity; ``train_energy_j_total`` the train phase's
    energy, else the last checkpoint's cumulative energy.

    Args:
        run: The record.
        content_hash: Its precomputed :meth:`RunRecord.content_hash` (computed when omitted).

    Returns:
        A dict keyed by column name, ``None`` where the record lacks the figure.
    """
    by_phase = {p.phase.value: p for p in run.phases}
    model, work, hw = run.model, run.workload, run.hardware
    request, decode = by_phase.get("request"), by_phase.get("decode")
    others = list(by_phase.values())
    val_ppl = None
    train_total = None
    for ckpt in run.checkpoints:
        if ckpt.val_perplexity is not None:
            val_ppl = ckpt.val_perplexity
        if ckpt.energy_j is not None:
            train_total = ckpt.energy_j
    train = by_phase.get("train")
    if train is not None and train.energy_j is not None:
        train_total = train.energy_j
    row: dict[str, Any] = {
        "run_id": run.run_id,
        "created_at": run.created_at,
        "status": run.status,
        "error": run.error,
        "energy_source": run.energy_source,
        "source_kind": run.energy_source.split(":", 1)[0],
        **model_columns(model),
        "workload_kind": work.kind,
        "task": work.task,
        "batch_size": work.batch_size,
        "avg_batch_size": work.avg_batch_size,
        "max_num_seqs": work.max_num_seqs,
        "input_tokens": work.input_tokens,
        "output_tokens": work.output_tokens,
        "avg_output_tokens": work.avg_output_tokens,
        "num_requests": work.num_requests,
        "device": work.device,
        "tensor_parallel": work.tensor_parallel,
        "expert_parallel": work.expert_parallel,
        "data_parallel": work.data_parallel,
        "pipeline_parallel": work.pipeline_parallel,
        "accelerator_model": hw.accelerator_model,
        "accelerator_count": hw.accelerator_count,
        "cpu_model": hw.cpu_model,
        "repeats": run.repeats,
        "submitter": run.submission.submitter if run.submission is not None else None,
        "unverified": bool(run.submission is not None and run.submission.unverified),
        "idle_power_w": run.idle.avg_power_w if run.idle is not None else None,
        "ttft_s": _first([request, *others], "ttft_s"),
        "itl_p50_s": _first([decode, request, *others], "itl_p50_s"),
        "itl_p90_s": _first([decode, request, *others], "itl_p90_s"),
        "itl_p99_s": _first([decode, request, *others], "itl_p99_s"),
        "final_val_perplexity": val_ppl,
        "train_energy_j_total": train_total,
        "content_hash": content_hash if content_hash is not None else run.content_hash(),
        "tags_json": canonical_json(run.tags),
    }
    for p in PHASES:
        row.update(_phase_columns(p, by_phase.get(p)))
    return row


def flatten_quality(result: QualityResult, content_hash: str | None = None) -> dict[str, Any]:
    """Return the flat columns of one quality result (see :data:`QUALITY_COLUMNS`).

    Args:
        result: The record.
        content_hash: Its precomputed :meth:`QualityResult.content_hash` (computed if omitted).
    """
    model = result.model
    return {
        "quality_id": result.quality_id,
        "created_at": result.created_at,
        **model_columns(model),
        "task": result.task,
        "metric": result.metric,
        "value": result.value,
        "stderr": result.stderr,
        "higher_is_better": result.higher_is_better,
        "num_tokens": result.num_tokens,
        "num_samples": result.num_samples,
        "dataset": result.dataset,
        "linked_run_ids_json": canonical_json(list(result.linked_run_ids)),
        "submitter": result.submission.submitter if result.submission else None,
        "content_hash": content_hash if content_hash is not None else result.content_hash(),
        "tags_json": canonical_json(result.tags),
    }


def runs_table(runs: list[RunRecord], hashes: list[str] | None = None) -> pa.Table:
    """Build a run segment table (flat columns plus the record JSON) with :data:`RUN_SCHEMA`."""
    hashes = hashes if hashes is not None else [r.content_hash() for r in runs]
    rows = [flatten_run(r, h) for r, h in zip(runs, hashes, strict=True)]
    for row, run in zip(rows, runs, strict=True):
        row[RECORD_JSON] = run.model_dump_json()
    return pa.Table.from_pylist(rows, schema=RUN_SCHEMA)


def quality_table(results: list[QualityResult], hashes: list[str] | None = None) -> pa.Table:
    """Build a quality segment table with :data:`QUALITY_SCHEMA`."""
    hashes = hashes if hashes is not None else [q.content_hash() for q in results]
    rows = [flatten_quality(q, h) for q, h in zip(results, hashes, strict=True)]
    for row, result in zip(rows, results, strict=True):
        row[RECORD_JSON] = result.model_dump_json()
    return pa.Table.from_pylist(rows, schema=QUALITY_SCHEMA)


def segment_table(
    kind: str, records: Sequence[RunRecord | QualityResult], hashes: list[str] | None = None
) -> pa.Table:
    """The segment table of one kind of records: :func:`runs_table` or :func:`quality_table`.

    Raises:
        TypeError: A record is not of the segment's kind.
    """
    runs = [r for r in records if isinstance(r, RunRecord)]
    quality = [q for q in records if isinstance(q, QualityResult)]
    if kind == "runs" and len(runs) == len(records):
        return runs_table(runs, hashes)
    if kind == "quality" and len(quality) == len(records):
        return quality_table(quality, hashes)
    raise TypeError(f"a {kind} segment holds only {kind} records")


def rebuild_table(kind: str, table: pa.Table) -> pa.Table:
    """Recompute every flat column of a segment table from its stored record JSON.

    Args:
        kind: ``runs`` or ``quality``.
        table: The segment's rows (``record_json`` and ``content_hash`` are kept).

    Raises:
        StoreError: A stored record no longer validates.
    """
    model: type[RunRecord] | type[QualityResult] = RunRecord if kind == "runs" else QualityResult
    records: list[RunRecord | QualityResult] = []
    for text in table.column(RECORD_JSON).to_pylist():
        try:
            records.append(model.model_validate_json(text))
        except ValidationError as exc:
            raise StoreError(
                f"a stored {kind} record fails validation ({first_line(exc)})",
                "restore the store from a backup, or compact without --rebuild",
            ) from exc
    hashes = table.column("content_hash").to_pylist()
    return segment_table(kind, records, hashes)
