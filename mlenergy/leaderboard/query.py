"""The leaderboard's data layer: prepare, filter, pick best configurations, search, sort, page.

Everything here works on a pandas DataFrame with the store's flat run columns
(:func:`mlenergy.store.tables.flatten_run`). :func:`~mlenergy.leaderboard.prepare.prepare_runs`
(re-exported here, with the energy-source classes) adds the derived columns the leaderboard
shows (energy per output token, tokens per joule, hardware label, ...); :func:`query_table`
answers one table request server-side (filters, best configuration per model and hardware
under a latency deadline and an energy budget, search, sort, one page).
No Gradio here: the UI in ``leaderboard/app.py`` only calls these functions.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from mlenergy.leaderboard.arch import ARCH_KINDS
from mlenergy.leaderboard.columns import COLUMNS, DEFAULT_SORT, SORTABLE, with_footprint
from mlenergy.leaderboard.prepare import (
    MEASURED_GPU,
    METHODS,
    SOURCE_CLASSES,
    SOURCE_KINDS,
    prepare_runs,
)
from mlenergy.records.metrics import lowest_energy_positions, meets_deadline

__all__ = [
    "COLUMNS",
    "DEFAULT_SORT",
    "DEFAULT_SOURCES",
    "MEASURED_GPU",
    "METHODS",
    "PAGE_SIZE",
    "SORTABLE",
    "SOURCE_CLASSES",
    "SOURCE_KINDS",
    "TableQuery",
    "TableResult",
    "best_configs",
    "filter_choices",
    "filter_mask",
    "filter_runs",
    "prepare_runs",
    "query_table",
    "slider_limit",
    "sort_rows",
    "to_csv",
    "within_limits",
]

PAGE_SIZE = 50
"""Rows per table page."""

DEFAULT_SOURCES: tuple[str, ...] = (MEASURED_GPU,)
"""The rows a view shows when no energy source is asked for: measured GPU rows only."""

ITL_CAP_MS = 10_000.0
"""The latency slider's end never exceeds this (ms); slower rows show when it is at its end."""
ENERGY_CAP_J = 1_000.0
"""The energy-budget slider's end never exceeds this (J per output token)."""


@dataclass(frozen=True)
class TableQuery:
    """One request for the main table. Empty tuples mean "no filter".

    Attributes:
        task: Task to show (``None``: all tasks).
        hardware: Hardware labels to keep.
        arch: ``"all"`` or one of :data:`~mlenergy.leaderboard.arch.ARCH_KINDS`
            (``"dense"``, ``"MoE"``, ``"hybrid"``).
        precisions: ``dtype`` values to keep.
        gpu_counts: Accelerator counts to keep.
        source_kinds: ``source_kind`` or ``source_class`` values to keep (``"measured"`` keeps
            GPU and CPU measurements, ``"measured-gpu"`` the GPU ones).
        methods: ``method`` values to keep (see :data:`METHODS`).
        search: Case-insensitive substring of model, architecture, hardware, submitter or task.
        max_itl_ms: Latency deadline on median inter-token latency in ms (``None``: no deadline).
        max_energy_per_token_j: Energy budget in J per output token (``None``: no budget).
        best_only: One row per model x hardware (its lowest-energy configuration meeting the
            deadline and budget) instead of every configuration.
        sort_by: Column to sort on (see :data:`SORTABLE`).
        descending: Sort direction.
        page: Page number, starting at 1 (clamped to the last page).
        page_size: Rows per page.
    """

    task: str | None = None
    hardware: tuple[str, ...] = ()
    arch: str = "all"
    precisions: tuple[str, ...] = ()
    gpu_counts: tuple[int, ...] = ()
    source_kinds: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    search: str = ""
    max_itl_ms: float | None = None
    max_energy_per_token_j: float | None = None
    best_only: bool = True
    sort_by: str = DEFAULT_SORT
    descending: bool = False
    page: int = 1
    page_size: int = PAGE_SIZE


@dataclass
class TableResult:
    """One page of the main table and the full (lazily built) result behind it.

    Attributes:
        page_rows: The rows of the requested page (with ``n_configs``).
        total: Rows matching the query.
        page: The page shown (1-based, after clamping).
        pages: Number of pages (at least 1).
    """

    page_rows: pd.DataFrame
    total: int
    page: int
    pages: int
    _frame: pd.DataFrame = field(repr=False)
    _positions: np.ndarray = field(repr=False)
    _counts: np.ndarray = field(repr=False)

    @property
    def rows(self) -> pd.DataFrame:
        """Every matching row, sorted (for CSV download); built on first use."""
        return self._frame.iloc[self._positions].assign(n_configs=self._counts)


