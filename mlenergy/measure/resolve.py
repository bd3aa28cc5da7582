"""Measure short work over a window the energy counter can resolve: repeat it, then divide.

A window shorter than ten counter update periods (:mod:`mlenergy.measure.counter_period`) can
read a whole period too much or too little. :func:`measure_resolved` runs ``passes`` copies of
the work inside one window, and when the window still came out flagged it grows ``passes`` to
reach the meter's target length and measures again. The figures it returns are *per pass*.
A window that never became resolvable yields ``energy_j=None`` (with a warning): a flagged
window never becomes a reported figure.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mlenergy.measure.counter_period import windows_needed

if TYPE_CHECKING:
    from mlenergy.measure.meter import EnergyMeter
    from mlenergy.measure.window_result import WindowResult

MAX_ATTEMPTS = 4
"""Windows tried before a phase is given up as unresolvable."""


def per_pass(result: WindowResult, passes: int) -> WindowResult:
    """A window's figures divided by the passes it held (time, energy, every device)."""
    if passes == 1:
        return result

    def div(values: dict[str, float]) -> dict[str, float]:
        return {k: v / passes for k, v in values.items()}

    return dataclasses.replace(
        result,
        duration_s=result.duration_s / passes,
        energy_j=None if result.energy_j is None else result.energy_j / passes,
        energy_by_device_j=div(result.energy_by_device_j),
        host_energy_j=None if result.host_energy_j is None else result.host_energy_j / passes,
        host_energy_by_device_j=div(result.host_energy_by_device_j),
    )


def summed(a: WindowResult, b: WindowResult) -> WindowResult:
    """Two consecutive phases' per-pass results as one (the request = prefill + decode)."""

    def add(x: float | None, y: float | None) -> float | None:
        return None if x is None or y is None else x + y

    def merge(x: dict[str, float], y: dict[str, float]) -> dict[str, float]:
        return {k: x.get(k, 0.0) + y.get(k, 0.0) for k in set(x) | set(y)}

    return dataclasses.replace(
        a,
        name=f"{a.name}+{b.name}",
        duration_s=a.duration_s + b.duration_s,
        energy_j=add(a.energy_j, b.energy_j),
        energy_by_device_j=merge(a.energy_by_device_j, b.energy_by_device_j),
        host_energy_j=add(a.host_energy_j, b.host_energy_j),
        host_energy_by_device_j=merge(a.host_energy_by_device_j, b.host_energy_by_device_j),
        resolvable=a.resolvable and b.resolvable,
    )


def _unreported(result: WindowResult) -> WindowResult:
    return dataclasses.replace(
        result, energy_j=None, energy_by_device_j={}, host_energy_j=None, host_energy_by_device_j={}
    )


def measure_resolved(
    meter: EnergyMeter,
    name: str,
    run: Callable[[int], Any],
    passes: int = 1,
    attempts: int = MAX_ATTEMPTS,
) -> tuple[WindowResult, int, Any]:
    """Measure ``run(passes)`` in one window, growing ``passes`` until the window resolves.

    Args:
        meter: The meter (its ``target_window_s`` is the length aimed for).
        name: Window name.
        run: Does the work ``passes`` times back to back (and waits for the device at the end);
            its return value is passed through.
        passes: Passes to start with (from a timing of the work).
        attempts: Windows to try at most.

    Returns:
        ``(per-pass result, passes used, run's output)``; the result's ``energy_j`` is ``None``
        when no attempt gave a resolvable window.
    """
    passes = max(1, int(passes))
    target = getattr(meter, "target_window_s", 0.0)
    result: WindowResult
    for attempt in range(attempts):
        with meter.window(name) as w:
            out = run(passes)
        measured = w.result
        assert measured is not None
        result = measured
        if result.resolvable:
            return per_pass(result, passes), passes, out
        if attempt + 1 < attempts:
            grown = windows_needed(result.duration_s / passes, target)
            passes = max(2 * passes, grown)
    warnings.warn(
        f"window {name!r} stayed shorter than ten counter periods after {attempts} tries "
        f"({passes} passes, {result.duration_s:.3g} s): its energy is not reported",
        RuntimeWarning,
        stacklevel=2,
    )
    return _unreported(per_pass(result, passes)), passes, out
