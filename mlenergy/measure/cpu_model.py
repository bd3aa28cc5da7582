"""The CPU power model used when Zeus finds no energy counter (no GPU, no RAPL).

Energy on such machines is *modelled*, never silently zero, and labelled ``modelled:cpu-tdp``.

The model
---------
The CPUs this process may run on (``os.sched_getaffinity(0)``, ``n`` logical CPUs) have a
full-load power ``tdp_w``: by default ``per_cpu_w x n`` with ``per_cpu_w`` from
:data:`CPU_TDP_TABLE` (matched against the CPU model name in ``/proc/cpuinfo``), overridable by
``EnergyMeter(cpu_tdp_w=...)``, the environment variable ``MLENERGY_CPU_TDP_W`` or the
workloads' ``--cpu-tdp-w`` flag (all three give the full-load power of those ``n`` CPUs in
watts, not of the whole socket). A share ``idle_fraction`` of it is idle power.

A window is charged the work its process did, not the time it took. Every CPU-second the
process (and its children) ran is charged one core's active power plus that core's idle share,
since the process held the core for that second::

    active_per_cpu_w = (tdp_w - idle_w) / n
    idle_per_cpu_w   = idle_w / n
    energy_j = cpu_s x (active_per_cpu_w + idle_per_cpu_w) = cpu_s x tdp_w / n

where ``cpu_s`` is the CPU time of the process over the window (user + system, all threads,
plus its children's; see :func:`process_cpu_seconds`). Wall time does not enter: a busy
neighbour that stretches the window (the process waits for a core) does not change the figure,
and the idle power of cores the process did not hold is not charged to it. The idle power of the
usable CPUs is reported beside, as the idle baseline (:meth:`CpuPowerModel.idle_w`). What a
neighbour can still move is the CPU time itself (shared caches, memory bandwidth and SMT
siblings make the same work take more CPU seconds); ``benchmarks/cpu_model_neighbours.py``
prints by how much.

The CPU-time clock must resolve short windows: ``os.times()`` and ``psutil`` CPU times count
in clock ticks (10 ms on Linux), so a window of a few milliseconds of computation would read
0 CPU seconds. The process's own CPU time is therefore read from ``time.process_time()``
(``CLOCK_PROCESS_CPUTIME_ID`` on Linux: nanosecond resolution, user + system, all threads of the
process); the CPU time of children (reaped ones from ``os.times()``, running ones such as a
server the process launched from ``psutil``) counts in ticks.

Constants and sources
---------------------
* ``idle_fraction = 0.3``: servers idle at roughly 30-50 % of peak power (Barroso, Hölzle and
  Ranganathan, *The Datacenter as a Computer*, 3rd ed., 2018, ch. 5; SPECpower_ssj2008
  published results), and modern CPU packages idle lower than whole servers; we take the low
  end. Override with ``EnergyMeter(cpu_idle_fraction=...)`` or ``MLENERGY_CPU_IDLE_FRACTION``.
* Per-logical-CPU figures in :data:`CPU_TDP_TABLE` are vendor TDPs divided by hardware threads
  of a typical part of each family (sources in the table). They are coarse by design: the model
  is for comparing runs on the same machine, not for absolute accuracy.
"""

from __future__ import annotations

import os
import platform
import re
import time
from dataclasses import dataclass
from functools import lru_cache

from mlenergy.errors import UserError

CPU_TDP_ENV = "MLENERGY_CPU_TDP_W"
"""Environment variable overriding the modelled scope's full-load power in watts."""

CPU_TDP_FLAG_HELP = (
    "Full-load power in watts of the CPUs this process may use, for the CPU power model "
    "(used only when Zeus finds no GPU or RAPL counter; default: env MLENERGY_CPU_TDP_W, "
    "else a per-CPU figure for the detected CPU family x usable CPUs)."
)
"""Help text for the workloads' ``--cpu-tdp-w`` flag, so every command says the same."""

CPU_IDLE_FRACTION_ENV = "MLENERGY_CPU_IDLE_FRACTION"
"""Environment variable overriding the idle share of full-load power (0 to 1)."""

DEFAULT_IDLE_FRACTION = 0.3
"""Idle power as a share of full-load power (see the module docstring for sources)."""

DEFAULT_PER_CPU_W = 3.0
"""Watts per logical CPU when the CPU model matches no entry of :data:`CPU_TDP_TABLE`."""

