"""Emulated GPUs and RAPL CPUs that tests inject into Zeus's device singletons.

The real :class:`zeus.monitor.ZeusMonitor` code path then runs unchanged on a machine with no
GPU and no RAPL: Zeus reads our energy counters (mJ) and instant power (mW) exactly as it would
read NVML or RAPL. Power follows a known piecewise-constant function of wall time
(:class:`PowerProfile`), and the energy counter is its exact integral, so a test can compare
Zeus's figure with the analytic one. Records made with emulated devices are labelled
``emulated:*`` and are never accepted as submissions.

Example::

    with install_emulated_gpus(power_w=300.0, count=2):
        meter = EnergyMeter()            # energy_source == "emulated:zeus-gpu"
        with meter.window("x") as w:
            time.sleep(0.2)
        w.result.energy_j                # ~ 2 x 300 W x 0.2 s

Emulated devices live in this process only: Zeus's ``PowerMonitor`` polls in spawned
processes that would not see them, so :class:`~mlenergy.measure.meter.EnergyMeter` samples
emulated power in a thread instead.
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property

from zeus.device.cpu.common import CPU, CpuDramMeasurement, CPUs, EmptyCPUs
from zeus.device.gpu.common import GPU, GPUs, ZeusGPUNotSupportedError

EMULATED_GPU_NAME = "Emulated GPU"


@dataclass(frozen=True)
class PowerProfile:
    """Piecewise-constant power as a function of wall time.

    Attributes:
        steps: ``(offset_s, watts)`` pairs sorted by offset; the first offset must be 0. Power is
            ``watts`` from ``t0 + offset_s`` until the next step's offset (the last step lasts
            forever). Before ``t0`` power is the first step's.
        t0: Wall-clock origin (``time.time()`` seconds) of the offsets.
    """

    steps: tuple[tuple[float, float], ...]
    t0: float

    def __post_init__(self) -> None:
        if not self.steps or self.steps[0][0] != 0.0:
            raise ValueError("a PowerProfile needs steps starting at offset 0.0")
        offsets = [s[0] for s in self.steps]
        if offsets != sorted(offsets) or any(w < 0 for _, w in self.steps):
            raise ValueError("PowerProfile steps must have sorted offsets and non-negative watts")

    @classmethod
    def constant(cls, watts: float, t0: float | None = None) -> PowerProfile:
        """A constant power in watts."""
        return cls(steps=((0.0, float(watts)),), t0=time.time() if t0 is None else t0)

    @classmethod
    def piecewise(
        cls, steps: Sequence[tuple[float, float]], t0: float | None = None
    ) -> PowerProfile:
        """Piecewise-constant power from ``(offset_s, watts)`` steps, offsets from ``t0``."""
        return cls(
            steps=tuple((float(o), float(w)) for o, w in steps),
            t0=time.time() if t0 is None else t0,
        )

    @cached_property
    def _offsets(self) -> list[float]:
        return [s[0] for s in self.steps]

    @cached_property
    def _cumulative_j(self) -> list[float]:
        """Energy from ``t0`` to each step's offset, joules."""
        out = [0.0]
        for (a, watts), (b, _) in itertools.pairwise(self.steps):
            out.append(out[-1] + watts * (b - a))
        return out

    def power_w(self, t: float) -> float:
        """Power in watts at wall time ``t`` (seconds since the epoch)."""
        i = max(0, bisect.bisect_right(self._offsets, t - self.t0) - 1)
        return self.steps[i][1]

    def _energy_to(self, offset: float) -> float:
        """Energy from ``t0`` to ``t0 + offset`` (negative before ``t0``), joules."""
        if offset <= 0:
            return self.steps[0][1] * offset
        i = bisect.bisect_right(self._offsets, offset) - 1
        return self._cumulative_j[i] + self.steps[i][1] * (offset - self._offsets[i])

    def energy_j(self, t_start: float, t_end: float) -> float:
        """Exact energy in joules between two wall times (the integral of :meth:`power_w`)."""
        if t_end <= t_start:
            return 0.0
        return self._energy_to(t_end - self.t0) - self._energy_to(t_start - self.t0)


