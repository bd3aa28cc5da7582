"""A measured window whose result exists only after its ``with`` block has ended.

Zeus's maintainers declined a context-manager API because a figure read inside the block is
invalid (the window is still open). :class:`MeasuredWindow` makes that mistake impossible
rather than documented: every figure is a property that raises :class:`WindowStillOpen`
until the block has ended, and :class:`WindowFailed` if the block raised.

>>> from mlenergy.measure.window import measured_window
>>> with measured_window("matmul") as w:  # doctest: +SKIP
...     work()
>>> w.energy_j  # doctest: +SKIP
"""

from __future__ import annotations

import html
from types import TracebackType
from typing import TYPE_CHECKING

from mlenergy.errors import UserError
from mlenergy.measure.scope import meter_for

if TYPE_CHECKING:
    from mlenergy.measure.meter import EnergyMeter
    from mlenergy.measure.window_result import WindowResult


class WindowStillOpen(UserError):
    """A window's result was read before its ``with`` block ended."""


class WindowFailed(UserError):
    """A window's result was read although its block raised (the window was cancelled)."""


class MeasuredWindow:
    """Measure the body of a ``with`` block through :class:`~mlenergy.measure.EnergyMeter`.

    Args:
        name: Name of the window (shown in its result).
        meter: The meter to use; ``None`` opens one for the block (over the devices the scope
            rule of :mod:`mlenergy.measure.scope` picks for ``where``) and closes it after.
        where: The model (or its device or device map) the block runs, for that rule.
        gpu_indices: GPUs to measure instead of those ``where`` occupies.

    Raises:
        WindowStillOpen: On reading any figure inside the block.
        WindowFailed: On reading a figure after the block raised.
        UserError: On entering the same window twice.
    """

    def __init__(
        self,
        name: str = "window",
        meter: EnergyMeter | None = None,
        where: object = None,
        gpu_indices: list[int] | None = None,
    ) -> None:
        self.name = name
        self._meter = meter
        self._where, self._gpu_indices = where, gpu_indices
        self._own_meter = meter is None
        self._state = "new"  # new -> open -> done | failed
        self._result: WindowResult | None = None

    def __enter__(self) -> MeasuredWindow:
        if self._state != "new":
            raise UserError(
                f"measured window {self.name!r} was already used",
                "Make a new window for each measurement",
            )
        if self._meter is None:
            self._meter = meter_for(self._where, self._gpu_indices)
        self._meter.begin(self.name)
        self._state = "open"
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._meter is not None
        try:
            if exc_type is None:
                self._result = self._meter.end(self.name)
                self._state = "done"
            else:
                self._meter.cancel(self.name)
                self._state = "failed"
        finally:
            if self._own_meter:
                self._meter.close()

    @property
    def finished(self) -> bool:
        """Whether the block has ended without an error (figures can be read)."""
        return self._state == "done"

    @property
    def result(self) -> WindowResult:
        """The window's :class:`~mlenergy.measure.WindowResult` (only after the block)."""
        if self._state == "done" and self._result is not None:
            return self._result
        if self._state == "failed":
            raise WindowFailed(
                f"measured window {self.name!r} has no result: its block raised an error",
                "Fix the error and measure again",
            )
        raise WindowStillOpen(
            f"measured window {self.name!r} has no result yet: a figure read inside the "
            "with block would be invalid",
            "Read it after the with block ends",
        )

    @property
    def energy_j(self) -> float | None:
        """Energy of the measured scope in joules (``None`` when no valid figure exists)."""
        return self.result.energy_j

    @property
    def duration_s(self) -> float:
        """Wall time of the block in seconds."""
        return self.result.duration_s

    @property
    def avg_power_w(self) -> float | None:
        """Average power over the block in watts."""
        return self.result.avg_power_w

    @property
    def energy_by_device_j(self) -> dict[str, float]:
        """Joules per device (``gpu:0``, ``cpu:0``, ``cpu:modelled``...)."""
        return dict(self.result.energy_by_device_j)

    @property
    def energy_source(self) -> str:
        """Where the figures come from, e.g. ``measured:zeus-nvml`` or ``modelled:cpu-tdp``."""
        return self.result.energy_source

    def __repr__(self) -> str:
        if self._state != "done" or self._result is None:
            return f"MeasuredWindow({self.name!r}, {self._state})"
        r = self._result
        energy = f"{r.energy_j:.4g} J" if r.energy_j is not None else "no energy"
        return f"MeasuredWindow({self.name!r}: {r.duration_s:.4g} s, {energy}, {r.energy_source})"

    def _repr_html_(self) -> str:
        if self._state != "done" or self._result is None:
            return f"<p>measured window <b>{self.name}</b>: {self._state}, no result</p>"
        return window_html(self._result)


def window_html(result: WindowResult) -> str:
    """A compact HTML table of one window: time, energy per device, average power, source."""

    def cell(text: str) -> str:
        return f"<td style='text-align:right;padding:2px 8px'>{html.escape(text)}</td>"

    def joules(value: float | None) -> str:
        return "none (no valid figure)" if value is None else f"{value:.4g} J"

    rows = [("time", f"{result.duration_s:.4g} s")]
    rows += [(f"energy {device}", joules(e)) for device, e in result.energy_by_device_j.items()]
    rows.append(("energy (total)", joules(result.energy_j)))
    if result.host_energy_j is not None:
        host = f"{result.host_energy_j:.4g} J ({result.host_energy_source}, not in the total)"
        rows.append(("CPU + DRAM beside", host))
    if not result.resolvable:
        rows.append(
            (
                "warning",
                f"shorter than ten counter periods ({result.counter_period_s * 1e3:.3g} ms "
                "each): the energy may be off by a whole period; repeat the work in the cell",
            )
        )
    power = result.avg_power_w
    rows.append(("average power", f"{power:.4g} W" if power is not None else "n/a"))
    rows.append(("source", result.energy_source))
    body = "".join(
        f"<tr><th style='text-align:left;padding:2px 8px'>{html.escape(k)}</th>{cell(v)}</tr>"
        for k, v in rows
    )
    caption = f"<caption style='text-align:left'>window {html.escape(result.name)}</caption>"
    return f"<table class='mlenergy-window'>{caption}{body}</table>"


def measured_window(
    name: str = "window",
    meter: EnergyMeter | None = None,
    where: object = None,
    gpu_indices: list[int] | None = None,
) -> MeasuredWindow:
    """A new :class:`MeasuredWindow` (enter it with ``with``; read figures after the block).

    Without a meter the window measures the devices ``where`` occupies (the model, its device
    or device map), or ``gpu_indices``; see :mod:`mlenergy.measure.scope`.
    """
    return MeasuredWindow(name, meter, where, gpu_indices)