def filter_mask(df: pd.DataFrame, q: TableQuery) -> np.ndarray:
    """Boolean mask of the rows passing the query's filters, deadline and budget."""
    mask = np.ones(len(df), dtype=bool)
    if q.task:
        mask &= (df["task"] == q.task).to_numpy()
    if q.hardware:
        mask &= df["hardware"].isin(q.hardware).to_numpy()
    if q.arch in ARCH_KINDS:
        mask &= (df["arch_kind"] == q.arch).to_numpy()
    if q.precisions:
        mask &= df["dtype"].isin(q.precisions).to_numpy()
    if q.gpu_counts:
        mask &= df["accelerator_count"].isin([int(c) for c in q.gpu_counts]).to_numpy()
    if q.source_kinds:
        mask &= source_mask(df, q.source_kinds)
    if q.methods:
        mask &= df["method_kind"].isin(q.methods).to_numpy()
    term = q.search.strip().lower()
    if term:
        mask &= df["_search"].str.contains(term, regex=False).to_numpy(dtype=bool)
    return mask & _limits_mask(df, q.max_itl_ms, q.max_energy_per_token_j)


def source_mask(df: pd.DataFrame, sources: tuple[str, ...]) -> np.ndarray:
    """Rows whose ``source_kind`` or ``source_class`` is one of ``sources``."""
    mask = df["source_kind"].isin(sources).to_numpy().copy()
    if "source_class" in df.columns:
        mask |= df["source_class"].isin(sources).to_numpy()
    return mask


def _limits_mask(
    df: pd.DataFrame, max_itl_ms: float | None, max_energy_per_token_j: float | None
) -> np.ndarray:
    mask = np.ones(len(df), dtype=bool)
    if max_itl_ms is not None:  # rows with no latency stay in view (a filter, not a pick)
        mask &= meets_deadline(df["itl_ms"], max_itl_ms, unknown_meets=True)
    if max_energy_per_token_j is not None:
        mask &= df["energy_per_token_j"].to_numpy(dtype=float) <= max_energy_per_token_j
    return mask


def filter_runs(df: pd.DataFrame, q: TableQuery) -> pd.DataFrame:
    """Rows passing the query's filters (task, hardware, ..., search), deadline and budget.

    Args:
        df: A frame from :func:`prepare_runs`.
        q: The query (its sort, page and ``best_only`` are ignored here).
    """
    return df[filter_mask(df, q)]


def within_limits(
    df: pd.DataFrame, max_itl_ms: float | None, max_energy_per_token_j: float | None
) -> pd.DataFrame:
    """Keep configurations meeting the latency deadline and energy budget.

    A run without an ITL figure passes the deadline (it cannot be judged); a run without an
    energy figure fails any budget.

    Args:
        df: A frame from :func:`prepare_runs`.
        max_itl_ms: Deadline on median inter-token latency in ms, or ``None``.
        max_energy_per_token_j: Budget in J per output token, or ``None``.
    """
    return df[_limits_mask(df, max_itl_ms, max_energy_per_token_j)]


_best_positions = lowest_energy_positions
"""Each group's lowest-energy row: the shared rule of :mod:`mlenergy.records.metrics`."""


def best_configs(
    df: pd.DataFrame, keys: tuple[str, ...] = ("model_id", "hardware", "task")
) -> pd.DataFrame:
    """Pick each group's lowest-energy configuration (energy per output token).

    Rows without an energy figure are only picked when their group has no figure at all.
    Adds ``n_configs``: how many configurations each group had.

    Args:
        df: Candidate configurations (already filtered and limited).
        keys: Grouping columns; one output row per distinct key.

    Returns:
        One row per group, in order of first appearance of the group.
    """
    groups = (
        pd.MultiIndex.from_frame(df[list(keys)].astype(str)).factorize()[0]
        if len(df)
        else np.zeros(0, int)
    )
    idx, counts = _best_positions(
        np.asarray(groups), df["energy_per_token_j"].to_numpy(dtype=float)
    )
    return df.iloc[idx].assign(n_configs=counts)


def _sort_positions(
    df: pd.DataFrame,
    positions: np.ndarray,
    by: str,
    descending: bool,
    counts: np.ndarray | None = None,
) -> np.ndarray:
    """Order of ``positions`` sorted on ``by`` (``n_configs``: on ``counts``, when given)."""
    if by not in SORTABLE:
        raise KeyError(f"cannot sort on {by!r}; choose one of {', '.join(SORTABLE)}")
    if by == "n_configs" and by not in df.columns:
        values = counts if counts is not None else np.ones(len(positions), dtype=int)
        col = pd.Series(values)
    else:
        col = df[by].iloc[positions].reset_index(drop=True)
    order = col.sort_values(
        ascending=not descending, kind="stable", na_position="last"
    ).index.to_numpy()
    return order


def sort_rows(df: pd.DataFrame, by: str, descending: bool = False) -> pd.DataFrame:
    """Sort on one column, missing values last, ties kept in input order.

    Raises:
        KeyError: If ``by`` is not a sortable column.
    """
    return df.iloc[_sort_positions(df, np.arange(len(df)), by, descending)]