class LivePower:
    """Power set as it happens: a server emulation appends steps while the GPU is read.

    It answers like :class:`PowerProfile` (``t0``, :meth:`power_w`, :meth:`energy_j`); steps
    are appended in time order with :meth:`set`. Reads and appends may come from different
    threads.

    Args:
        watts: Power from ``t0`` until the first :meth:`set`, watts.
        t0: Wall-clock origin, seconds since the epoch (default: now).
    """

    def __init__(self, watts: float, t0: float | None = None) -> None:
        self.t0 = time.time() if t0 is None else float(t0)
        self._times = [self.t0]
        self._watts = [float(watts)]
        self._cumulative = [0.0]
        self._lock = threading.Lock()

    def set(self, t: float, watts: float) -> None:
        """Power is ``watts`` from unix time ``t`` on (``t`` not before the last step)."""
        with self._lock:
            last = self._times[-1]
            if t < last:
                raise ValueError(f"power step at {t} is before the last one at {last}")
            if t == last:
                self._watts[-1] = float(watts)
                return
            self._cumulative.append(self._cumulative[-1] + self._watts[-1] * (t - last))
            self._times.append(float(t))
            self._watts.append(float(watts))

    def power_w(self, t: float) -> float:
        """Power in watts at unix time ``t``."""
        with self._lock:
            i = max(0, bisect.bisect_right(self._times, t) - 1)
            return self._watts[i]

    def _energy_to(self, t: float) -> float:
        if t <= self.t0:
            return self._watts[0] * (t - self.t0)
        i = bisect.bisect_right(self._times, t) - 1
        return self._cumulative[i] + self._watts[i] * (t - self._times[i])

    def energy_j(self, t_start: float, t_end: float) -> float:
        """Energy in joules between two unix times."""
        if t_end <= t_start:
            return 0.0
        with self._lock:
            return self._energy_to(t_end) - self._energy_to(t_start)


Power = float | PowerProfile | LivePower
"""What an emulated device's power can be: watts, a profile, or power set live."""


def _as_profile(power: Power, t0: float) -> PowerProfile | LivePower:
    if isinstance(power, PowerProfile | LivePower):
        return power
    return PowerProfile.constant(power, t0)


class _Counter:
    """An energy counter in mJ that integrates a profile, optionally updating periodically."""

    def __init__(self, profile: PowerProfile | LivePower, counter_period_s: float) -> None:
        self.profile = profile
        self.counter_period_s = counter_period_s

    def read_mj(self, now: float | None = None) -> float:
        now = time.time() if now is None else now
        if self.counter_period_s > 0:
            start = self.profile.t0
            now = start + math.floor((now - start) / self.counter_period_s) * self.counter_period_s
        return 1000.0 * self.profile.energy_j(self.profile.t0, now)


