"""What ``mlenergy runs`` shows: the run listing's cells, and runs found by an id prefix."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mlenergy.errors import UserError
from mlenergy.records import HOST_BOUND_MARK, interval_basis
from mlenergy.records.generation import method_label
from mlenergy.records.metrics import HEADLINE_PHASES, headline_column
from mlenergy.store.record_extras import EXTRA_SQL, interval_labels
from mlenergy.store.tables import RUN_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

    from mlenergy.records import RunRecord
    from mlenergy.store.store import RunStore

LIST_COLUMNS = (
    "run_id",
    "created_at",
    "model_id",
    "accelerator_model",
    "method",
    "batch",
    "energy_source",
    "energy_per_token_j",
    "interval",
    "marks",
    "submitter",
)
"""Columns of the run listing, in order (``method``, ``batch``, ``energy_per_token_j``,
``interval`` and ``marks`` are derived, see below)."""
HEADERS = {"energy_per_token_j": "J/token"}
PER_TOKEN_NOTE = (
    "method: how the run was measured (static-batch with its generation backend; "
    "serving-steady-state with the client's concurrency level). batch: a static batch's size; "
    "for serving, the server's max_num_seqs, else its mean running requests in the window "
    "(mean). J/token: energy per generated token of the whole-request phase (prefill + "
    "decode), as bench, the leaderboard and the studies show it; values marked (decode) come "
    "from runs that measured only the decode phase. interval: what the run's 95% intervals "
    "come from (the repeats of one run, or fresh processes or server launches). marks: "
    "host-bound where the GPUs sat near idle most of the measured time (docs/measure.md)."
)
METHOD_SQL = (
    "json_extract_string(record_json, '$.workload.method') AS method_kind, "
    "json_extract_string(record_json, '$.generation.backend') AS generation_backend"
)
"""Select expressions over ``_runs_all``: each record's ``Workload.method`` and generation
backend (not flat columns)."""
SERVING = "serving-steady-state"
_SHOWN_MATCHES = 10
"""Ids an ambiguous prefix lists before counting the rest."""


@dataclass(frozen=True)
class RunListing:
    """The rows of the run listing as display text.

    Attributes:
        total: Runs that matched the filter (before ``limit``).
        headers: Column titles.
        rows: One tuple of cell texts per shown run, oldest first.
    """

    total: int
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def _present(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def cell_text(value: object) -> str:
    """One value as listing text: ``-`` for missing, 4 significant digits for floats."""
    if not _present(value):
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if hasattr(value, "strftime"):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def per_token_cells(frame: pd.DataFrame) -> list[str]:
    """The headline energy per token (J) of each run; marked when it is not the first phase's.

    The rule of every view (:func:`~mlenergy.records.metrics.headline_column`): the whole
    request, else decode (then marked ``(decode)``).
    """
    values = headline_column(frame, "energy_per_token_j")
    first, fallback = (p.value for p in HEADLINE_PHASES)
    primary = frame.get(f"{first}_energy_per_token_j")
    cells = []
    for i, value in enumerate(values):
        if not _present(value):
            cells.append("-")
        elif primary is not None and _present(primary.iloc[i]):
            cells.append(cell_text(float(value)))
        else:
            cells.append(f"{cell_text(float(value))} ({fallback})")
    return cells


def _text_or_none(value: object) -> str | None:
    return str(value) if _present(value) and str(value) else None


def method_cells(frame: pd.DataFrame) -> list[str]:
    """How each run was measured: ``static-batch · eager``, ``serving-steady-state (level 8)``.

    A record without a method (training; inference recorded before the field) shows its
    workload kind instead (``training``, ``inference · eager``).

    Args:
        frame: Flat run rows with ``method_kind``, ``generation_backend`` (:data:`METHOD_SQL`),
            ``workload_kind`` and ``batch_size``.
    """
    cells = []
    for method, workload, backend, level in zip(
        frame["method_kind"],
        frame["workload_kind"],
        frame["generation_backend"],
        frame["batch_size"],
        strict=True,
    ):
        kind = _text_or_none(method) or _text_or_none(workload)
        backend = _text_or_none(backend)
        if kind == SERVING:
            cells.append(f"{kind} (level {cell_text(level)})" if _present(level) else kind)
        elif kind is not None:
            cells.append(method_label(kind, backend))
        else:
            cells.append("-")
    return cells


def batch_cells(frame: pd.DataFrame) -> list[str]:
    """Each run's batch: a static batch's size; for serving, the server's, never the client's.

    A serving run shows the server's cap (``max_num_seqs``) where the run knows it, else the
    mean requests the server ran over the window (``avg_batch_size``, marked ``mean``).
    """
    cells = []
    for kind, batch, cap, mean in zip(
        frame["method_kind"],
        frame["batch_size"],
        frame["max_num_seqs"],
        frame["avg_batch_size"],
        strict=True,
    ):
        if kind != SERVING:
            cells.append(cell_text(batch))
        elif _present(cap):
            cells.append(cell_text(cap))
        elif _present(mean):
            cells.append(f"{float(mean):.3g} (mean)")
        else:
            cells.append("-")
    return cells


def list_runs(store: RunStore, model: str | None = None, limit: int = 50) -> RunListing:
    """The newest ``limit`` runs (0: all) whose model id contains ``model``, as text cells.

    Raises:
        StoreError: A store file is damaged.
    """
    cols = ", ".join(f'"{c}"' for c in RUN_COLUMNS)
    frame = store.query(
        f"SELECT {cols}, {EXTRA_SQL}, {METHOD_SQL} FROM _runs_all ORDER BY created_at, run_id"
    )
    if model:
        frame = frame[frame["model_id"].str.contains(model, regex=False)]
    total = len(frame)
    if limit > 0:
        frame = frame.tail(limit)
    marked = frame["host_bound_marked"].fillna(False).astype(bool)
    frame = frame.assign(
        method=method_cells(frame),
        batch=batch_cells(frame),
        energy_per_token_j=per_token_cells(frame),
        interval=[text or "-" for text in interval_labels(frame)],
        marks=[HOST_BOUND_MARK if m else "-" for m in marked],
    )
    rows = tuple(
        tuple(cell_text(v) for v in row)
        for row in frame[list(LIST_COLUMNS)].itertuples(index=False)
    )
    return RunListing(total, tuple(HEADERS.get(c, c) for c in LIST_COLUMNS), rows)


def show_notes(run: RunRecord) -> list[str]:
    """What ``mlenergy runs show`` says beside the JSON: the interval's basis, the host mark.

    Returns:
        Lines such as ``interval: between-runs, 3 processes`` and ``host-bound: ...`` (the
        verdict and its figures, or that the rule does not apply and why).
    """
    basis = interval_basis(run)
    lines = [
        f"interval: {basis.label()}"
        + ("" if run.interval is not None else " (inferred: recorded before the field)")
        if basis is not None
        else "interval: none (one repeat, one window, or no measurement)"
    ]
    if run.host_bound is not None:
        lines.append(run.host_bound.describe())
    elif not run.scope.gpu_indices:
        lines.append("host-bound: does not apply (no GPU in scope: the host is the device)")
    else:
        lines.append("host-bound: not judged (no idle baseline, or recorded before the rule)")
    return lines


def resolve_run_id(store: RunStore, prefix: str) -> str:
    """The one stored run id that starts with ``prefix`` (a whole id is its own prefix).

    Raises:
        UserError: No run id starts with ``prefix``, or several do (they are listed).
    """
    text = prefix.strip()
    if not text:
        raise UserError("empty run id", "pass a run id or its first characters")
    if not store.results_dir.is_dir():
        raise _no_run(store, text)
    found = store.query(
        "SELECT run_id FROM runs WHERE starts_with(run_id, ?) ORDER BY run_id LIMIT ?",
        [text, _SHOWN_MATCHES + 1],
    )["run_id"].tolist()
    if text in found:
        return text
    if not found:
        raise _no_run(store, text)
    if len(found) > 1:
        shown = ", ".join(found[:_SHOWN_MATCHES])
        more = " and more" if len(found) > _SHOWN_MATCHES else ""
        raise UserError(
            f"run id prefix {text!r} is ambiguous: it matches {shown}{more}",
            "give more characters of the id",
        )
    return found[0]


def find_run(store: RunStore, prefix: str) -> RunRecord:
    """The run whose id is, or uniquely starts with, ``prefix``.

    Raises:
        UserError: No run matches, or the prefix is ambiguous.
    """
    return store.get(resolve_run_id(store, prefix))


def _no_run(store: RunStore, text: str) -> UserError:
    return UserError(
        f"no run {text!r} in the store at {store.data_dir}",
        "list the stored runs with `mlenergy runs list`",
    )
