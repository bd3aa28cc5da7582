"""The only code that reads or writes ``data/``: the run store, export, submission intake.

Quick use::

    from mlenergy.store import RunStore
    store = RunStore("data")
    store.append(records)          # atomic, deduplicated by content hash, multi-process safe
    frame = store.runs_frame()     # flat columns (mlenergy.store.tables.RUN_COLUMNS)

Before long work that will append, :func:`mlenergy.store.preflight.open_store_for_append`
proves the store writable and undamaged. :mod:`mlenergy.store.listing` gives the run listing
and finds a run by a unique id prefix.

Submissions: :class:`SubmissionQueue` (``submit``, ``list``, ``approve``, ``reject``) over
:func:`validate_bundle`; show submitted text through :func:`escape_text`.
"""

from __future__ import annotations

from mlenergy.errors import StoreError
from mlenergy.store.queue_entry import QueuedSubmission
from mlenergy.store.store import AppendResult, RunStore
from mlenergy.store.submissions import SubmissionQueue
from mlenergy.store.tables import QUALITY_COLUMNS, RUN_COLUMNS, flatten_quality, flatten_run
from mlenergy.store.validation import ValidationReport, escape_text, validate_bundle

__all__ = [
    "QUALITY_COLUMNS",
    "RUN_COLUMNS",
    "AppendResult",
    "QueuedSubmission",
    "RunStore",
    "StoreError",
    "SubmissionQueue",
    "ValidationReport",
    "escape_text",
    "flatten_quality",
    "flatten_run",
    "validate_bundle",
]
