"""Every clock option of a pipeline profile, indexed by the knob lowtime assigns.

Both accountings of :mod:`mlenergy.optimize.pipeline_dag` (``real`` and ``perseus``,
:mod:`mlenergy.optimize.pipeline_perseus`) build their operation specs from one
:class:`OptionTable`, so plans of DAGs built from one profile can be compared knob for knob.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mlenergy.optimize.profile import PipelineProfile


@dataclass
class OptionTable:
    """Every option of the profile, indexed by the knob lowtime assigns.

    Attributes:
        frequency_mhz: SM clock of option ``k``.
        time_s: Real time of option ``k`` (s).
        energy_j: Energy of option ``k`` (J).
        quant_time: ``time_s`` in whole time units, rounded as the accounting rounds.
    """

    frequency_mhz: np.ndarray
    time_s: np.ndarray
    energy_j: np.ndarray
    quant_time: np.ndarray


def quantise_up(time_s: float, unit_s: float) -> int:
    """Whole time units needed for ``time_s`` (rounded up, robust to float noise)."""
    return max(1, math.ceil(round(time_s / unit_s, 9)))


def quantise_down(time_s: float, unit_s: float) -> int:
    """Whole time units in ``time_s``, rounded down as lowtime does (``int(t // unit)``)."""
    return int(time_s // unit_s)


OptionKey = tuple[int, str]


def option_table(
    profile: PipelineProfile, unit_s: float, accounting: str
) -> tuple[OptionTable, dict[OptionKey, list[int]]]:
    """One knob per profile option (keys sorted, options in profile order)."""
    quantise = quantise_down if accounting == "perseus" else quantise_up
    freq: list[int] = []
    times: list[float] = []
    energies: list[float] = []
    knobs_of: dict[OptionKey, list[int]] = {}
    for key in sorted(profile.options):
        knobs_of[key] = []
        for o in profile.options[key]:
            knobs_of[key].append(len(freq))
            freq.append(o.frequency_mhz)
            times.append(o.time_s)
            energies.append(o.energy_j)
    table = OptionTable(
        np.array(freq, dtype=np.int64),
        np.array(times, dtype=float),
        np.array(energies, dtype=float),
        np.array([quantise(t, unit_s) for t in times], dtype=np.int64),
    )
    return table, knobs_of
