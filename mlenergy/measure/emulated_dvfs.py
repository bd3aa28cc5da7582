"""Emulated GPUs whose power and speed respond to locked SM clocks and power limits.

An extension of :mod:`mlenergy.measure.emulated` for the optimizers' tests: a
:class:`ClockResponsiveGPU` accepts Zeus's ``set_gpu_locked_clocks`` and
``set_power_management_limit`` and changes what it does. Busy power at clock ``f`` (fraction
``r`` of the maximum) is ``idle + static + dynamic x r x V(r)^2`` with the core voltage falling
linearly from 1 at the maximum clock to ``voltage_floor`` at ``knee`` x max and flat below it;
a power limit lowers the effective clock to the highest one whose busy power fits. Work emulated
with :meth:`ClockResponsiveGPU.run` takes ``seconds_at_max x (compute / r + (1 - compute))``.
The energy counter integrates the power of every busy and idle interval exactly, so a test
knows the true figure.

Example::

    with install_clock_responsive_gpus(count=1) as gpus:
        gpu = gpus.gpus[0]
        zeus_gpus = zeus.device.get_gpus()
        zeus_gpus.set_gpu_locked_clocks(0, 1200, 1200)
        gpu.run(0.05)  # sleeps longer than at 1980 MHz, draws less power
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from zeus.device.cpu.common import EmptyCPUs

from mlenergy.measure.emulated import EMULATED_GPU_NAME, EmulatedGPU, EmulatedGPUs


@dataclass(frozen=True)
class DvfsModel:
    """Power and speed of an emulated GPU against its SM clock (W, MHz).

    Attributes:
        max_clock_mhz: Highest SM clock.
        min_clock_mhz: Lowest SM clock.
        clock_step_mhz: Step between supported clocks.
        idle_w: Power when idle.
        static_w: Extra power whenever busy, at any clock.
        dynamic_w: Dynamic power at the maximum clock and voltage.
        voltage_floor: Core voltage at and below the knee, relative to the maximum.
        knee: Clock fraction below which the voltage stays at its floor.
        compute_fraction: Part of the work whose time scales with 1 / clock.
        max_power_limit_w: Default (highest) power limit.
        min_power_limit_w: Lowest power limit accepted.
    """

    max_clock_mhz: int = 1980
    min_clock_mhz: int = 990
    clock_step_mhz: int = 90
    idle_w: float = 60.0
    static_w: float = 90.0
    dynamic_w: float = 450.0
    voltage_floor: float = 0.7
    knee: float = 0.6
    compute_fraction: float = 0.9
    max_power_limit_w: float = 700.0
    min_power_limit_w: float = 200.0

    def clocks(self) -> list[int]:
        """Supported clocks, highest first (MHz)."""
        return list(range(self.max_clock_mhz, self.min_clock_mhz - 1, -self.clock_step_mhz))

    def busy_power_w(self, clock_mhz: float) -> float:
        """Power while running work at ``clock_mhz`` (W)."""
        r = clock_mhz / self.max_clock_mhz
        v = self.voltage_floor + (1 - self.voltage_floor) * max(r - self.knee, 0) / (1 - self.knee)
        return self.idle_w + self.static_w + self.dynamic_w * r * v * v

    def time_factor(self, clock_mhz: float) -> float:
        """Work time at ``clock_mhz`` relative to the maximum clock."""
        r = clock_mhz / self.max_clock_mhz
        return self.compute_fraction / r + (1 - self.compute_fraction)


class ClockResponsiveGPU(EmulatedGPU):
    """An emulated GPU that obeys locked clocks and power limits (see module docstring).

    Args:
        gpu_index: Index of the GPU.
        model: Its power and speed model.
        name: What :meth:`get_name` returns.
    """

    def __init__(
        self, gpu_index: int, model: DvfsModel | None = None, name: str = EMULATED_GPU_NAME
    ) -> None:
        self.model = model or DvfsModel()
        super().__init__(gpu_index, self.model.idle_w, name, 0.0, self.model.max_power_limit_w)
        self._lock = threading.Lock()
        self._locked_mhz: int | None = None
        self._busy = False
        self._energy_mj = 0.0
        self._last = time.time()
        self.clock_log: list[int] = []  # effective clock of every run, for tests

    def _accrue(self) -> None:
        now = time.time()
        self._energy_mj += 1000.0 * self._power_w() * (now - self._last)
        self._last = now

    def _power_w(self) -> float:
        return (
            self.model.busy_power_w(self.effective_clock_mhz()) if self._busy else self.model.idle_w
        )

    def effective_clock_mhz(self) -> int:
        """The clock work runs at: the locked one, lowered until busy power fits the limit."""
        limit_w = self._limit_mw / 1000.0
        for clock in self.model.clocks():
            if self._locked_mhz is not None and clock > self._locked_mhz:
                continue
            if self.model.busy_power_w(clock) <= limit_w:
                return clock
        return self.model.min_clock_mhz

    def run(self, seconds_at_max: float) -> float:
        """Emulate work that takes ``seconds_at_max`` at the maximum clock; return its time (s)."""
        with self._lock:
            self._accrue()
            self._busy = True
            clock = self.effective_clock_mhz()
        self.clock_log.append(clock)
        duration = seconds_at_max * self.model.time_factor(clock)
        time.sleep(duration)
        with self._lock:
            self._accrue()
            self._busy = False
        return duration

    def get_power_management_limit_constraints(self) -> tuple[int, int]:
        """Return (min, max) power limits. Units: mW."""
        return (int(self.model.min_power_limit_w * 1000), int(self.model.max_power_limit_w * 1000))

    def set_power_management_limit(self, power_limit_mw: int, block: bool = True) -> None:
        """Set the power limit; later work runs at the clock that fits it. Units: mW."""
        with self._lock:
            self._accrue()
            self._limit_mw = int(power_limit_mw)

    def reset_power_management_limit(self, block: bool = True) -> None:
        """Reset the power limit to its default."""
        self.set_power_management_limit(self._default_limit_mw)

    def get_supported_graphics_clocks(self, memory_clock_mhz: int | None = None) -> list[int]:
        """Supported SM clocks, highest first. Units: MHz."""
        return self.model.clocks()

    def set_gpu_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        """Lock the SM clock (work runs at ``max_clock_mhz`` or the highest below it)."""
        with self._lock:
            self._accrue()
            self._locked_mhz = int(max_clock_mhz)

    def reset_gpu_locked_clocks(self, block: bool = True) -> None:
        """Unlock the SM clock."""
        with self._lock:
            self._accrue()
            self._locked_mhz = None

    def get_instant_power_usage(self) -> int:
        """Return the power now. Units: mW."""
        return round(self._power_w() * 1000)

    def get_total_energy_consumption(self) -> int:
        """Return the energy counter (exact integral of power). Units: mJ."""
        with self._lock:
            self._accrue()
            return int(self._energy_mj)


@contextmanager
def install_clock_responsive_gpus(
    count: int = 1, model: DvfsModel | None = None
) -> Iterator[EmulatedGPUs]:
    """Replace Zeus's GPU singleton with :class:`ClockResponsiveGPU` s for a ``with`` block.

    Zeus's CPU singleton is emptied meanwhile, so a real RAPL counter does not leak in.
    """
    import zeus.device.cpu as zcpu
    import zeus.device.gpu as zgpu

    gpus = EmulatedGPUs(gpus=[ClockResponsiveGPU(i, model) for i in range(count)])
    saved_gpus, saved_cpus = zgpu._gpus, zcpu._cpus
    zgpu._gpus, zcpu._cpus = gpus, EmptyCPUs()
    try:
        yield gpus
    finally:
        zgpu._gpus, zcpu._cpus = saved_gpus, saved_cpus
