"""The energy scope of a serving run: the server's GPUs, else the server's modelled CPU.

With energy counters (GPUs, or RAPL), windows go through :class:`~mlenergy.measure.EnergyMeter`
and its power samples: the server's GPUs as :mod:`~.server_gpus` picks them. Without counters
the CPU power model (:mod:`mlenergy.measure.cpu_model`, ``modelled:cpu-tdp``) is applied to the
CPU time of the *server*, not of the client: the launched server's process tree, the tree of
``--server-pid`` or of the process listening on the endpoint's port when attached, else every
process of the machine (the record says which).

Power samples come back whole and in Zeus's convention: each ``(unix time, watts)`` holds
until the next (:meth:`ServingPower.samples`).
"""

from __future__ import annotations

import time
from contextlib import suppress
from dataclasses import dataclass

import psutil

from mlenergy.errors import UserError
from mlenergy.measure import MODELLED_CPU_SOURCE, EnergyMeter, resolve_cpu_power_model
from mlenergy.measure.timeline import ThreadSampler, delta_power_fn, held_from
from mlenergy.records import MeasuredScope


@dataclass(frozen=True)
class WindowEnergy:
    """One window: unix start time, duration in seconds, energy in joules (``None``: none)."""

    start_s: float
    duration_s: float
    energy_j: float | None
    by_device_j: dict[str, float]


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system, reaped children included) of a process and its children.

    Raises:
        psutil.NoSuchProcess: The process is gone.
    """
    root = psutil.Process(pid)
    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        try:
            t = proc.cpu_times()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def machine_cpu_seconds() -> float:
    """Busy CPU seconds of the whole machine (all CPUs, idle and I/O wait excluded)."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


class ServingPower:
    """Windows and a power timeline over the scope of a serving run.

    Args:
        gpu_indices: GPUs to measure (``None``: every GPU Zeus finds).
        cpu_tdp_w: Full-load CPU watts for the CPU power model (no counter).
        server_pid: Process whose tree the modelled CPU energy covers; ``None``: the machine.
        server_label: How the record names that process (``launched server``, ``--server-pid``).
        period_s: Sampling period of the power timeline in seconds.
        gpus_how: How the GPUs were chosen, added to the scope's description.

    Raises:
        UserError: GPUs asked for that Zeus cannot see, or a server pid that does not exist.
    """

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        cpu_tdp_w: float | None = None,
        server_pid: int | None = None,
        server_label: str = "--server-pid",
        period_s: float = 0.05,
        gpus_how: str | None = None,
    ) -> None:
        self._meter: EnergyMeter | None = EnergyMeter(
            gpu_indices=gpu_indices,
            cpu_tdp_w=cpu_tdp_w,
            power_timeline=True,
            timeline_period_s=period_s,
            sync_execution=False,
        )
        self.note: str | None = None
        self._open: dict[str, tuple[float, float]] = {}
        self._sampler: ThreadSampler | None = None
        if self._meter.energy_source != MODELLED_CPU_SOURCE:
            self.energy_source = self._meter.energy_source
            self.scope = self._meter.scope
            if gpus_how and self._meter.gpu_indices:
                names = ", ".join(self._meter.gpu_names())
                described = f"{self.scope.description}; {names}; chosen: {gpus_how}"
                self.scope = self.scope.model_copy(update={"description": described})
            return
        self._meter.close()
        self._meter = None
        self.energy_source = MODELLED_CPU_SOURCE
        self.model = resolve_cpu_power_model(cpu_tdp_w)
        if server_pid is not None:
            if not psutil.pid_exists(server_pid):
                raise UserError(
                    f"--server-pid {server_pid} is not a running process",
                    "Pass the process id of the serving engine, or leave it out",
                )
            pid = server_pid
            self._cpu_s = lambda: tree_cpu_seconds(pid)
            self.note = f"modelled CPU energy of the {server_label} process tree (pid {pid})"
        else:
            self._cpu_s = machine_cpu_seconds
            self.note = (
                "modelled CPU energy of the whole machine (every process, the client included): "
                "pass --server-pid to cover the server only"
            )
        self.scope = MeasuredScope(description=f"{self.model.describe()}; {self.note}")
        model = self.model
        self._sampler = ThreadSampler(
            delta_power_fn(
                self._safe_cpu_s,
                lambda cpu_s, dt: model.power_w(cpu_s, dt),
            ),
            period_s=period_s,
        )
        self._last_cpu_s = 0.0

    def _safe_cpu_s(self) -> float:
        with suppress(psutil.Error):  # the server is gone: its CPU time stops growing
            self._last_cpu_s = self._cpu_s()
        return self._last_cpu_s

    @property
    def meter(self) -> EnergyMeter | None:
        """The Zeus meter (``None`` on the modelled path)."""
        return self._meter

    def begin(self, name: str) -> None:
        """Open the window ``name``."""
        if self._meter is not None:
            self._meter.begin(name)
        else:
            assert self._sampler is not None
            self._sampler.sample_now()  # a sample at each edge: the trace resolves the window
            self._open[name] = (time.time(), self._safe_cpu_s())

    def end(self, name: str) -> WindowEnergy:
        """Close the window ``name``; its energy over the scope."""
        if self._meter is not None:
            r = self._meter.end(name)
            start = r.start_time_s if r.start_time_s is not None else time.time() - r.duration_s
            return WindowEnergy(start, r.duration_s, r.energy_j, dict(r.energy_by_device_j))
        start, cpu0 = self._open.pop(name)
        assert self._sampler is not None
        self._sampler.sample_now()
        duration = time.time() - start
        energy = self.model.energy_j(duration, self._safe_cpu_s() - cpu0)
        return WindowEnergy(start, duration, energy, {"cpu:modelled": energy})

    def cancel(self, name: str) -> None:
        """Drop an open window."""
        if self._meter is not None:
            self._meter.cancel(name)
        else:
            self._open.pop(name, None)

    @property
    def counter_period_s(self) -> float:
        """Update period of the slowest counter in scope, seconds (0: continuous, or none)."""
        return self._meter.counter_period_s if self._meter is not None else 0.0

    def samples(self, start_s: float) -> list[tuple[float, float]]:
        """Every ``(unix time, watts)`` sample from ``start_s``, each held until the next.

        On real GPUs these are Zeus's ``PowerMonitor`` samples as it sends them; elsewhere the
        in-process sampler's period means, stamped at their periods' starts. Nothing is
        resampled.
        """
        if self._sampler is not None:
            self._sampler.sample_now()  # the tail since the last period, so a short run has one
            return held_from(self._sampler.held_samples(), start_s)
        assert self._meter is not None
        return self._meter.power_samples(start_s)

    def gpu_names(self) -> list[str]:
        """Names of the measured GPUs."""
        return self._meter.gpu_names() if self._meter is not None else []

    def close(self) -> None:
        """Stop the samplers (idempotent)."""
        if self._meter is not None:
            self._meter.close()
        if self._sampler is not None:
            self._sampler.stop()
