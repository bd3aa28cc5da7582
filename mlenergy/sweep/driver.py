"""The sweep driver: skip what the store already holds, run the rest, store each result at once.

The driver is the only writer of the store. Executors hand back records; each run's records
are appended as soon as it ends (one atomic append per run), so an interrupted sweep keeps every
finished run. Checking that a run's key is not stored and appending it happen under the store's
lock (:meth:`~mlenergy.store.RunStore.append_if`), so two drivers running overlapping plans on
one store store each point once, and each counts only what it stored. A run whose key is
already stored (ok or failed) is never run or stored again: rerunning a plan, ``--resume``
after a crash, or a second plan that overlaps the first all run only the missing points.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mlenergy.progress import progress_bar
from mlenergy.records import QualityResult, RunRecord
from mlenergy.sweep.outcome import Executor, Outcome
from mlenergy.sweep.runs import failed_record
from mlenergy.sweep.spec import KEY_TAG, RunSpec


def stored_keys(store: Any) -> set[str]:
    """Run keys of every record in ``store`` made by a sweep (empty for an empty store).

    Args:
        store: A :class:`mlenergy.store.RunStore`.
    """
    if not store.results_dir.is_dir():
        return set()
    keys: set[str] = set()
    for table in ("runs", "quality"):
        frame = store.query(
            f"SELECT tags_json FROM {table} WHERE tags_json LIKE ?", [f"%{KEY_TAG}%"]
        )
        for text in frame["tags_json"]:
            key = json.loads(text).get(KEY_TAG) if isinstance(text, str) else None
            if key:
                keys.add(key)
    return keys


def unique_runs(specs: Iterable[RunSpec]) -> list[RunSpec]:
    """The specs with one per key, in order (a grid may name a point twice)."""
    seen: dict[str, RunSpec] = {}
    for spec in specs:
        seen.setdefault(spec.key, spec)
    return list(seen.values())


@dataclass
class SweepSummary:
    """What a sweep did.

    Attributes:
        planned: Distinct runs of the plan.
        skipped: Runs this sweep did not store because the store already held them: before
            it started, or stored meanwhile by another driver (``stored_elsewhere``).
        ok: Runs stored as ok records.
        failed: Runs stored as failed points (crashed, timed out, out of memory, errors).
        unstored: Runs that ended without a record (estimate or quality errors).
        errors: ``label: error`` of every run that did not end ok.
        stored_elsewhere: Runs this sweep ran but another driver stored first (counted in
            ``skipped``; this sweep's figures for them were dropped, not stored twice).
    """

    planned: int = 0
    skipped: int = 0
    stored_elsewhere: int = 0
    ok: int = 0
    failed: int = 0
    unstored: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def done(self) -> int:
        """Runs that ended in this sweep."""
        return self.ok + self.failed + self.unstored


def link_quality(records: list[Any], store: Any) -> list[Any]:
    """Link each quality record to the stored energy runs of the same model instance.

    The same model instance is the same ``model_id``, config fingerprint, dtype and weights.
    """
    if not store.results_dir.is_dir() or not any(isinstance(r, QualityResult) for r in records):
        return records
    out = []
    for record in records:
        if isinstance(record, QualityResult):
            m = record.model
            found = store.query(
                "SELECT run_id FROM runs WHERE model_id = ? AND config_fingerprint = ? "
                "AND dtype = ? AND weights = ? AND status = 'ok' ORDER BY created_at, run_id",
                [m.model_id, m.config_fingerprint, m.dtype, m.weights],
            )
            ids = tuple(i for i in found["run_id"] if i not in record.linked_run_ids)
            if ids:
                data = record.model_dump()
                record = QualityResult.model_validate(
                    {**data, "linked_run_ids": (*record.linked_run_ids, *ids)}
                )
        out.append(record)
    return out


def _records_of(outcome: Outcome, same_host: bool) -> list[Any]:
    """Records to store for an outcome: its own, or a failed point for a bench run."""
    if outcome.status == "ok":
        return outcome.records
    if outcome.spec.kind == "bench":
        error = outcome.error or "unknown error"
        return [failed_record(outcome.spec, error, outcome.status, same_host)]
    return []


def _count(summary: SweepSummary, outcome: Outcome, records: list[Any]) -> None:
    failed_point = any(isinstance(r, RunRecord) and r.status == "failed" for r in records)
    if not records:
        summary.unstored += 1
    elif failed_point:
        summary.failed += 1
    else:
        summary.ok += 1
    if outcome.status != "ok" or failed_point:
        error = outcome.error or next(
            (r.error for r in records if isinstance(r, RunRecord) and r.error), "failed"
        )
        summary.errors.append(f"{outcome.spec.label()}: {outcome.status}: {error}")


def _store_once(store: Any, key: str, records: list[Any]) -> bool:
    """Store a run's records unless its key is stored; check and append under one lock.

    Returns:
        Whether this call stored them (``False``: another driver stored the key first).
    """
    result = store.append_if(link_quality(records, store), lambda: key not in stored_keys(store))
    return result is not None


def run_sweep(
    specs: Sequence[RunSpec],
    store: Any,
    executor: Executor,
    *,
    progress: bool = True,
) -> SweepSummary:
    """Run the specs not yet in ``store`` on ``executor``, appending each result as it ends.

    Args:
        specs: The plan's runs (see :meth:`mlenergy.sweep.plan.Plan.runs`).
        store: A :class:`mlenergy.store.RunStore`; the only place results go.
        executor: :class:`~mlenergy.sweep.local.LocalExecutor` or
            :class:`~mlenergy.sweep.ray_executor.RayExecutor`.
        progress: Show a progress bar (done / failed / running / remaining, ETA).

    Returns:
        Counts of what ran and what was skipped.
    """
    runs = unique_runs(specs)
    done_keys = stored_keys(store)
    todo = [s for s in runs if s.key not in done_keys]
    summary = SweepSummary(planned=len(runs), skipped=len(runs) - len(todo))
    running: set[str] = set()
    with progress_bar(len(todo), "sweep", unit="run", enabled=progress) as bar:

        def note() -> None:
            remaining = len(todo) - summary.done - len(running)
            bar.note(
                done=summary.ok,
                failed=summary.failed + summary.unstored,
                running=len(running),
                remaining=remaining,
            )

        def on_start(spec: RunSpec) -> None:
            running.add(spec.key)
            bar.describe(spec.label()[:60])
            note()

        for outcome in executor.run(todo, on_start):
            running.discard(outcome.spec.key)
            records = _records_of(outcome, same_host=executor.name == "local")
            if records and not _store_once(store, outcome.spec.key, records):
                summary.stored_elsewhere += 1  # another driver stored this key meanwhile
                summary.skipped += 1
            else:
                _count(summary, outcome, records)
            bar.advance()
            note()
    return summary


def dry_run_lines(specs: Sequence[RunSpec], store: Any) -> tuple[list[str], int]:
    """One line per distinct run (``done`` or ``todo``, its key and label) and the done count."""
    runs = unique_runs(specs)
    keys = stored_keys(store)
    lines = [f"{'done' if s.key in keys else 'todo'}  {s.key[:12]}  {s.label()}" for s in runs]
    return lines, sum(s.key in keys for s in runs)
