"""The one power model of a GPU: idle, static and dynamic power, one voltage-frequency relation.

Serving and offline jobs (:mod:`~mlenergy.estimate.physics`), the training step and every
pipeline instruction (:mod:`~mlenergy.estimate.training`,
:mod:`~mlenergy.estimate.training_pipeline`) draw power per GPU as::

    idle + (TDP - idle) * (p_base r + p_comp u_comp r v(r)^2 + p_mem u_busy + p_quant u_quant)

where ``r`` is the SM clock over its maximum, ``u_comp`` the share of the time the tensor
cores are busy, ``u_busy`` the share that memory traffic or collectives keep the GPU busy,
``u_quant`` the share spent dequantising scaled low-precision weights as they stream, and
``v(r)`` the relative core voltage (:func:`relative_voltage`). ``idle`` is the catalog's
measured idle power, else ``idle_frac x TDP`` (:func:`idle_power_w`).

Above the power limit the driver lowers the clock until the draw fits: every mode finds that
clock with :func:`throttled_clock`, so a job capped at its TDP runs slower, not at the
requested clock with clipped power.

Units: power in W, clocks in MHz, shares dimensionless.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from mlenergy.estimate.coefficients import Coefficients

VOLTAGE_KNEE_FRACTION = 0.6
"""Clock (fraction of the maximum) at and below which the core voltage stays at its floor.

Above it the voltage rises linearly to 1 at the maximum clock; below it, dynamic energy per
operation stops falling while static power keeps accruing over a longer time, so energy rises
again. A prior read from the measured A40 profiles of GPT-3 175B and Bloom 176B (Perseus,
SOSP 2024): their least-energy clocks are 945-1140 MHz of 1740 MHz (0.54-0.66 of the
maximum). Serving at the maximum clock (all the calibration data) is unaffected by it.
"""
UNKNOWN_MIN_CLOCK_FRACTION = 0.3
"""Lowest SM clock, as a fraction of the maximum, of a GPU whose spec does not give it."""
THROTTLE_BISECTIONS = 14
"""Bisection steps of :func:`throttled_clock` (the clock to within ``range / 2**14``)."""
POWER_CAP_TOLERANCE = 1.0001
"""A draw above ``cap x`` this is over the cap (rounding in the power sum is not)."""


def relative_voltage(r: np.ndarray | float, floor: float) -> np.ndarray | float:
    """Core voltage relative to that at the maximum clock.

    Flat at ``floor`` up to :data:`VOLTAGE_KNEE_FRACTION` of the maximum clock, then linear to
    1 at the maximum.

    Args:
        r: SM clock over the maximum SM clock (scalar or array).
        floor: Relative voltage at and below the knee (``Coefficients.voltage_floor``).
    """
    knee = VOLTAGE_KNEE_FRACTION
    above = np.maximum(np.asarray(r, dtype=float) - knee, 0.0) / (1.0 - knee)
    v = floor + (1.0 - floor) * above
    return float(v) if np.ndim(v) == 0 else v


def lowest_clock_mhz(min_clock_mhz: float | None, max_clock_mhz: float) -> float:
    """The lowest SM clock the driver may throttle to (MHz): the spec's, else 0.3 x max."""
    return float(min_clock_mhz or UNKNOWN_MIN_CLOCK_FRACTION * max_clock_mhz)


def idle_power_w(
    catalog_idle_w: np.ndarray | float | None, tdp_w: np.ndarray | float, c: Coefficients
) -> np.ndarray | float:
    """Idle power per GPU (W): the catalog's figure, else ``idle_frac x TDP``.

    Args:
        catalog_idle_w: Measured idle power; ``None`` (scalar) or NaN (array) when unknown.
        tdp_w: Thermal design power (W).
        c: Coefficients (``idle_frac``).
    """
    if catalog_idle_w is None:
        return c.idle_frac * tdp_w
    if np.ndim(catalog_idle_w) == 0:
        idle = float(catalog_idle_w)
        return c.idle_frac * tdp_w if np.isnan(idle) else idle
    return np.where(np.isnan(catalog_idle_w), c.idle_frac * tdp_w, catalog_idle_w)


