"""Pareto frontiers of two objectives (e.g. energy per token versus perplexity or latency).

A point is on the frontier when no other point is at least as good on both objectives and
strictly better on one. Shared by the study report, the notebooks and the leaderboard.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def pareto_mask(
    x: np.ndarray | pd.Series | list[float],
    y: np.ndarray | pd.Series | list[float],
    minimize_x: bool = True,
    minimize_y: bool = True,
) -> np.ndarray:
    """Return a boolean mask of the points on the Pareto frontier of ``(x, y)``.

    Points with a NaN in either objective are never on the frontier. Exact duplicates of a
    frontier point are all kept. Runs in O(n log n).

    Args:
        x: First objective, one value per point (any unit).
        y: Second objective, one value per point (any unit).
        minimize_x: Whether smaller ``x`` is better.
        minimize_y: Whether smaller ``y`` is better.

    Returns:
        A boolean array, ``True`` where the point is Pareto-optimal.
    """
    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError("x and y must be one-dimensional and of equal length")
    # Normalise to "minimise both".
    xs = xs if minimize_x else -xs
    ys = ys if minimize_y else -ys
    mask = np.zeros(xs.shape, dtype=bool)
    valid = np.flatnonzero(~(np.isnan(xs) | np.isnan(ys)))
    if valid.size == 0:
        return mask
    # Sort by x, then y; sweep keeping the best y seen so far.
    order = valid[np.lexsort((ys[valid], xs[valid]))]
    best_y = np.inf
    prev: tuple[float, float] | None = None
    mask_prev = False
    for i in order:
        point = (xs[i], ys[i])
        if point == prev:  # exact duplicate of the previous frontier point
            mask[i] = mask_prev
            continue
        mask_prev = bool(ys[i] < best_y)
        mask[i] = mask_prev
        if mask_prev:
            best_y = ys[i]
        prev = point
    return mask


def pareto_frontier(
    df: pd.DataFrame,
    x: str,
    y: str,
    minimize_x: bool = True,
    minimize_y: bool = True,
) -> pd.DataFrame:
    """Return the rows of ``df`` on the Pareto frontier of columns ``x`` and ``y``, sorted by ``x``.

    Args:
        df: One row per point.
        x: Column of the first objective.
        y: Column of the second objective.
        minimize_x: Whether smaller ``x`` is better.
        minimize_y: Whether smaller ``y`` is better.

    Returns:
        A copy of the frontier rows, sorted by ``x`` ascending.
    """
    if df.empty:
        return df.copy()
    for col in (x, y):
        if col not in df.columns:
            raise KeyError(f"column {col!r} not in frame (has: {', '.join(map(str, df.columns))})")
    mask = pareto_mask(df[x].to_numpy(), df[y].to_numpy(), minimize_x, minimize_y)
    return df.loc[mask].sort_values(x, kind="stable").copy()