CPU_TDP_TABLE: tuple[tuple[str, float, str], ...] = (
    # (regex on the /proc/cpuinfo model name, watts per logical CPU, source)
    (r"AMD EPYC", 280.0 / 128, "AMD EPYC 7763: 280 W TDP, 64 cores / 128 threads (amd.com)"),
    (r"AMD Ryzen Threadripper", 280.0 / 128, "Threadripper PRO 5995WX: 280 W, 64C/128T (amd.com)"),
    (r"AMD Ryzen", 105.0 / 32, "Ryzen 9 5950X: 105 W TDP, 16 cores / 32 threads (amd.com)"),
    (r"Intel.*Xeon", 270.0 / 80, "Xeon Platinum 8380: 270 W TDP, 40 cores / 80 threads (ark)"),
    (r"Intel.*Core", 125.0 / 32, "Core i9-13900K: 125 W base power, 32 threads (ark.intel.com)"),
    (r"Neoverse|Graviton", 100.0 / 64, "AWS Graviton3: ~100 W, 64 cores (AWS re:Invent 2021)"),
    (r"Ampere|Altra", 250.0 / 80, "Ampere Altra Q80-30: 250 W, 80 cores (amperecomputing.com)"),
    (r"Apple M", 20.0 / 8, "Apple M1/M2: ~20 W CPU package, 8 cores (Apple, AnandTech)"),
)
"""Coarse per-logical-CPU power figures by CPU family, first match wins."""


@lru_cache(maxsize=1)
def cpu_model_name() -> str | None:
    """Return the CPU model name from ``/proc/cpuinfo`` (or ``platform``), ``None`` if unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                    return value.strip()
    except OSError:
        pass

    return platform.processor() or None


def usable_cpu_count() -> int:
    """Return the logical CPUs this process may run on (its affinity mask), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def per_cpu_watts(model_name: str | None) -> tuple[float, str]:
    """Look up the power of one logical CPU for a CPU model name.

    Args:
        model_name: The CPU model string, e.g. ``"AMD EPYC 7763 64-Core Processor"``.

    Returns:
        ``(watts per logical CPU, source text)``; the fallback is :data:`DEFAULT_PER_CPU_W`.
    """
    if model_name:
        for pattern, watts, source in CPU_TDP_TABLE:
            if re.search(pattern, model_name, flags=re.IGNORECASE):
                return watts, source
    return DEFAULT_PER_CPU_W, "default (CPU model not in the table)"


def _env_float(name: str, low: float, high: float | None) -> float | None:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return None
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (value >= low and (high is None or value <= high)):
        bound = f"between {low} and {high}" if high is not None else f"above {low}"
        raise UserError(
            f"environment variable {name}={raw!r} is not a number {bound}",
            f"Set {name} to a number {bound} or unset it",
        )
    return value


@dataclass(frozen=True)
class CpuPowerModel:
    """A CPU-time x per-core power model of the CPUs this process may use.

    Attributes:
        tdp_w: Full-load power of the modelled scope in watts.
        idle_fraction: Idle power as a share of ``tdp_w``.
        num_cpus: Logical CPUs in the modelled scope.
        tdp_source: Where ``tdp_w`` came from (argument, environment, table row, default).
        cpu_model: The CPU model name the table was matched against.
    """

    tdp_w: float
    idle_fraction: float
    num_cpus: int
    tdp_source: str
    cpu_model: str | None = None

    @property
    def idle_w(self) -> float:
        """Modelled idle power of the scope in watts."""
        return self.idle_fraction * self.tdp_w

    @property
    def per_cpu_w(self) -> float:
        """Power in watts charged per CPU-second: one core's active power plus its idle share."""
        return self.tdp_w / self.num_cpus

    def power_w(self, cpu_s: float, duration_s: float) -> float:
        """Modelled power in watts of a process that used ``cpu_s`` CPU seconds in ``duration_s``.

        At most ``tdp_w`` (all usable CPUs busy); 0 for a non-positive duration.
        """
        if duration_s <= 0:
            return 0.0
        return min(self.tdp_w, max(0.0, cpu_s) * self.per_cpu_w / duration_s)

    def energy_j(self, duration_s: float, cpu_s: float) -> float:
        """Modelled energy in joules of a window: ``cpu_s x tdp_w / num_cpus``.

        Args:
            duration_s: Wall time of the window in seconds (it only caps the figure at
                ``tdp_w x duration_s``; it does not add idle power).
            cpu_s: CPU seconds the process and its children used in the window (all threads).

        Returns:
            Joules charged to the work.
        """
        if duration_s <= 0:
            return 0.0
        return min(self.tdp_w * duration_s, max(0.0, cpu_s) * self.per_cpu_w)

    def describe(self) -> str:
        """One line for :class:`~mlenergy.records.MeasuredScope.description`."""
        return (
            f"CPU modelled (modelled:cpu-tdp): {self.num_cpus} logical CPU(s) of "
            f"{self.cpu_model or 'unknown CPU'}, full load {self.tdp_w:.1f} W "
            f"[{self.tdp_source}]; charged {self.per_cpu_w:.2f} W per CPU-second this process "
            f"and its children ran (active power plus the idle share, {self.idle_fraction:.0%}, "
            "of the core it held); wall time and neighbours' load not charged"
        )


