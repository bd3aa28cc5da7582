"""When each request is sent: all at once, or at a mean rate with gamma-distributed gaps.

As vLLM's serving benchmark (``benchmarks/serve.py``, ``get_request``): with a finite
``request_rate`` the gaps between arrivals are drawn from a gamma distribution with shape
``burstiness`` and scale ``1 / (request_rate x burstiness)``, so their mean is
``1 / request_rate`` whatever the burstiness; ``burstiness == 1`` is a Poisson process, lower is
burstier, higher is more regular. An infinite rate sends every request at time 0 (the level then
caps how many are in flight).
"""

from __future__ import annotations

import math

import numpy as np

from mlenergy.errors import UserError


def parse_request_rate(text: str | float) -> float:
    """Parse ``--request-rate``: ``inf`` or a positive number of requests per second.

    Raises:
        UserError: Not ``inf`` and not a positive finite number.
    """
    raw = str(text).strip().lower()
    try:
        rate = float(raw)
    except ValueError:
        rate = math.nan
    if not (rate > 0):
        raise UserError(
            f"--request-rate {text!r} is not 'inf' or a positive number of requests per second",
            "Pass e.g. --request-rate inf or --request-rate 4",
        )
    return rate


def arrival_offsets_s(
    num_requests: int, request_rate: float, burstiness: float = 1.0, seed: int = 0
) -> list[float]:
    """Send time of each request in seconds after the first, non-decreasing.

    Args:
        num_requests: How many requests (at least 1).
        request_rate: Mean requests per second; ``math.inf`` sends all at time 0.
        burstiness: Gamma shape of the gaps (> 0; 1.0 is Poisson).
        seed: Seed of the draw (same seed, same schedule).

    Returns:
        ``num_requests`` offsets; the first is 0.

    Raises:
        UserError: A non-positive count, rate or burstiness.
    """
    if num_requests < 1:
        raise UserError(f"--num-requests {num_requests} must be at least 1", "Pass e.g. 256")
    if not request_rate > 0:
        raise UserError(f"--request-rate {request_rate} must be positive", "Pass e.g. inf or 4")
    if not (burstiness > 0 and math.isfinite(burstiness)):
        raise UserError(
            f"--burstiness {burstiness} must be a positive number",
            "Pass 1.0 for Poisson arrivals, below 1 for bursts, above 1 for regular gaps",
        )
    if math.isinf(request_rate):
        return [0.0] * num_requests
    rng = np.random.default_rng(seed)
    theta = 1.0 / (request_rate * burstiness)
    gaps = rng.gamma(shape=burstiness, scale=theta, size=num_requests - 1)
    return [0.0, *np.cumsum(gaps).tolist()]
