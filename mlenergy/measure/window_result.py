"""The result of one measured window, and how a Zeus measurement becomes one.

:class:`WindowResult` is what :class:`~mlenergy.measure.meter.EnergyMeter` returns for a window;
the functions here split a Zeus measurement into the headline devices and the host devices
measured beside them, and refuse to sum an invalid figure (never a silent 0 J).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class WindowResult:
    """Time and energy of one measured window.

    Attributes:
        name: The window's name.
        duration_s: Wall time in seconds (as timed by Zeus).
        energy_j: Energy of the headline scope in joules (the GPUs when any is in scope);
            ``None`` when no valid figure exists (never a silent 0).
        energy_by_device_j: Joules per headline device: ``gpu:<i>``, or without GPUs
            ``cpu:<i>`` (RAPL package), ``dram:<i>``, or ``cpu:modelled``.
        energy_source: Where the figure came from, e.g. ``modelled:cpu-tdp``.
        start_time_s: Unix time at which the window began.
        host_energy_j: Joules of the RAPL packages (and DRAM) measured beside the GPUs; never
            part of ``energy_j``; ``None`` when none is measured beside.
        host_energy_by_device_j: ``host_energy_j`` per ``cpu:<i>`` / ``dram:<i>``.
        host_energy_source: Label of the host figures (``measured:zeus-rapl``).
        counter_period_s: Update period in seconds of the slowest headline counter.
        resolvable: ``False`` when the window was shorter than ten counter periods: its energy
            may be off by a whole period and must not be reported.
    """

    name: str
    duration_s: float
    energy_j: float | None
    energy_by_device_j: dict[str, float]
    energy_source: str
    start_time_s: float | None = None
    host_energy_j: float | None = None
    host_energy_by_device_j: dict[str, float] = field(default_factory=dict)
    host_energy_source: str | None = None
    counter_period_s: float = 0.0
    resolvable: bool = True

    @property
    def avg_power_w(self) -> float | None:
        """Average power over the window in watts (``None`` without energy or duration)."""
        if self.energy_j is None or self.duration_s <= 0:
            return None
        return self.energy_j / self.duration_s


class WindowHandle:
    """What ``with meter.window(name) as w`` binds; ``w.result`` is set when the block exits."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.result: WindowResult | None = None


def host_total(rapl: dict[str, float]) -> float | None:
    """Sum of the host figures, ``None`` when any is missing or invalid (never a silent 0)."""
    if not rapl or any(not math.isfinite(e) or e < 0 for e in rapl.values()):
        return None
    return sum(rapl.values())


def zeus_energies(measurement: Any, host_beside: bool) -> tuple[dict[str, float], dict[str, float]]:
    """Joules per device of a Zeus ``Measurement``: the headline devices, the host beside them.

    Args:
        measurement: What ``ZeusMonitor.end_window`` returned.
        host_beside: GPUs are in scope, so the RAPL packages (and DRAM) are kept apart.

    Returns:
        ``gpu:<i>`` (or, without GPUs, ``cpu:<i>`` / ``dram:<i>``) to joules, and the host
        ``cpu:<i>`` / ``dram:<i>`` to joules (empty unless ``host_beside``).
    """
    by_device = {f"gpu:{i}": float(e) for i, e in measurement.gpu_energy.items()}
    rapl = {f"cpu:{i}": float(e) for i, e in (measurement.cpu_energy or {}).items()}
    rapl.update({f"dram:{i}": float(e) for i, e in (measurement.dram_energy or {}).items()})
    if host_beside:
        return by_device, rapl
    by_device.update(rapl)
    return by_device, {}


def headline_energy(
    name: str, by_device: dict[str, float]
) -> tuple[float | None, dict[str, float]]:
    """The headline joules of a window: the sum, or ``None`` (with a warning) when any is invalid.

    Args:
        name: The window's name, for the warning.
        by_device: Joules per headline device.

    Returns:
        The total (``None`` when there is no device or a figure is negative or not finite) and
        the valid per-device figures.
    """
    if by_device and all(math.isfinite(e) and e >= 0 for e in by_device.values()):
        return sum(by_device.values()), by_device
    warnings.warn(
        f"window {name!r}: Zeus returned no valid energy ({by_device}); recording energy_j=None",
        RuntimeWarning,
        stacklevel=3,
    )
    return None, {k: v for k, v in by_device.items() if math.isfinite(v) and v >= 0}
