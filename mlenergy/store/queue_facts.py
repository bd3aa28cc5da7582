"""What the queue knows when a bundle arrives: stored and pending runs, ids, and the cap.

The intake compares a new bundle with every run already stored or waiting in the queue
(exact and near duplicates, reused ids) and refuses a submitter who already has
:func:`max_pending_setting` bundles waiting. These helpers read the store's frames and the
pending entries once and answer each question from them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from mlenergy.errors import UserError
from mlenergy.records import QualityResult, RunRecord, Submission
from mlenergy.store.checks import tag
from mlenergy.store.names import name_key
from mlenergy.store.near_duplicates import NearDuplicateIndex
from mlenergy.store.queue_entry import QueuedSubmission
from mlenergy.store.rules import KNOWN_TASKS, measurement_key
from mlenergy.store.tables import flatten_run

if TYPE_CHECKING:
    import pandas as pd

    from mlenergy.store.store import RunStore

MAX_PENDING_ENV = "MLENERGY_MAX_PENDING_PER_SUBMITTER"
"""Environment variable setting the cap on pending bundles per submitter for a deployment."""
MAX_PENDING_PER_SUBMITTER = 20
"""Bundles one submitter may have waiting for review at once, by default."""


def max_pending_setting() -> int:
    """The cap on pending bundles per submitter: ``$MLENERGY_MAX_PENDING_PER_SUBMITTER`` or 20.

    Raises:
        UserError: The variable is set but is not a whole number of at least 1.
    """
    text = os.environ.get(MAX_PENDING_ENV, "").strip()
    if not text:
        return MAX_PENDING_PER_SUBMITTER
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise UserError(
            f"${MAX_PENDING_ENV} is {text[:40]!r}",
            "set it to a whole number of at least 1 (the bundles one submitter may have "
            "pending), or unset it for the default of 20",
        )
    return value


def pending_problem(
    submitter: str | None, pending: Sequence[QueuedSubmission], cap: int
) -> str | None:
    """Why ``submitter`` may not queue another bundle now, or ``None``.

    Names are compared by their key (:func:`mlenergy.store.names.name_key`), so ``Lab``,
    ``lab`` and a look-alike count as one submitter.

    Args:
        submitter: The submitter's name.
        pending: The pending entries.
        cap: Bundles one submitter may have pending.
    """
    if not submitter or not submitter.strip():
        return None
    key = name_key(submitter)
    mine = sum(1 for q in pending if name_key(q.submission.submitter) == key)
    if mine < cap:
        return None
    return tag(
        "pending-per-submitter",
        f"submitter {submitter.strip()[:80]!r} already has {mine} bundle(s) waiting for "
        f"review (at most {cap}); wait for a maintainer to approve or reject them before "
        "submitting more",
    )


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The frame's rows as flat column dicts (the store's columns are named by strings)."""
    return cast(list[dict[str, Any]], frame.to_dict("records"))


def known_tasks(runs: pd.DataFrame) -> set[str]:
    """Tasks accepted without a declaration: the built-in list and every stored task.

    Args:
        runs: The store's ``runs_frame()``.
    """
    stored = runs["task"].dropna().astype(str).tolist() if "task" in runs.columns else []
    return set(KNOWN_TASKS) | set(stored)


def known_measurements(runs: pd.DataFrame, pending: Sequence[QueuedSubmission]) -> dict[str, str]:
    """:func:`~mlenergy.store.rules.measurement_key` of stored and pending runs -> who.

    Args:
        runs: The store's ``runs_frame()``.
        pending: The pending entries.
    """
    out: dict[str, str] = {}
    for row in _rows(runs):
        key = measurement_key(row)
        if key is not None:
            out.setdefault(key, f"stored run {row['run_id']} (model {row['model_id']!r})")
    for entry in pending:
        for run in entry.submission.runs:
            key = measurement_key(flatten_run(run))
            if key is not None:
                where = f"run {run.run_id} of pending submission {entry.submission_id}"
                out.setdefault(key, f"{where} (model {run.model.model_id!r})")
    return out


def known_runs(runs: pd.DataFrame, pending: Sequence[QueuedSubmission]) -> NearDuplicateIndex:
    """Stored and pending runs, indexed for the near-duplicate rule.

    Args:
        runs: The store's ``runs_frame()``.
        pending: The pending entries.
    """
    index = NearDuplicateIndex()
    for row in _rows(runs):
        index.add(row, f"stored run {row['run_id']} (model {row['model_id']!r})")
    for entry in pending:
        for run in entry.submission.runs:
            where = f"run {run.run_id} of pending submission {entry.submission_id}"
            index.add(flatten_run(run), f"{where} (model {run.model.model_id!r})")
    return index


def taken_ids(
    store: RunStore, pending: Sequence[QueuedSubmission]
) -> tuple[dict[str, str], dict[str, str]]:
    """``id -> content hash`` of the stored and pending runs, and of the quality results.

    Args:
        store: The store.
        pending: The pending entries.
    """
    run_ids = store.run_hashes()
    quality_ids = store.quality_hashes()
    for entry in pending:
        for run in entry.submission.runs:
            run_ids.setdefault(run.run_id, run.content_hash())
        for result in entry.submission.quality:
            quality_ids.setdefault(result.quality_id, result.content_hash())
    return run_ids, quality_ids


def id_reuse_problems(
    submission: Submission, run_ids: Mapping[str, str], quality_ids: Mapping[str, str], fix: str
) -> list[str]:
    """Records of ``submission`` whose id is taken by a record with other content.

    Args:
        submission: The submission.
        run_ids: ``run_id -> content hash`` of the runs it must not clash with.
        quality_ids: ``quality_id -> content hash`` likewise.
        fix: What to do about a clash, ending each problem.
    """
    problems = []
    groups: tuple[tuple[str, Sequence[RunRecord | QualityResult], Mapping[str, str]], ...] = (
        ("runs", submission.runs, run_ids),
        ("quality", submission.quality, quality_ids),
    )
    for key, records, ids in groups:
        for i, rec in enumerate(records):
            rid = rec.run_id if isinstance(rec, RunRecord) else rec.quality_id
            if rid in ids and ids[rid] != rec.content_hash():
                problems.append(
                    tag(
                        "run-id-unique",
                        f"{key}[{i}]: id {rid!r} is already used by another record; {fix}",
                    )
                )
    return problems
