"""Marks on suspect rows: runs stalled on the host, and submissions shown as unverified.

Two kinds of row are shown with a mark (the *Marks* column of the table and of Model detail,
whose hover says why) and carry a boolean in the API rows:

* ``host_bound``, either of two rules with one name (:data:`mlenergy.records.HOST_BOUND_MARK`):

  - a measured run of a configuration that the estimator's host-bound rule flags
    (:func:`mlenergy.analysis.stalls.host_bound_flags`, the rule the measured study marks its
    runs with): such runs often sat at 25-45 ms per step at low power, so their energy per
    token measures a host stall more than the model. The rule looks at the configuration only
    (GPU, GPU count, task), which is all the reference rows carry; estimated, emulated and
    modelled rows are not measurements and are not marked by it.
  - a run whose own record carries the measured verdict (``RunRecord.host_bound``, set by
    :mod:`mlenergy.measure.host_bound` when the run was made: its GPUs sat near their measured
    idle power most of the time), read from the store as ``host_bound_marked`` and
    ``host_bound_json`` (:mod:`mlenergy.store.record_extras`).

* ``unverified``: an approved submission whose record lacks the provenance a real measurement
  records (``SubmissionInfo.unverified``, the store's flat column ``unverified``); the reasons
  are in ``unverified_reasons`` and in the hover.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from mlenergy.analysis.stalls import host_bound_flags, host_bound_reason
from mlenergy.records import HOST_BOUND_MARK, HostBound

UNVERIFIED_MARK = "unverified"
"""The mark of a submission shown as unverified."""
MEASURED_KINDS = ("measured", "reference")
"""``source_kind`` values of measurements (the only rows the host-bound mark applies to)."""
MARK_COLUMNS = ("host_bound", "unverified", "unverified_reasons", "marks", "marks_why")
"""Columns :func:`attach_marks` adds."""


def reasons_text(value: object) -> str:
    """``SubmissionInfo.unverified`` (a list, or its JSON text) as one line of reasons."""
    if isinstance(value, str):
        text = value
        try:
            value = json.loads(text) if text.strip() else []
        except ValueError:
            return text
    if isinstance(value, list | tuple | np.ndarray):
        return "; ".join(str(v) for v in value if str(v))
    return ""


def _bool(df: pd.DataFrame, name: str) -> np.ndarray:
    if name not in df.columns:
        return np.zeros(len(df), dtype=bool)
    return df[name].astype("boolean").fillna(False).to_numpy(dtype=bool)


def attach_marks(df: pd.DataFrame) -> None:
    """Add :data:`MARK_COLUMNS` to a prepared frame, in place.

    Args:
        df: Rows with ``accelerator_model``, ``accelerator_count``, ``task``, ``source_kind``
            and, when the store has them, ``unverified``, ``unverified_reasons``,
            ``host_bound_marked`` and ``host_bound_json``.
    """
    n = len(df)
    measured = df["source_kind"].isin(MEASURED_KINDS).to_numpy() if n else np.zeros(0, bool)
    if n and "accelerator_model" in df.columns:
        gpus = df["accelerator_model"].astype(object).where(df["accelerator_model"].notna(), "")
        flags = host_bound_flags(
            pd.DataFrame({"gpu": gpus, "num_gpus": df["accelerator_count"], "task": df["task"]})
        )
        by_config = flags & measured
    else:
        by_config = np.zeros(n, dtype=bool)
    by_record = _bool(df, "host_bound_marked")
    host = by_config | by_record
    unverified = _bool(df, "unverified")
    reasons = np.full(n, "", dtype=object)
    if unverified.any():
        given = df["unverified_reasons"] if "unverified_reasons" in df.columns else None
        for i in np.flatnonzero(unverified):
            text = reasons_text(given.iloc[i]) if given is not None else ""
            reasons[i] = text or "the record's submission lists why"
    df["host_bound"] = host
    df["unverified"] = unverified
    df["unverified_reasons"] = reasons
    marks = np.full(n, "", dtype=object)
    marks[host] = HOST_BOUND_MARK
    marks[unverified] = UNVERIFIED_MARK
    marks[host & unverified] = f"{HOST_BOUND_MARK} · {UNVERIFIED_MARK}"
    why = np.full(n, "", dtype=object)
    why[by_config] = f"Suspect, host-bound: {host_bound_reason()}"
    for i in np.flatnonzero(by_record):
        line = f"Host-bound, measured: {_verdict_text(df['host_bound_json'].iloc[i])}"
        why[i] = f"{why[i]}\n{line}" if why[i] else line
    for i in np.flatnonzero(unverified):
        line = f"Unverified submission: {reasons[i]}"
        why[i] = f"{why[i]}\n{line}" if why[i] else line
    df["marks"] = marks
    df["marks_why"] = why


def _verdict_text(value: object) -> str:
    """A stored verdict (JSON text) in one sentence (:meth:`HostBound.describe`)."""
    try:
        return HostBound.model_validate_json(str(value)).describe()
    except ValueError:
        return "the record's host-bound verdict marks it (see its provenance)"