class EmulatedGPU(GPU):
    """One emulated GPU whose power follows a :class:`PowerProfile`.

    Args:
        gpu_index: Index of the GPU.
        power: Watts (constant) or a :class:`PowerProfile`.
        name: What :meth:`get_name` returns.
        counter_period_s: Update period of the energy counter in seconds (0: continuous). Real
            NVML counters update every few to ~100 ms; windows shorter than this read 0 J
            unless Zeus's ``approx_instant_energy`` is on.
        power_limit_w: Reported power limit in watts.
        processes: Ids of the processes running on it, as NVML's running-process lists give
            them (``None``: the list cannot be read). Tests may change :attr:`processes`.
    """

    emulated = True

    def __init__(
        self,
        gpu_index: int,
        power: Power = 300.0,
        name: str = EMULATED_GPU_NAME,
        counter_period_s: float = 0.0,
        power_limit_w: float = 700.0,
        processes: Sequence[int] | None = None,
    ) -> None:
        super().__init__(gpu_index)
        self.processes: list[int] | None = None if processes is None else list(processes)
        self.profile = _as_profile(power, time.time())
        self._counter = _Counter(self.profile, counter_period_s)
        self._name = name
        self._default_limit_mw = int(power_limit_w * 1000)
        self._limit_mw = self._default_limit_mw
        self._persistence = False

    @property
    def supports_nonblocking_setters(self) -> bool:
        """Emulated setters always block (they are instant)."""
        return False

    @property
    def counter_period_s(self) -> float:
        """Update period of the energy counter in seconds (0: continuous)."""
        return self._counter.counter_period_s

    def get_name(self) -> str:
        """Return the emulated model name."""
        return self._name

    def get_power_management_limit_constraints(self) -> tuple[int, int]:
        """Return (min, max) power limits. Units: mW."""
        return (100_000, self._default_limit_mw)

    def get_power_management_limit(self) -> int:
        """Return the current power limit. Units: mW."""
        return self._limit_mw

    def set_power_management_limit(self, power_limit_mw: int, block: bool = True) -> None:
        """Set the power limit (recorded only; power follows the profile). Units: mW."""
        self._limit_mw = int(power_limit_mw)

    def reset_power_management_limit(self, block: bool = True) -> None:
        """Reset the power limit to its default."""
        self._limit_mw = self._default_limit_mw

    def set_persistence_mode(self, enabled: bool, block: bool = True) -> None:
        """Set persistence mode (recorded only)."""
        self._persistence = enabled

    def get_persistence_mode(self) -> bool:
        """Return the recorded persistence mode."""
        return self._persistence

    def get_supported_memory_clocks(self) -> list[int]:
        """Return supported memory clocks. Units: MHz."""
        return [2619]

    def set_memory_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        """Lock memory clocks (no effect)."""

    def reset_memory_locked_clocks(self, block: bool = True) -> None:
        """Reset memory clocks (no effect)."""

    def get_supported_graphics_clocks(self, memory_clock_mhz: int | None = None) -> list[int]:
        """Return supported graphics clocks. Units: MHz."""
        return list(range(1980, 0, -195))

    def set_gpu_locked_clocks(
        self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True
    ) -> None:
        """Lock graphics clocks (no effect)."""

    def reset_gpu_locked_clocks(self, block: bool = True) -> None:
        """Reset graphics clocks (no effect)."""

    def get_average_power_usage(self) -> int:
        """Return the power now (the profile is exact, so average equals instant). Units: mW."""
        return self.get_instant_power_usage()

    def get_instant_power_usage(self) -> int:
        """Return the power now. Units: mW."""
        return round(self.profile.power_w(time.time()) * 1000)

    def get_average_memory_power_usage(self) -> int:
        """Memory power is not emulated."""
        raise ZeusGPUNotSupportedError("Memory power is not emulated")

    def supports_get_total_energy_consumption(self) -> bool:
        """The emulated GPU has an energy counter (like Volta and newer)."""
        return True

    def get_total_energy_consumption(self) -> int:
        """Return the energy counter. Units: mJ (integer, like NVML)."""
        return int(self._counter.read_mj())

    def get_gpu_temperature(self) -> int:
        """Return a fixed temperature. Units: Celsius."""
        return 45

    def running_process_ids(self) -> list[int] | None:
        """Ids of the processes running on this GPU (``None``: the list cannot be read)."""
        return None if self.processes is None else list(self.processes)


class EmulatedGPUs(GPUs):
    """A collection of :class:`EmulatedGPU` objects, in place of ``NVIDIAGPUs``."""

    emulated = True

    def __init__(self, ensure_homogeneous: bool = False, gpus: Sequence[EmulatedGPU] = ()) -> None:
        self._gpus = list(gpus)
        if ensure_homogeneous:
            self._ensure_homogeneous()

    def __del__(self) -> None:
        """Nothing to release."""

    @property
    def gpus(self) -> Sequence[EmulatedGPU]:
        """The emulated GPUs."""
        return self._gpus


class EmulatedCPU(CPU):
    """One emulated RAPL package (and optionally DRAM) whose power follows a profile.

    Args:
        cpu_index: Package index.
        power: Package watts (constant) or a :class:`PowerProfile`.
        dram_power: DRAM watts or profile; ``None`` means no DRAM counter.
    """

    emulated = True

    def __init__(
        self,
        cpu_index: int,
        power: Power = 100.0,
        dram_power: Power | None = None,
    ) -> None:
        super().__init__(cpu_index)
        now = time.time()
        self.profile = _as_profile(power, now)
        self.dram_profile = None if dram_power is None else _as_profile(dram_power, now)
        self._counter = _Counter(self.profile, 0.0)
        self._dram = None if self.dram_profile is None else _Counter(self.dram_profile, 0.0)
        self.last_read_s: float | None = None
        """Wall-clock time (``time.time()`` s) of the last counter read: the profile's exact
        integral between two reads is what the counters say, however late the reader ran."""

    def get_total_energy_consumption(self) -> CpuDramMeasurement:
        """Return package (and DRAM) energy counters. Units: mJ."""
        now = self.last_read_s = time.time()
        dram = None if self._dram is None else self._dram.read_mj(now)
        return CpuDramMeasurement(cpu_mj=self._counter.read_mj(now), dram_mj=dram)

    def supports_get_dram_energy_consumption(self) -> bool:
        """Whether a DRAM counter is emulated."""
        return self._dram is not None


