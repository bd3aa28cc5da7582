"""The roofline pieces every time model shares: achieved bandwidth and the soft maximum.

Serving (:mod:`~mlenergy.estimate.physics`), offline jobs and the training step and pipeline
instructions (:mod:`~mlenergy.estimate.training`) stream bytes at :func:`effective_bandwidth`;
the serving rooflines and the training work combine memory and compute time with
:func:`soft_max`.
"""

from __future__ import annotations

from typing import overload

import numpy as np

from mlenergy.estimate.coefficients import Coefficients


@overload
def effective_bandwidth(
    bandwidth_b_s: float, c: Coefficients, ceiling_b_s: float | None = None
) -> float: ...
@overload
def effective_bandwidth(
    bandwidth_b_s: np.ndarray, c: Coefficients, ceiling_b_s: float | None = None
) -> np.ndarray: ...
def effective_bandwidth(
    bandwidth_b_s: float | np.ndarray, c: Coefficients, ceiling_b_s: float | None = None
) -> float | np.ndarray:
    """Achieved memory bandwidth in bytes/s for streaming weights and KV cache.

    ``eta_mem`` times the datasheet figure in series with a GPU-independent streaming
    ceiling: ``1 / (1 / (eta_mem BW) + 1 / ceiling)``. Latency-bound loads do not speed up
    with the memory, so faster HBM is harder to saturate.

    Args:
        bandwidth_b_s: Datasheet memory bandwidth in bytes/s (scalar or array).
        c: Coefficients (``eta_mem``, ``mem_ceiling``).
        ceiling_b_s: The ceiling in bytes/s (default ``c.mem_ceiling``, the dense weights',
            KV cache's and state's; the routed experts stream under ``c.moe_ceiling``).
    """
    ceiling = c.mem_ceiling if ceiling_b_s is None else ceiling_b_s
    return 1.0 / (1.0 / (c.eta_mem * bandwidth_b_s) + 1.0 / ceiling)


@overload
def soft_max(x: float, y: float, p: float) -> float: ...
@overload
def soft_max(x: np.ndarray, y: np.ndarray | float, p: float) -> np.ndarray: ...
@overload
def soft_max(x: float, y: np.ndarray, p: float) -> np.ndarray: ...
def soft_max(x: np.ndarray | float, y: np.ndarray | float, p: float) -> np.ndarray | float:
    """Smooth maximum ``(x^p + y^p)^(1/p)`` of two times (roofline with partial overlap)."""
    if p == 3.0:  # the shipped exponent: cube and cube root are much faster than power
        return np.cbrt(x * x * x + y * y * y)
    return np.power(np.power(x, p) + np.power(y, p), 1.0 / p)
