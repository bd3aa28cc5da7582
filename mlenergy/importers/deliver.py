"""What every importer does with its records: describe them, store them or submit them.

Records are deterministic (ids and timestamps derive from the input's content), so importing
the same file again adds nothing: records whose id or content hash the store (or the pending
submission queue) already holds are skipped before anything is written. ``--submit`` sends the
new records through :class:`~mlenergy.store.submissions.SubmissionQueue`, exactly the
validation and review queue of ``mlenergy submit``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from mlenergy.errors import UserError, ValidationFailed
from mlenergy.records import QualityResult, RunRecord
from mlenergy.store import RunStore
from mlenergy.store.gpus import gpu_lookup
from mlenergy.store.rules import check_run
from mlenergy.store.submissions import SubmissionQueue
from mlenergy.store.validation import terminal_text

Record = RunRecord | QualityResult


@dataclass(frozen=True)
class ImportBatch:
    """The records made from one input (a run folder, a results file, a log).

    Attributes:
        fmt: The format name (``mlenergy-benchmark``, ``lm-eval``, ...).
        source: The file or folder read.
        records: The records made, in input order.
        notes: What was assumed or left out, said once for the input.
    """

    fmt: str
    source: Path
    records: tuple[Record, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeliveryResult:
    """What an import did.

    Attributes:
        added: Records written to the store (0 with ``--submit``).
        skipped: Records already stored or pending (by id or content hash).
        queued_id: The submission id when the records were queued.
        queued: Records queued for review.
        skipped_ids: Ids of the records skipped because the store already held them.
    """

    added: int = 0
    skipped: int = 0
    queued_id: str | None = None
    queued: int = 0
    skipped_ids: tuple[str, ...] = field(default=())


def _fmt(value: float | None, unit: str) -> str:
    return f"{value:.4g} {unit}" if value is not None else f"no {unit} figure"


def describe(record: Record) -> str:
    """One line for a record: model, hardware, configuration, headline figure, source."""
    model = record.model
    if isinstance(record, QualityResult):
        err = f" ± {record.stderr:.4g}" if record.stderr is not None else ""
        return (
            f"quality {model.model_id} [{model.dtype}] | {record.task} {record.metric} = "
            f"{record.value:.4g}{err} | n={record.num_samples if record.num_samples else '?'} "
            f"| source {record.tags.get('origin', 'imported')}"
        )
    hw = record.hardware
    work = record.workload
    hardware = (
        f"{hw.accelerator_count} x {hw.accelerator_model}"
        if hw.accelerator_count
        else (hw.cpu_model or "CPU")
    )
    parallel = f"tp{work.tensor_parallel}"
    if work.expert_parallel > 1:
        parallel += f" ep{work.expert_parallel}"
    if work.data_parallel > 1:
        parallel += f" dp{work.data_parallel}"
    batch = f"max_num_seqs={work.max_num_seqs}" if work.max_num_seqs else f"batch={work.batch_size}"
    figures = []
    for phase in record.phases:
        if phase.energy_per_token_j is not None:
            figures.append(f"{phase.phase.value} {_fmt(phase.energy_per_token_j, 'J/token')}")
        else:
            figures.append(f"{phase.phase.value} {_fmt(phase.energy_j, 'J')}")
    return (
        f"run {model.model_id} [{model.dtype}] | {hardware} | {work.task or work.kind} "
        f"{parallel} {batch} | {'; '.join(figures)} | {record.energy_source}"
    )


def _record_id(record: Record) -> str:
    return record.run_id if isinstance(record, RunRecord) else record.quality_id


def unique_records(batches: Sequence[ImportBatch]) -> list[Record]:
    """Every record of the batches, dropping repeats (same id or content) within the import."""
    seen: set[str] = set()
    out: list[Record] = []
    for batch in batches:
        for record in batch.records:
            keys = {_record_id(record), record.content_hash()}
            if keys & seen:
                continue
            seen |= keys
            out.append(record)
    return out


def _stored_keys(data_dir: Path) -> set[str]:
    """Ids and content hashes of every stored record (runs and quality)."""
    store = RunStore(data_dir)
    keys = set(store.run_hashes()) | store.content_hashes()
    if store.results_dir.is_dir():
        frame = store.query("SELECT quality_id FROM quality")
        keys |= set(frame["quality_id"].astype(str))
    return keys


def deliver(
    batches: Sequence[ImportBatch],
    data_dir: Path,
    *,
    submit: bool = False,
    submitter: str | None = None,
    bundle: Path | None = None,
    echo: Callable[[str], None] = print,
) -> DeliveryResult:
    """Print what was read and made, then append the new records or queue them for review.

    Args:
        batches: The parsed inputs (all read before anything is written).
        data_dir: The store folder.
        submit: Queue the records as a submission instead of appending them.
        submitter: The submitter's name (required with ``submit``).
        bundle: Write the new records to this JSON Lines file (for ``mlenergy submit``)
            instead of the store; records already in it are skipped.
        echo: Where lines go (``typer.echo`` in the CLI).

    Returns:
        Counts of what was added, skipped or queued.

    Raises:
        UserError: No submitter with ``submit``, a submission without a run record, or the
            store cannot be written.
        ValidationFailed: The submission failed validation (nothing queued).
    """
    if submit and not (submitter or "").strip():
        raise UserError("--submit needs --submitter NAME", "pass your name or lab")
    if submit and bundle is not None:
        raise UserError("--submit and --bundle exclude each other", "pass one of them")
    for batch in batches:
        echo(f"read {batch.source} ({batch.fmt}): {len(batch.records)} record(s)")
        for note in batch.notes:
            echo(f"  note: {note}")
        for record in batch.records:
            echo(f"  {describe(record)}")
    records = unique_records(batches)
    if bundle is not None:
        return write_bundle(records, bundle, echo)
    if submit:
        return _submit(records, data_dir, submitter or "", batches, echo)
    return _append(records, data_dir, echo)


def _append(records: list[Record], data_dir: Path, echo: Callable[[str], None]) -> DeliveryResult:
    """Append the records the store does not hold yet (by id or content hash)."""
    store = RunStore(data_dir)
    store.ensure_writable()
    known = _stored_keys(data_dir)
    new = [r for r in records if not ({_record_id(r), r.content_hash()} & known)]
    new_ids = {_record_id(r) for r in new}
    skipped = tuple(_record_id(r) for r in records if _record_id(r) not in new_ids)
    result = store.append(new) if new else None
    added = result.added if result is not None else 0
    skipped_n = len(skipped) + (result.duplicates if result is not None else 0)
    echo(f"added {added} record(s) to {store.results_dir}; {skipped_n} already stored")
    _say_joins(store, records, echo)
    _say_submission_problems(records, data_dir, echo)
    return DeliveryResult(added=added, skipped=skipped_n, skipped_ids=skipped)


def _bundle_keys(bundle: Path) -> set[str]:
    """Ids and content hashes of the records already in a bundle file."""
    keys: set[str] = set()
    if not bundle.exists():
        return keys
    try:
        lines = bundle.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read bundle {bundle} ({type(exc).__name__})") from None
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            model = QualityResult if obj.get("record_type") == "quality" else RunRecord
            record = model.model_validate(obj)
        except (ValueError, AttributeError, ValidationError):
            raise UserError(
                f"{bundle}: line {n}: not a run or quality record",
                "write bundles with --bundle only, or pass a new file",
            ) from None
        keys |= {_record_id(record), record.content_hash()}
    return keys


def write_bundle(
    records: list[Record], bundle: Path, echo: Callable[[str], None] = print
) -> DeliveryResult:
    """Append the records to a JSON Lines bundle (atomically), skipping those already in it.

    Energy runs and lm-eval quality of the same model go in one bundle, which ``mlenergy
    submit BUNDLE --submitter NAME`` then validates and queues as one submission.
    """
    keys = _bundle_keys(bundle)
    new = [r for r in records if not ({_record_id(r), r.content_hash()} & keys)]
    old = bundle.read_text(encoding="utf-8") if bundle.exists() else ""
    if old and not old.endswith("\n"):
        old += "\n"
    text = old + "".join(r.model_dump_json() + "\n" for r in new)
    tmp = bundle.with_name(f".{bundle.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, bundle)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(
            f"cannot write bundle {bundle} ({exc.strerror or exc})", "pass a writable path"
        ) from None
    skipped = len(records) - len(new)
    echo(
        f"wrote {len(new)} record(s) to {bundle} ({skipped} already in it); submit it with "
        f"`mlenergy submit {bundle} --submitter NAME`"
    )
    return DeliveryResult(skipped=skipped)


def _say_submission_problems(
    records: list[Record], data_dir: Path, echo: Callable[[str], None]
) -> None:
    """Say what the submission rules would object to, so a later ``--submit`` is no surprise.

    The records are stored all the same: the rules judge community submissions. The GPUs are
    looked up as ``mlenergy submit`` does (the catalog, then the store's admitted GPUs).
    """
    lookup = gpu_lookup(SubmissionQueue(data_dir).root)
    for record in records:
        if isinstance(record, RunRecord):
            for problem in check_run(record, f"run {record.run_id[:12]}", lookup):
                echo(f"  submission rules: {problem}")


def _say_joins(store, records: list[Record], echo: Callable[[str], None]) -> None:
    """Say, per model, how many stored energy runs its quality results join.

    Quality and energy join on the model id and config fingerprint (the leaderboard's
    ``same model`` link), so an lm-eval import meets the energy runs of the same model.
    """
    wanted = sorted(
        {
            (q.model.model_id, q.model.config_fingerprint)
            for q in records
            if isinstance(q, QualityResult)
        }
    )
    if not wanted:
        return
    frame = store.query(
        "SELECT model_id, config_fingerprint, count(*) AS n FROM runs "
        "WHERE status = 'ok' GROUP BY 1, 2"
    )
    counts = {(m, f): int(n) for m, f, n in frame.itertuples(index=False)}
    for model_id, fingerprint in wanted:
        n = counts.get((model_id, fingerprint), 0)
        echo(
            f"quality of {model_id} joins {n} stored energy run(s) of the same model "
            f"(model id + config fingerprint {fingerprint})"
        )


def _submit(
    records: list[Record],
    data_dir: Path,
    submitter: str,
    batches: Sequence[ImportBatch],
    echo: Callable[[str], None],
) -> DeliveryResult:
    """Queue the new records through the same validation and queue as ``mlenergy submit``."""
    queue = SubmissionQueue(data_dir)  # the GPU lookup of `mlenergy submit`
    known = _stored_keys(data_dir) | queue.pending_hashes()
    for entry in queue.list("pending"):
        known |= {r.run_id for r in entry.submission.runs}
        known |= {q.quality_id for q in entry.submission.quality}
    new = [r for r in records if not ({_record_id(r), r.content_hash()} & known)]
    skipped = len(records) - len(new)
    if not new:
        echo(f"nothing to submit: all {skipped} record(s) are already stored or pending")
        return DeliveryResult(skipped=skipped)
    if not any(isinstance(r, RunRecord) for r in new):
        raise UserError(
            "a submission needs at least one run record, and this import made only quality results",
            "write them and their energy runs into one file with --bundle FILE on each "
            "import, then `mlenergy submit FILE --submitter NAME`",
        )
    bundle = "\n".join(r.model_dump_json() for r in new).encode("utf-8")
    source = ", ".join(sorted({b.source.name for b in batches}))[:200]
    try:
        entry = queue.submit(bundle, submitter=submitter.strip(), source=source)
    except ValidationFailed as exc:
        if len(new) > 1:
            for i, record in enumerate(new, start=1):
                echo(f"  line {i} of the submission: {describe(record)}")
        for problem in exc.problems:
            echo(f"  - {terminal_text(problem, 500)}")
        raise
    echo(
        f"queued {entry.submission_id}: {len(entry.submission.runs)} run(s), "
        f"{len(entry.submission.quality)} quality result(s) from "
        f"{terminal_text(entry.submission.submitter)}; awaiting approval"
        + (f" ({skipped} already stored or pending, left out)" if skipped else "")
    )
    return DeliveryResult(skipped=skipped, queued_id=entry.submission_id, queued=len(new))
