"""Percentiles of per-request figures (linear interpolation, as numpy's default)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mlenergy.records import Percentiles


def percentiles(values: Sequence[float | None]) -> Percentiles | None:
    """p50, p90, p99 and mean of ``values`` (units kept); ``None`` when there are none."""
    arr = np.asarray([v for v in values if v is not None], dtype=float)
    if arr.size == 0:
        return None
    p50, p90, p99 = np.percentile(arr, [50, 90, 99]).tolist()
    return Percentiles(p50=p50, p90=p90, p99=p99, mean=float(arr.mean()))
