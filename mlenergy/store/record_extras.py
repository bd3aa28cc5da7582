"""Figures read from each stored record beside its flat columns: interval basis, host-bound mark.

The flat columns (:mod:`mlenergy.store.tables`) are the store's fixed contract; the interval a
record carries (``RunRecord.interval``) and the host-bound rule's verdict
(``RunRecord.host_bound``) are read from the record JSON by :data:`EXTRA_SQL`, so the listing
(``mlenergy runs list``) and the leaderboard show them for every stored record, old or new.
:func:`interval_labels` words the basis as :func:`mlenergy.records.interval_label` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from mlenergy.records import interval_label

if TYPE_CHECKING:
    import pandas as pd

EXTRA_SQL = (
    "json_extract_string(record_json, '$.interval.kind') AS interval_kind, "
    "TRY_CAST(json_extract_string(record_json, '$.interval.n') AS BIGINT) AS interval_n, "
    "json_extract_string(record_json, '$.interval.fresh') AS interval_fresh, "
    "coalesce(json_extract_string(record_json, '$.host_bound.marked') = 'true', false) "
    "AS host_bound_marked, "
    "CASE WHEN json_extract_string(record_json, '$.host_bound.marked') = 'true' "
    "THEN json_extract(record_json, '$.host_bound')::VARCHAR END AS host_bound_json"
)
"""Select expressions over a store's ``_runs_all`` view (it keeps ``record_json``)."""
EXTRA_COLUMNS = (
    "interval_kind",
    "interval_n",
    "interval_fresh",
    "host_bound_marked",
    "host_bound_json",
)
"""The columns :data:`EXTRA_SQL` adds: the interval's kind, count and what each run started
anew; whether the record's own host-bound verdict marks it, and that verdict as JSON."""


def _present(frame: pd.DataFrame, name: str) -> np.ndarray:
    if name not in frame.columns:
        return np.zeros(len(frame), dtype=bool)
    return frame[name].notna().to_numpy()


def interval_labels(frame: pd.DataFrame) -> list[str]:
    """Each row's interval basis in words (``between-runs, 3 processes``; ``""``: none).

    Rows whose record has no ``interval`` but a 95% interval on a phase and at least two
    repeats were made before the field existed, by one run's repeats: ``within-run`` (the
    rule of :func:`mlenergy.records.run.within_run_basis`, on the flat columns).

    Args:
        frame: Flat run rows with :data:`EXTRA_COLUMNS` (missing ones read as absent).
    """
    n = len(frame)
    kinds = frame["interval_kind"] if "interval_kind" in frame.columns else [None] * n
    counts = frame["interval_n"] if "interval_n" in frame.columns else [None] * n
    fresh = frame["interval_fresh"] if "interval_fresh" in frame.columns else [None] * n
    with_ci = np.zeros(n, dtype=bool)
    for phase in ("prefill", "decode", "request"):
        with_ci |= _present(frame, f"{phase}_energy_j_ci95_low")
    repeats = frame["repeats"].to_numpy() if "repeats" in frame.columns else np.ones(n)
    ok = (frame["status"] == "ok").to_numpy() if "status" in frame.columns else np.ones(n, bool)
    out = []
    for i, (kind, count, what) in enumerate(zip(kinds, counts, fresh, strict=True)):
        if isinstance(kind, str) and kind:
            out.append(interval_label(kind, count, what if isinstance(what, str) else None))
        elif ok[i] and with_ci[i] and repeats[i] >= 2:
            out.append(interval_label("within-run", repeats[i]))
        else:
            out.append("")
    return out
