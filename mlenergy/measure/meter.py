"""EnergyMeter: energy and time of code windows, through Zeus, with an honest fallback.

Where the energy comes from, in order:

1. GPUs in scope (NVML/AMDSMI): ``measured:zeus-nvml`` (``measured:zeus-amdsmi``). The headline
   ``energy_j`` is GPU energy only. RAPL packages (and DRAM) that Zeus can read are measured
   beside them and kept apart (``host_energy_j``, ``measured:zeus-rapl``), never summed in.
2. No GPU in scope but RAPL: ``measured:zeus-rapl``.
3. Neither (this project's CI machines): the CPU power model of
   :mod:`mlenergy.measure.cpu_model`, ``modelled:cpu-tdp``. Never a silent 0 J.

Emulated devices installed by :mod:`mlenergy.measure.emulated` take the place of 1 or 2 and
label every figure ``emulated:zeus-gpu`` / ``emulated:zeus-rapl``.

Which GPUs are in scope is decided by one rule, :mod:`mlenergy.measure.scope`
(:func:`~mlenergy.measure.scope.meter_for`); ``EnergyMeter(gpu_indices=None)`` itself measures
every GPU Zeus finds.

Windows: at start-up the meter learns each headline GPU's counter update period
(:mod:`mlenergy.measure.counter_period`). A window shorter than ten periods is flagged
(``WindowResult.resolvable`` is ``False``); runners repeat short work inside one window until
it spans :attr:`EnergyMeter.target_window_s`, so no flagged window becomes a reported figure.

Every window goes through :class:`zeus.monitor.ZeusMonitor` (also on the modelled path, where
Zeus supplies the window's time), with ``approx_instant_energy=True`` so windows shorter than the
GPU counter's update period get power x time instead of 0 J. The meter is not thread-safe:
open and close windows from one thread.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mlenergy.errors import UserError
from mlenergy.measure.counter_period import (
    DEFAULT_POLL_BUDGET_S,
    MIN_PERIODS,
    TARGET_PERIODS,
    gpu_counter_periods,
)
from mlenergy.measure.cpu_model import (
    CpuPowerModel,
    process_cpu_seconds,
    resolve_cpu_power_model,
)
from mlenergy.measure.devices import (
    check_indices,
    discover_cpus,
    discover_gpus,
    torch_cuda_available,
)
from mlenergy.measure.timeline import (
    ThreadSampler,
    delta_power_fn,
    held_from,
    sum_gpu_timelines,
    to_power_timeline,
)
from mlenergy.measure.window_result import (
    WindowHandle,
    WindowResult,
    headline_energy,
    host_total,
    zeus_energies,
)
from mlenergy.measure.zeus_import import zeus_monitor
from mlenergy.records import IdleBaseline, MeasuredScope, PowerTimeline

logger = logging.getLogger(__name__)

MODELLED_CPU_SOURCE = "modelled:cpu-tdp"
HOST_RAPL_SOURCE = "measured:zeus-rapl"
"""Label of the CPU package and DRAM figures measured beside the GPUs."""
MODELLED_CPU_DEVICE = "cpu:modelled"
"""Key of the modelled CPU energy in :attr:`WindowResult.energy_by_device_j`."""

_GPU_INDEX_FIX = (
    "Pass gpu_indices=None to measure the GPUs Zeus finds (the CPU power model "
    "when there are none), or run where the GPUs are visible (CUDA_VISIBLE_DEVICES)"
)
_CPU_INDEX_FIX = (
    "Pass cpu_indices=None to measure the RAPL packages Zeus can read (RAPL needs "
    "/sys/class/powercap and read permission)"
)


def _count(devices: Any) -> int:
    """Number of devices Zeus found (0 when discovery was skipped)."""
    return len(devices) if devices is not None else 0


@dataclass
class _Active:
    key: str
    start_time_s: float
    cpu_s: float


class EnergyMeter:
    """Measure the time and energy of code windows through Zeus.

    Args:
        gpu_indices: GPUs to measure; ``None`` measures every GPU Zeus finds (none is fine),
            ``[]`` measures none. Runs pick them by the scope rule
            (:func:`mlenergy.measure.scope.meter_for`).
        cpu_tdp_w: Full-load power in watts of the CPUs this process may use, for the CPU power
            model (used only when Zeus finds no counter); ``None`` reads ``MLENERGY_CPU_TDP_W``,
            then the CPU table.
        sync_execution: Wait for queued GPU work at window edges (``torch.cuda.synchronize``
            via Zeus); ``None`` means yes exactly when real GPUs are measured and torch has
            CUDA (never for emulated GPUs, which a CPU-only torch cannot synchronise).
        power_timeline: Keep a power trace (Zeus ``PowerMonitor`` on real GPUs, an in-process
            sampler otherwise) for :meth:`timeline`.
        cpu_indices: RAPL packages to measure; ``None`` means all Zeus can read, ``[]`` none.
        cpu_idle_fraction: Idle share of ``cpu_tdp_w`` for the CPU power model.
        timeline_period_s: Sampling period in seconds of the in-process power sampler.
        counter_poll_s: How long to poll each real GPU's energy counter at start-up to learn
            its update period, in seconds.

    Raises:
        UserError: GPUs or CPU packages requested that Zeus cannot find, or a bad TDP.
    """

    def __init__(
        self,
        gpu_indices: list[int] | None = None,
        cpu_tdp_w: float | None = None,
        sync_execution: bool | None = None,
        power_timeline: bool = False,
        *,
        cpu_indices: list[int] | None = None,
        cpu_idle_fraction: float | None = None,
        timeline_period_s: float = 0.1,
        counter_poll_s: float = DEFAULT_POLL_BUDGET_S,
    ) -> None:
        from zeus.device.exception import ZeusBaseError

        zeus = zeus_monitor()
        self._cpu_model_arg = resolve_cpu_power_model(cpu_tdp_w, cpu_idle_fraction)
        gpus = discover_gpus() if gpu_indices != [] else None
        cpus = discover_cpus() if cpu_indices != [] else None
        self._gpus, self._cpus = gpus, cpus
        self.gpu_indices = check_indices("gpu", gpu_indices, _count(gpus), _GPU_INDEX_FIX)
        self.cpu_indices = check_indices("cpu", cpu_indices, _count(cpus), _CPU_INDEX_FIX)
        gpu_emulated = bool(self.gpu_indices) and bool(getattr(gpus, "emulated", False))
        cpu_emulated = bool(self.cpu_indices) and bool(getattr(cpus, "emulated", False))
        self.is_emulated = gpu_emulated or cpu_emulated
        self.cpu_power_model: CpuPowerModel | None = None
        if self.gpu_indices:
            vendor = "amdsmi" if type(gpus).__name__.startswith("AMD") else "nvml"
            self._source = "emulated:zeus-gpu" if self.is_emulated else f"measured:zeus-{vendor}"
        elif self.cpu_indices:
            self._source = "emulated:zeus-rapl" if self.is_emulated else "measured:zeus-rapl"
        else:
            self._source = MODELLED_CPU_SOURCE
            self.cpu_power_model = self._cpu_model_arg
        auto_sync = bool(self.gpu_indices) and not gpu_emulated and torch_cuda_available()
        self.sync_execution = auto_sync if sync_execution is None else bool(sync_execution)
        self._includes_dram = (
            cpus is not None
            and bool(self.cpu_indices)
            and all(cpus.supports_get_dram_energy_consumption(i) for i in self.cpu_indices)
        )
        # With GPUs in scope the RAPL packages are measured beside them, never summed in.
        self._host_beside = bool(self.gpu_indices) and bool(self.cpu_indices)
        self._host_source = (
            ("emulated:zeus-rapl" if cpu_emulated else HOST_RAPL_SOURCE)
            if self._host_beside
            else None
        )
        periods = gpu_counter_periods(gpus, self.gpu_indices, counter_poll_s)
        self.counter_period_s: float = max(periods, default=0.0)
        """Update period in seconds of the slowest headline counter (0: continuous)."""
        try:
            self._zeus = zeus.ZeusMonitor(
                gpu_indices=self.gpu_indices,
                cpu_indices=self.cpu_indices,
                approx_instant_energy=True,
            )
        except (ValueError, ZeusBaseError) as err:  # "No GPUs available.", driver errors
            raise UserError(
                f"Zeus could not monitor gpu_indices={self.gpu_indices}, "
                f"cpu_indices={self.cpu_indices}: {err}",
                "Check the GPU driver, or pass gpu_indices=[] to use the CPU power model",
            ) from err
        self._active: dict[str, _Active] = {}
        self._created_s = time.time()
        self._first_begin_s: float | None = None
        self.idle: IdleBaseline | None = None
        self._closed = False
        self._power_monitor: Any = None
        self._timeline_domain = "device_instant"
        self._sampler: ThreadSampler | None = None
        if power_timeline:
            self._start_timeline(timeline_period_s)

    # ----------------------------------------------------------------- description
    @property
    def energy_source(self) -> str:
        """Label of every figure this meter produces, e.g. ``modelled:cpu-tdp``."""
        return self._source

    @property
    def scope(self) -> MeasuredScope:
        """Which devices the figures cover."""
        host: tuple[int, ...] = ()
        if self.cpu_power_model is not None:
            description = self.cpu_power_model.describe()
        elif self.gpu_indices:
            description = f"GPU(s) {self.gpu_indices} via Zeus ({self._source})"
            if self._host_beside:
                host = tuple(self.cpu_indices)
                dram = " + DRAM" if self._includes_dram else ""
                description += (
                    f"; RAPL package(s) {list(host)}{dram} measured beside "
                    f"({self._host_source}), not included"
                )
        else:
            dram = " + DRAM" if self._includes_dram else ""
            description = f"RAPL package(s) {self.cpu_indices}{dram} via Zeus ({self._source})"
        return MeasuredScope(
            gpu_indices=tuple(self.gpu_indices),
            cpu_indices=() if self._host_beside else tuple(self.cpu_indices),
            includes_dram=self._includes_dram and not self._host_beside,
            description=description,
            host_cpu_indices=host,
            host_includes_dram=self._includes_dram and self._host_beside,
            host_energy_source=self._host_source,
            counter_period_s=self.counter_period_s,
        )

    @property
    def min_window_s(self) -> float:
        """Shortest window in seconds whose figure is reported (ten counter periods)."""
        return MIN_PERIODS * self.counter_period_s

    @property
    def target_window_s(self) -> float:
        """Window length in seconds that runners aim for (25 counter periods)."""
        return TARGET_PERIODS * self.counter_period_s

    @property
    def zeus_monitor(self) -> Any:
        """The underlying :class:`zeus.monitor.ZeusMonitor`."""
        return self._zeus

    def gpu_names(self) -> list[str]:
        """Model names of the measured GPUs, as Zeus reports them."""
        return [str(self._gpus.get_name(i)) for i in self.gpu_indices] if self._gpus else []

    def gpu_power_limit_w(self) -> float | None:
        """Power limit of the first measured GPU in watts, when Zeus can read it."""
        if not self.gpu_indices or self._gpus is None:
            return None
        try:
            return self._gpus.get_power_management_limit(self.gpu_indices[0]) / 1000.0
        except Exception:  # optional provenance only
            return None

    # ----------------------------------------------------------------- windows
    def begin(self, name: str) -> None:
        """Begin a window called ``name`` (unique among open windows)."""
        self._check_open()
        if name in self._active:
            raise UserError(
                f"measurement window {name!r} is already open",
                "End it first, or give nested windows distinct names",
            )
        key = f"mlenergy:{name}"
        cpu_s = process_cpu_seconds() if self.cpu_power_model is not None else 0.0
        self._zeus.begin_window(key, sync_execution=self.sync_execution)
        if self._sampler is not None:  # a sample at each edge: the trace resolves the window
            self._sampler.sample_now()
        start = self._zeus.measurement_states[key].time  # Zeus's own start timestamp
        if self._first_begin_s is None:
            self._first_begin_s = start
        self._active[name] = _Active(key=key, start_time_s=start, cpu_s=cpu_s)

    def end(self, name: str) -> WindowResult:
        """End the window ``name`` and return its time and energy."""
        try:
            state = self._active.pop(name)
        except KeyError:
            raise UserError(
                f"measurement window {name!r} is not open", "Call begin(name) first"
            ) from None
        m = self._zeus.end_window(state.key, sync_execution=self.sync_execution)
        if self._sampler is not None:
            self._sampler.sample_now()
        if self.cpu_power_model is not None:
            cpu_s = process_cpu_seconds() - state.cpu_s
            by_device = {MODELLED_CPU_DEVICE: self.cpu_power_model.energy_j(m.time, cpu_s)}
            rapl: dict[str, float] = {}
        else:
            by_device, rapl = zeus_energies(m, self._host_beside)
        host = host_total(rapl) if self._host_beside else None
        energy, by_device = headline_energy(name, by_device)
        duration = float(m.time)
        return WindowResult(
            name=name,
            duration_s=duration,
            energy_j=energy,
            energy_by_device_j=by_device,
            energy_source=self._source,
            start_time_s=state.start_time_s,
            host_energy_j=host,
            host_energy_by_device_j=rapl if host is not None else {},
            host_energy_source=self._host_source,
            counter_period_s=self.counter_period_s,
            resolvable=duration >= self.min_window_s,
        )

    def cancel(self, name: str) -> None:
        """Drop an open window without a result."""
        state = self._active.pop(name, None)
        if state is not None:
            self._zeus.end_window(state.key, sync_execution=False, cancel=True)

    @contextmanager
    def window(self, name: str) -> Iterator[WindowHandle]:
        """Measure the body of a ``with`` block; the handle's ``result`` is set on exit.

        If the block raises, the window is cancelled (``result`` stays ``None``).
        """
        handle = WindowHandle(name)
        self.begin(name)
        try:
            yield handle
        except BaseException:
            self.cancel(name)
            raise
        handle.result = self.end(name)

    def measure(self, fn: Callable[[], Any], name: str = "run") -> tuple[Any, WindowResult]:
        """Run ``fn()`` inside one window; return its output and the window's result."""
        with self.window(name) as w:
            out = fn()
        assert w.result is not None
        return out, w.result

    def repeat(
        self, fn: Callable[[], Any], repeats: int = 3, warmup: int = 1, name: str = "run"
    ) -> list[WindowResult]:
        """Run ``fn()`` ``warmup`` times unmeasured, then ``repeats`` times, one window each.

        Args:
            fn: The work to measure (no arguments).
            repeats: Measured runs (at least 1).
            warmup: Unmeasured runs first (at least 0).
            name: Name of every measured window.

        Returns:
            One :class:`WindowResult` per measured run; summarise with
            :func:`mlenergy.measure.repeats.summarize_repeats`.
        """
        if not isinstance(repeats, int) or repeats < 1:
            raise UserError(f"repeats={repeats!r} must be at least 1", "Pass repeats >= 1")
        if not isinstance(warmup, int) or warmup < 0:
            raise UserError(f"warmup={warmup!r} must be 0 or more", "Pass warmup >= 0")
        for _ in range(warmup):
            fn()
        return [self.measure(fn, name)[1] for _ in range(repeats)]

    def measure_idle(self, duration_s: float = 1.0) -> IdleBaseline:
        """Measure the scope's power while this process sleeps.

        On counters it is the devices' real idle draw, to report beside active figures. On the
        modelled path it is the model's idle power of the usable CPUs (``idle_fraction x
        tdp_w``), which the model does not charge to the work. The sleep lasts at least
        :attr:`target_window_s` so the counter resolves it.

        Args:
            duration_s: How long to sleep at least, in seconds (> 0).

        Returns:
            The baseline (also kept as :attr:`idle`).
        """
        if not (isinstance(duration_s, int | float) and 0 < duration_s < 3600):
            raise UserError(
                f"idle duration_s={duration_s!r} must be between 0 and 3600 seconds",
                "Pass e.g. duration_s=1.0",
            )
        with self.window("__idle__") as w:
            time.sleep(max(duration_s, self.target_window_s))
        assert w.result is not None
        model = self.cpu_power_model
        self.idle = IdleBaseline(
            avg_power_w=model.idle_w if model is not None else w.result.avg_power_w,
            duration_s=w.result.duration_s,
            energy_source=self._source,
        )
        return self.idle

    # ----------------------------------------------------------------- timeline
    def _start_timeline(self, period_s: float) -> None:
        if self.gpu_indices and not self.is_emulated:
            power_monitor = zeus_monitor().PowerMonitor
            for domain in ("device_instant", "device_average"):
                try:
                    self._power_monitor = power_monitor(
                        gpu_indices=self.gpu_indices,
                        update_period=max(period_s, 0.05),
                        power_domains=[domain],
                    )
                except ValueError as err:  # domain not supported by these GPUs
                    logger.info("Zeus PowerMonitor cannot use %s: %s", domain, err)
                    continue
                self._timeline_domain = domain
                return
            warnings.warn(
                "Zeus PowerMonitor supports no power domain on these GPUs: no power timeline",
                RuntimeWarning,
                stacklevel=3,
            )
            return
        self._sampler = ThreadSampler(self._delta_power_fn(), period_s=period_s)

    def _delta_power_fn(self) -> Callable[[float], float]:
        """Power over the last sampling period, from counter (or CPU-time) deltas."""
        model, gpus, cpus = self.cpu_power_model, self._gpus, self._cpus
        gpu_idx = list(self.gpu_indices)
        cpu_idx = [] if self._host_beside else list(self.cpu_indices)  # the headline only
        if model is not None:
            return delta_power_fn(process_cpu_seconds, lambda cpu_s, dt: model.power_w(cpu_s, dt))

        def read_j() -> float:
            # Zeus's collections exist wherever indices were accepted (check_indices).
            total_mj = 0.0
            if gpus is not None:
                total_mj += sum(float(gpus.get_total_energy_consumption(i)) for i in gpu_idx)
            if cpus is not None:
                for i in cpu_idx:
                    mes = cpus.get_total_energy_consumption(i)
                    total_mj += mes.cpu_mj + (mes.dram_mj or 0.0)
            return total_mj / 1000.0

        return delta_power_fn(read_j, lambda joules, dt: joules / dt)

    def timeline(self, start_time_s: float | None = None) -> PowerTimeline | None:
        """The power trace so far (:meth:`power_samples`), downsampled to at most 512 points.

        Args:
            start_time_s: Unix time that becomes ``t = 0`` (earlier samples are dropped);
                ``None``: the first window's start (or the meter's creation).

        Returns:
            The timeline labelled with :attr:`energy_source`, or ``None`` when the meter was
            made without ``power_timeline=True`` or has no sample yet.
        """
        if start_time_s is None:
            start_time_s = self._first_begin_s or self._created_s
        return to_power_timeline(self.power_samples(), self._source, start_time_s)

    def power_samples(self, start_time_s: float | None = None) -> list[tuple[float, float]]:
        """The whole power trace, unresampled: each ``(unix time, watts)`` held until the next.

        That is how Zeus's ``PowerMonitor`` sends power (on change); the in-process sampler's
        means are stamped so too (:meth:`~mlenergy.measure.timeline.ThreadSampler.held_samples`).
        ``start_time_s``: the sample in force then is stamped at it, earlier ones dropped. Empty
        without ``power_timeline=True``.
        """
        if self._power_monitor is not None:
            timelines = self._power_monitor.get_power_timeline(self._timeline_domain)
            samples = sum_gpu_timelines(timelines, len(self.gpu_indices))
        elif self._sampler is not None:
            self._sampler.sample_now()  # up to now, even if the thread has not run since
            samples = self._sampler.held_samples()
        else:
            return []
        return held_from(samples, start_time_s)

    # ----------------------------------------------------------------- lifecycle
    def _check_open(self) -> None:
        if self._closed:
            raise UserError("this EnergyMeter is closed", "Create a new EnergyMeter")

    def close(self) -> None:
        """Stop the timeline sampler or power monitor (idempotent); open windows are dropped."""
        if self._closed:
            return
        self._closed = True
        for name in list(self._active):
            self.cancel(name)
        if self._sampler is not None:
            self._sampler.stop()
        if self._power_monitor is not None:
            self._power_monitor.stop()

    def __enter__(self) -> EnergyMeter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"EnergyMeter(energy_source={self._source!r}, gpu_indices={self.gpu_indices}, "
            f"cpu_indices={self.cpu_indices}, sync_execution={self.sync_execution})"
        )
