"""Bootstrap confidence intervals over repeats and seeds.

Percentile bootstrap with a fixed seed, so a report computed twice from the same store shows
the same intervals. With a single observation there is no spread to resample: the interval
collapses to the value and ``n`` says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class BootstrapCI:
    """A statistic with its bootstrap confidence interval (same unit as the data).

    Attributes:
        estimate: The statistic on the original sample.
        low: Lower bound of the interval.
        high: Upper bound of the interval.
        n: Observations used (after dropping NaN).
        confidence: Interval coverage, e.g. 0.95.
    """

    estimate: float
    low: float
    high: float
    n: int
    confidence: float

    @property
    def half_width(self) -> float:
        """Half the interval width (0 for a single observation)."""
        return (self.high - self.low) / 2.0


def _clean(values: Sequence[float] | np.ndarray | pd.Series) -> np.ndarray:
    arr = np.asarray(values, dtype=float).reshape(-1)
    return arr[~np.isnan(arr)]


def bootstrap_ci(
    values: Sequence[float] | np.ndarray | pd.Series,
    statistic: Callable[[np.ndarray], float] = np.mean,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> BootstrapCI | None:
    """Percentile-bootstrap interval of ``statistic`` over ``values``.

    Args:
        values: Observations (NaN dropped), e.g. one energy per seed.
        statistic: Function of a 1-D array (default: the mean).
        confidence: Coverage in ``(0, 1)``.
        n_resamples: Bootstrap resamples.
        seed: Seed of the resampling.

    Returns:
        The interval, or ``None`` when no observation is left.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    arr = _clean(values)
    if arr.size == 0:
        return None
    est = float(statistic(arr))
    if arr.size == 1 or np.all(arr == arr[0]):
        return BootstrapCI(est, est, est, int(arr.size), confidence)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(n_resamples, arr.size))
    stats = np.array([statistic(arr[row]) for row in idx], dtype=float)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return BootstrapCI(est, float(min(low, est)), float(max(high, est)), int(arr.size), confidence)


def bootstrap_ratio_ci(
    numerator: Sequence[float] | np.ndarray | pd.Series,
    denominator: Sequence[float] | np.ndarray | pd.Series,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> BootstrapCI | None:
    """Interval of ``mean(numerator) / mean(denominator)``, resampling both groups independently.

    Used to compare two model families (e.g. MoE energy over dense energy, per seed).

    Args:
        numerator: Observations of the first group.
        denominator: Observations of the second group (mean must be non-zero).
        confidence: Coverage in ``(0, 1)``.
        n_resamples: Bootstrap resamples.
        seed: Seed of the resampling.

    Returns:
        The ratio with its interval, or ``None`` if a group is empty or its mean is zero.
    """
    a, b = _clean(numerator), _clean(denominator)
    if a.size == 0 or b.size == 0 or b.mean() == 0:
        return None
    est = float(a.mean() / b.mean())
    if a.size == 1 and b.size == 1:
        return BootstrapCI(est, est, est, 1, confidence)
    rng = np.random.default_rng(seed)
    ra = a[rng.integers(0, a.size, size=(n_resamples, a.size))].mean(axis=1)
    rb = b[rng.integers(0, b.size, size=(n_resamples, b.size))].mean(axis=1)
    ok = rb != 0
    ratios = ra[ok] / rb[ok]
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(ratios, [alpha, 1.0 - alpha])
    n = int(min(a.size, b.size))
    return BootstrapCI(est, float(min(low, est)), float(max(high, est)), n, confidence)


def bootstrap_table(
    df: pd.DataFrame,
    by: str | list[str],
    value: str,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Mean of ``value`` per group with a bootstrap interval (over repeats or seeds).

    Args:
        df: One row per observation.
        by: Grouping column(s), e.g. ``"variant"``.
        value: Numeric column to summarise.
        confidence: Coverage.
        n_resamples: Bootstrap resamples.
        seed: Seed of the resampling.

    Returns:
        One row per group: the grouping columns, ``{value}_mean``, ``{value}_ci_low``,
        ``{value}_ci_high`` and ``n``.
    """
    keys = [by] if isinstance(by, str) else list(by)
    rows = []
    for group, sub in df.groupby(keys, sort=True, dropna=False):
        group_vals = group if isinstance(group, tuple) else (group,)
        ci = bootstrap_ci(sub[value], confidence=confidence, n_resamples=n_resamples, seed=seed)
        row = dict(zip(keys, group_vals, strict=True))
        row[f"{value}_mean"] = ci.estimate if ci else np.nan
        row[f"{value}_ci_low"] = ci.low if ci else np.nan
        row[f"{value}_ci_high"] = ci.high if ci else np.nan
        row["n"] = ci.n if ci else 0
        rows.append(row)
    cols = [*keys, f"{value}_mean", f"{value}_ci_low", f"{value}_ci_high", "n"]
    return pd.DataFrame(rows, columns=cols)