def query_table(df: pd.DataFrame, q: TableQuery) -> TableResult:
    """Answer one table request: filter, limit, best configuration, sort and paginate.

    Works on row positions so that only the page's rows are materialised (a query over
    100,000 runs stays well under 300 ms).

    Args:
        df: A frame from :func:`prepare_runs` (with quality attached if wanted).
        q: The query.

    Returns:
        The requested page and everything behind it.
    """
    positions = np.flatnonzero(filter_mask(df, q))
    if q.best_only:
        groups = df["_group"].to_numpy()[positions]
        energy = df["energy_per_token_j"].to_numpy(dtype=float)[positions]
        idx, counts = _best_positions(groups, energy)
        positions = positions[idx]
    else:
        counts = np.ones(len(positions), dtype=int)
    order = _sort_positions(df, positions, q.sort_by, q.descending, counts)
    positions, counts = positions[order], counts[order]
    if "apart" in df.columns:  # rows not measured on GPUs come after the measured ones
        below = np.argsort(df["apart"].to_numpy(dtype=bool)[positions], kind="stable")
        positions, counts = positions[below], counts[below]
    total = len(positions)
    size = max(1, int(q.page_size))
    pages = max(1, math.ceil(total / size))
    page = min(max(1, int(q.page)), pages)
    sl = slice((page - 1) * size, page * size)
    page_rows = df.iloc[positions[sl]].assign(n_configs=counts[sl])
    return TableResult(
        page_rows=page_rows,
        total=total,
        page=page,
        pages=pages,
        _frame=df,
        _positions=positions,
        _counts=counts,
    )


def filter_choices(df: pd.DataFrame) -> dict[str, Any]:
    """Return the values each filter can take, sorted, for the UI's pickers.

    Returns:
        Keys ``task``, ``hardware``, ``dtype``, ``accelerator_count``, ``source_kind``,
        ``source_class``, ``method``, ``model_id``, plus ``max_itl_ms`` and
        ``max_energy_per_token_j`` (the data's finite maxima; 0.0 for an empty frame).
    """

    def _max(name: str) -> float:
        s = df[name] if name in df.columns else pd.Series(dtype=float)
        s = s[np.isfinite(pd.to_numeric(s, errors="coerce").astype(float))]
        return float(s.max()) if len(s) else 0.0

    def _values(name: str) -> list:
        if not len(df) or name not in df.columns:
            return []
        return sorted(v for v in df[name].unique().tolist() if v)

    return {
        "task": sorted(df["task"].unique().tolist()) if len(df) else [],
        "hardware": sorted(df["hardware"].unique().tolist()) if len(df) else [],
        "dtype": sorted(d for d in df["dtype"].unique().tolist() if d) if len(df) else [],
        "accelerator_count": sorted(int(c) for c in df["accelerator_count"].unique())
        if len(df)
        else [],
        "source_kind": sorted(df["source_kind"].unique().tolist()) if len(df) else [],
        "source_class": [c for c in SOURCE_CLASSES if c in set(_values("source_class"))],
        "method": _values("method_kind"),
        "model_id": sorted(df["model_id"].unique().tolist()) if len(df) else [],
        "max_itl_ms": _max("itl_ms"),
        "max_energy_per_token_j": _max("energy_per_token_j"),
    }


def slider_limit(value: float, cap: float = math.inf) -> float:
    """A slider's end: a maximum rounded up to two significant digits (449.6 -> 450).

    Whatever is stored, the end is finite and sane: at most ``cap`` (rows beyond it still
    show while the slider is at its end, which means "no limit"), and 1.0 for a missing,
    non-positive, infinite or NaN maximum; tiny maxima end at 1e-6.
    """
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 1.0
    if not math.isfinite(value) or value <= 0:
        return 1.0 if not math.isfinite(cap) else min(1.0, cap)
    value = min(max(value, 1e-6), cap)
    step = 10 ** (math.floor(math.log10(value)) - 1)
    return float(min(math.ceil(value / step - 1e-9) * step, cap))


def export_columns(rows: pd.DataFrame) -> pd.DataFrame:
    """Return the shown columns of ``rows``, in display order, with their labels as headers."""
    cols = [c for c in with_footprint(COLUMNS) if c.name in rows.columns]
    out = rows[[c.name for c in cols]].copy()
    out.columns = [f"{c.label}" for c in cols]
    return out


def to_csv(rows: pd.DataFrame) -> str:
    """Serialise the shown columns of ``rows`` as CSV text (units are in the headers).

    Text cells that a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@`` first)
    are prefixed with a quote, so a hostile model name cannot execute in Excel.
    """
    out = export_columns(rows)
    for name in out.columns:
        if not pd.api.types.is_numeric_dtype(out[name]):
            out[name] = out[name].map(
                lambda v: "'" + v if isinstance(v, str) and v[:1] in ("=", "+", "-", "@") else v
            )
    buf = io.StringIO()
    out.to_csv(buf, index=False)
    return buf.getvalue()
