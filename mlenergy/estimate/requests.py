"""Estimate requests as a table of typed columns: one request is a table of one row.

Every estimate of serving or of an offline job, whether one (:func:`~mlenergy.estimate.api.
estimate`), a sweep, or a batch CSV (:mod:`~mlenergy.estimate.batch`), is a
:class:`EstimateRequests` handed to :func:`~mlenergy.estimate.table.estimate_table`. Its
columns are the flat fields of :class:`~mlenergy.estimate.request_types.EstimateRequest`. Text
columns hold ``""`` where nothing was given, number columns ``NaN``; a cell that is given but
is not a number is kept as that row's error (``bad_cells``), so the row keeps its place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

from mlenergy.estimate.request_types import (
    NUMBER_DEFAULTS,
    NUMBER_FIELDS,
    TEXT_FIELDS,
    EstimateRequest,
)


@dataclass(frozen=True)
class EstimateRequests:
    """A table of estimate requests (serving or offline), one entry per row in every column.

    Each column is the flat field of the same name of
    :class:`~mlenergy.estimate.request_types.EstimateRequest`, documented there, as an array:
    text columns hold ``""`` where the field was not given; number columns ``NaN``, or the
    field's default (the parallel degrees' 1). ``bad_cells`` holds, per row, the error of a
    cell given but not a number (``""``: none).
    """

    model: np.ndarray
    gpu: np.ndarray
    precision: np.ndarray
    task: np.ndarray
    engine: np.ndarray
    mode: np.ndarray
    num_gpus: np.ndarray
    tensor_parallel: np.ndarray
    expert_parallel: np.ndarray
    data_parallel: np.ndarray
    pipeline_parallel: np.ndarray
    batch_size: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    max_num_seqs: np.ndarray
    sm_clock_mhz: np.ndarray
    power_limit_w: np.ndarray
    max_output_tokens: np.ndarray
    bad_cells: np.ndarray

    def __len__(self) -> int:
        return len(self.model)

    @classmethod
    def of(cls, requests: list[EstimateRequest]) -> EstimateRequests:
        """The table of ``requests``, one row each, in order."""
        return cls.concat([cls.one(**r.flat()) for r in requests])

    @classmethod
    def one(cls, **values: Any) -> EstimateRequests:
        """A table of one request from flat field values (``None``: not given).

        Keywords are the column names (the flat fields of an ``EstimateRequest``). A number
        keyword that is not a number becomes the row's error.
        """
        unknown = set(values) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"unknown request fields: {', '.join(sorted(unknown))}")
        cols: dict[str, np.ndarray] = {}
        for name in TEXT_FIELDS:
            v = values.get(name)
            cell = "" if v is None else v if name == "gpu" and not isinstance(v, str) else str(v)
            cols[name] = np.array([cell], dtype=object)
        bad = ""
        nums = []
        for name in NUMBER_FIELDS:
            v = values.get(name)
            num = math.nan
            if v is not None and not (isinstance(v, str) and not v.strip()):
                try:
                    num = float(v)
                except (TypeError, ValueError):
                    bad = bad or f"{name} is not a number (got {v!r})"
            else:
                num = NUMBER_DEFAULTS[name]
            nums.append(num)
        numbers = np.array(nums, dtype=float)
        numbers.setflags(write=False)  # columns are views of it: never written in place
        for j, name in enumerate(NUMBER_FIELDS):
            cols[name] = numbers[j : j + 1]
        return cls(**cols, bad_cells=np.array([bad], dtype=object))

    @classmethod
    def from_frame(cls, df: pd.DataFrame) -> EstimateRequests:
        """The requests of a batch frame (the CSV contract of :mod:`~mlenergy.estimate.batch`).

        Missing columns are not given; blank cells too; text is stripped.
        """
        n = len(df)
        cols: dict[str, np.ndarray] = {}
        for name in TEXT_FIELDS:
            if name in df:
                cols[name] = df[name].fillna("").astype(str).str.strip().to_numpy(dtype=object)
            else:
                cols[name] = np.full(n, "", dtype=object)
        bad = np.full(n, "", dtype=object)
        for name in NUMBER_FIELDS:
            values, not_numbers = _numbers(df, name, NUMBER_DEFAULTS[name])
            cols[name] = values
            for i in np.flatnonzero(not_numbers & (bad == "")):
                bad[i] = f"{name} is not a number (got {str(df[name].iloc[i]).strip()!r})"
        return cls(**cols, bad_cells=bad)

    @classmethod
    def concat(cls, tables: list[EstimateRequests]) -> EstimateRequests:
        """The rows of ``tables``, one after another."""
        return cls(
            **{f.name: np.concatenate([getattr(t, f.name) for t in tables]) for f in fields(cls)}
        )

    def row(self, i: int) -> dict[str, Any]:
        """Request ``i`` as keyword values (``None`` where not given)."""
        out: dict[str, Any] = {}
        for name in (*TEXT_FIELDS, *NUMBER_FIELDS):
            v = getattr(self, name)[i]
            out[name] = None if (isinstance(v, str) and not v) or _is_nan(v) else v
        return out


def _is_nan(v: object) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _numbers(df: pd.DataFrame, col: str, default: float) -> tuple[np.ndarray, np.ndarray]:
    """Column ``col`` as floats (blank: ``default``) and which cells are given but not numbers."""
    n = len(df)
    if col not in df:
        return np.full(n, default, dtype=float), np.zeros(n, dtype=bool)
    raw = df[col]
    vals = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    blank = raw.isna().to_numpy() | (raw.astype(str).str.strip() == "").to_numpy()
    return np.where(blank, default, vals), ~blank & np.isnan(vals)