def process_cpu_seconds() -> float:
    """CPU seconds used so far by this process and its children (user + system, all threads).

    The process's own CPU time comes from :func:`time.process_time`
    (``CLOCK_PROCESS_CPUTIME_ID``: nanosecond resolution, every thread), so windows of a few
    milliseconds see their computation; ``os.times()`` / ``psutil`` count in 10 ms clock ticks
    and read 0 for such windows. Children have no high-resolution clock: reaped ones come from
    ``os.times()``, running ones (a server this process launched) from ``psutil``, both in
    ticks.

    Returns:
        Cumulative CPU time in seconds; only differences between two calls are meaningful.
    """
    t = os.times()
    return time.process_time() + t.children_user + t.children_system + running_children_cpu_s()


def running_children_cpu_s() -> float:
    """CPU seconds of this process's running descendants (0 when it has none).

    Reads ``/proc/<pid>/task/<tid>/children`` and ``/proc/<pid>/stat`` (cheap: no scan of
    every process); where those are missing, asks ``psutil``.
    """
    try:
        return _proc_children_cpu_s(os.getpid())
    except OSError:
        pass
    try:
        # lazy: psutil (~60 ms at start-up) only where /proc cannot say
        import psutil

        total = 0.0
        for child in psutil.Process().children(recursive=True):
            try:
                times = child.cpu_times()
            except psutil.Error:  # exited between the listing and the reading
                continue
            total += times.user + times.system
        return total
    except Exception:  # no psutil or no /proc: running children go uncounted
        return 0.0


_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def _proc_children_cpu_s(pid: int) -> float:
    """Sum of user + system CPU seconds of ``pid``'s descendants, from ``/proc``."""
    total = 0.0
    pending = _child_pids(pid)
    while pending:
        child = pending.pop()
        try:
            with open(f"/proc/{child}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) * _TICK_S  # utime, stime
            pending += _child_pids(child)
        except (OSError, IndexError, ValueError):  # exited meanwhile
            continue
    return total


def _child_pids(pid: int) -> list[int]:
    tasks = os.listdir(f"/proc/{pid}/task")
    pids: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                pids += [int(p) for p in f.read().split()]
        except FileNotFoundError:
            if pid == os.getpid():
                raise  # no children file in this kernel: use psutil
    return pids


def resolve_cpu_power_model(
    cpu_tdp_w: float | None = None, idle_fraction: float | None = None
) -> CpuPowerModel:
    """Build the CPU power model: argument, then environment, then the table.

    Args:
        cpu_tdp_w: Full-load power of the modelled scope in watts (the logical CPUs this
            process may use); ``None`` reads ``MLENERGY_CPU_TDP_W`` then the table.
        idle_fraction: Idle share of ``cpu_tdp_w`` in ``[0, 1)``; ``None`` reads
            ``MLENERGY_CPU_IDLE_FRACTION`` then uses :data:`DEFAULT_IDLE_FRACTION`.

    Returns:
        The model.

    Raises:
        UserError: A TDP that is not a positive number, or an idle fraction outside ``[0, 1)``.
    """
    name = cpu_model_name()
    n = usable_cpu_count()
    if cpu_tdp_w is not None:
        if not (isinstance(cpu_tdp_w, int | float) and cpu_tdp_w > 0 and cpu_tdp_w < 1e5):
            raise UserError(
                f"cpu_tdp_w={cpu_tdp_w!r} is not a positive power in watts",
                "Pass the full-load power of the CPUs this process may use, e.g. 65",
            )
        tdp, source = float(cpu_tdp_w), "argument cpu_tdp_w"
    elif (env := _env_float(CPU_TDP_ENV, 1e-6, 1e5)) is not None:
        tdp, source = env, f"environment {CPU_TDP_ENV}"
    else:
        per_cpu, row = per_cpu_watts(name)
        tdp, source = per_cpu * n, f"{per_cpu:.2f} W/CPU x {n}: {row}"
    if idle_fraction is None:
        idle_fraction = _env_float(CPU_IDLE_FRACTION_ENV, 0.0, 0.999)
        idle_fraction = DEFAULT_IDLE_FRACTION if idle_fraction is None else idle_fraction
    elif not 0.0 <= idle_fraction < 1.0:
        raise UserError(
            f"cpu_idle_fraction={idle_fraction!r} is outside [0, 1)",
            "Pass the idle share of full-load power, e.g. 0.3",
        )
    return CpuPowerModel(
        tdp_w=tdp, idle_fraction=float(idle_fraction), num_cpus=n, tdp_source=source, cpu_model=name
    )