@dataclass(frozen=True)
class GpuPower:
    """One GPU's power by term (W; scalars or arrays of one shape).

    Attributes:
        idle: Static power drawn whatever the GPU does.
        base: Clock-proportional power of a GPU that runs (``p_base r``).
        compute: Tensor-core power (``p_comp u_comp r v(r)^2``).
        memory: Power while memory traffic or collectives keep it busy (``p_mem u_busy``).
        quant: Power of dequantising scaled low-precision weights (``p_quant u_quant``).
    """

    idle: np.ndarray | float
    base: np.ndarray | float
    compute: np.ndarray | float
    memory: np.ndarray | float
    quant: np.ndarray | float

    @property
    def total(self) -> np.ndarray | float:
        """Uncapped draw (W)."""
        return self.idle + self.base + self.compute + self.memory + self.quant


def gpu_power(
    idle_w: np.ndarray | float,
    tdp_w: np.ndarray | float,
    r: np.ndarray | float,
    u_comp: np.ndarray | float,
    u_busy: np.ndarray | float,
    c: Coefficients,
    u_quant: np.ndarray | float = 0.0,
) -> GpuPower:
    """Power of one GPU by term, uncapped (see the module docstring).

    Args:
        idle_w: Idle power (W), :func:`idle_power_w`.
        tdp_w: Thermal design power (W).
        r: SM clock over the maximum SM clock.
        u_comp: Share of the time the tensor cores are busy (0-1).
        u_busy: Share of the time memory traffic or collectives keep the GPU busy (0-1).
        c: Coefficients (``p_base``, ``p_comp``, ``p_mem``, ``p_quant``, ``voltage_floor``).
        u_quant: Share of the time spent dequantising streamed weights (0-1).
    """
    span = tdp_w - idle_w
    volt = relative_voltage(r, c.voltage_floor)
    return GpuPower(
        idle=idle_w,
        base=span * c.p_base * r,
        compute=span * c.p_comp * u_comp * r * volt * volt,
        memory=span * c.p_mem * u_busy,
        quant=span * c.p_quant * u_quant,
    )


def throttled_clock(
    power_at: Callable[[np.ndarray], np.ndarray],
    clock: np.ndarray,
    min_clock: np.ndarray | float,
    cap_w: np.ndarray | float,
    rows: Callable[[np.ndarray], Callable[[np.ndarray], np.ndarray]] | None = None,
) -> np.ndarray:
    """The clock the driver settles at: the highest at or below ``clock`` whose draw fits.

    Rows whose draw at ``clock`` is within ``cap_w`` keep it; the others are bisected between
    ``min_clock`` and ``clock`` (:data:`THROTTLE_BISECTIONS` steps, the fitting end kept).
    A row that does not fit even at ``min_clock`` ends there.

    Args:
        power_at: Power per GPU (W) of every row given a clock per row (MHz).
        clock: Requested clock per row (MHz), 1-D.
        min_clock: Lowest clock per row, or one for every row (MHz).
        cap_w: Power limit per GPU, per row or one for every row (W).
        rows: ``rows(idx)`` is ``power_at`` of the rows ``idx`` only, so the bisection
            evaluates the rows over the cap alone (default: ``power_at`` with the other rows
            at their requested clock, then ``[idx]``).

    Returns:
        The clock per row (MHz), a new array.
    """
    clock = np.array(clock, dtype=float)
    over = power_at(clock) > cap_w * POWER_CAP_TOLERANCE
    if not over.any():
        return clock
    idx = np.flatnonzero(over)
    if rows is not None:
        sub = rows(idx)
    else:

        def sub(mid: np.ndarray) -> np.ndarray:
            full = clock.copy()
            full[idx] = mid
            return np.asarray(power_at(full))[idx]

    lo = np.broadcast_to(np.asarray(min_clock, dtype=float), clock.shape)[idx]
    hi = clock[idx]
    cap = np.broadcast_to(np.asarray(cap_w, dtype=float), clock.shape)[idx]
    for _ in range(THROTTLE_BISECTIONS):
        mid = 0.5 * (lo + hi)
        ok = sub(mid) <= cap
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    clock[idx] = lo
    return clock


def settled_clock(
    power_at: Callable[[float], float], clock: float, min_clock: float, cap_w: float
) -> float:
    """:func:`throttled_clock` of one configuration (scalars; MHz and W).

    The same bisection in Python floats (the same operations, so the same clock to the bit):
    one configuration pays no array overhead per step.
    """
    clock, cap = float(clock), float(cap_w)
    if not power_at(clock) > cap * POWER_CAP_TOLERANCE:
        return clock
    lo, hi = float(min_clock), clock
    for _ in range(THROTTLE_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if power_at(mid) <= cap:
            lo = mid
        else:
            hi = mid
    return lo