class EmulatedCPUs(CPUs):
    """A collection of :class:`EmulatedCPU` objects, in place of ``RAPLCPUs``."""

    emulated = True

    def __init__(self, cpus: Sequence[EmulatedCPU] = ()) -> None:
        self._cpus = list(cpus)

    def __del__(self) -> None:
        """Nothing to release."""

    @property
    def cpus(self) -> Sequence[EmulatedCPU]:
        """The emulated CPU packages."""
        return self._cpus


def is_emulated(devices: object) -> bool:
    """Whether a Zeus device collection (or device) is one of ours."""
    return bool(getattr(devices, "emulated", False))


def _per_device(power: Power | Sequence[Power], count: int) -> list:
    if isinstance(power, int | float | PowerProfile | LivePower):
        return [power] * count
    powers = list(power)
    if len(powers) != count:
        raise ValueError(f"{len(powers)} power values given for {count} devices")
    return powers


@contextmanager
def install_emulated_gpus(
    power_w: Power | Sequence[Power] = 300.0,
    count: int = 1,
    name: str = EMULATED_GPU_NAME,
    counter_period_s: float = 0.0,
    hide_real_cpus: bool = True,
    processes: Sequence[Sequence[int] | None] | None = None,
) -> Iterator[EmulatedGPUs]:
    """Replace Zeus's GPU singleton with emulated GPUs for the duration of a ``with`` block.

    Args:
        power_w: Watts or a :class:`PowerProfile`, for all GPUs or one per GPU.
        count: Number of emulated GPUs.
        name: Model name the GPUs report.
        counter_period_s: Energy counter update period in seconds (0: continuous).
        hide_real_cpus: Also replace Zeus's CPU singleton with an empty one, so a real RAPL
            counter on the test machine does not leak into the figures.
        processes: One list of process ids per GPU (NVML's running processes); ``None``:
            the lists cannot be read.

    Yields:
        The installed :class:`EmulatedGPUs`.
    """
    import zeus.device.cpu as zcpu
    import zeus.device.gpu as zgpu

    procs = [None] * count if processes is None else list(processes)
    if len(procs) != count:
        raise ValueError(f"{len(procs)} process lists given for {count} GPUs")
    gpus = EmulatedGPUs(
        gpus=[
            EmulatedGPU(i, p, name=name, counter_period_s=counter_period_s, processes=procs[i])
            for i, p in enumerate(_per_device(power_w, count))
        ]
    )
    saved_gpus, saved_cpus = zgpu._gpus, zcpu._cpus
    zgpu._gpus = gpus
    if hide_real_cpus:
        zcpu._cpus = EmptyCPUs()
    try:
        yield gpus
    finally:
        zgpu._gpus = saved_gpus
        zcpu._cpus = saved_cpus


@contextmanager
def install_emulated_cpus(
    power_w: Power | Sequence[Power] = 100.0,
    count: int = 1,
    dram_power_w: Power | None = None,
) -> Iterator[EmulatedCPUs]:
    """Replace Zeus's CPU (RAPL) singleton with emulated packages for a ``with`` block.

    Args:
        power_w: Package watts or a :class:`PowerProfile`, for all packages or one per package.
        count: Number of emulated packages.
        dram_power_w: DRAM watts (or profile) per package; ``None`` for no DRAM counter.

    Yields:
        The installed :class:`EmulatedCPUs`.
    """
    import zeus.device.cpu as zcpu

    cpus = EmulatedCPUs(
        [EmulatedCPU(i, p, dram_power_w) for i, p in enumerate(_per_device(power_w, count))]
    )
    saved = zcpu._cpus
    zcpu._cpus = cpus
    try:
        yield cpus
    finally:
        zcpu._cpus = saved


@contextmanager
def install_no_devices() -> Iterator[None]:
    """Hide every real GPU and RAPL counter from Zeus for a ``with`` block.

    Tests of the CPU power model use it so they behave the same on machines that do have
    counters.
    """
    import zeus.device.cpu as zcpu
    import zeus.device.gpu as zgpu
    from zeus.device.gpu.common import EmptyGPUs

    saved_gpus, saved_cpus = zgpu._gpus, zcpu._cpus
    zgpu._gpus, zcpu._cpus = EmptyGPUs(), EmptyCPUs()
    try:
        yield
    finally:
        zgpu._gpus, zcpu._cpus = saved_gpus, saved_cpus
