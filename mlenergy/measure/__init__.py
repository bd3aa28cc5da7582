"""Energy measurement through Zeus: :class:`EnergyMeter` and its window results.

Where Zeus finds no energy counter, energy comes from a documented CPU power model
(``modelled:cpu-tdp``, see :mod:`mlenergy.measure.cpu_model`); tests inject emulated devices
into Zeus (:mod:`mlenergy.measure.emulated`). This package never imports transformers and
imports torch only when Zeus synchronises real GPUs.
"""

from __future__ import annotations

from mlenergy.measure.cpu_model import (
    CPU_TDP_ENV,
    CPU_TDP_FLAG_HELP,
    CpuPowerModel,
    resolve_cpu_power_model,
)
from mlenergy.measure.meter import MODELLED_CPU_SOURCE, EnergyMeter
from mlenergy.measure.repeats import (
    RepeatSummary,
    duration_stats,
    energy_stats,
    summarize_repeats,
)
from mlenergy.measure.scope import measured_gpus, meter_for, occupied_gpus
from mlenergy.measure.window_result import WindowHandle, WindowResult

__all__ = [
    "CPU_TDP_ENV",
    "CPU_TDP_FLAG_HELP",
    "MODELLED_CPU_SOURCE",
    "CpuPowerModel",
    "EnergyMeter",
    "RepeatSummary",
    "WindowHandle",
    "WindowResult",
    "duration_stats",
    "energy_stats",
    "measured_gpus",
    "meter_for",
    "occupied_gpus",
    "resolve_cpu_power_model",
    "summarize_repeats",
]
