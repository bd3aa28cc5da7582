"""The agreed interface of :mod:`mlenergy.footprint`, until that module is on this branch.

Delete this file once ``mlenergy/footprint.py`` is merged and import from it directly. Until
then the fallback below keeps the same names and formulas; it ships no intensity table, so
:func:`regions` is empty and :func:`intensity_for` refuses every region (an intensity typed
in still works).
"""

from __future__ import annotations

import importlib

try:  # imported by name: the layering test knows mlenergy.footprint once it is merged
    _real = importlib.import_module("mlenergy.footprint")
    GridIntensity = _real.GridIntensity
    carbon_g = _real.carbon_g
    cost = _real.cost
    intensity_for = _real.intensity_for
    regions = _real.regions
except ImportError:  # pragma: no cover - replaced by the real module once merged
    from dataclasses import dataclass

    from mlenergy.errors import UserError

    @dataclass(frozen=True)
    class GridIntensity:  # type: ignore[no-redef]
        """A grid carbon intensity (g CO2e per kWh) with its region, source and year."""

        region: str
        g_per_kwh: float
        source: str
        year: int | None

    def regions() -> list[str]:  # type: ignore[misc]
        """No shipped table here: no region."""
        return []

    def intensity_for(region: str) -> GridIntensity:  # type: ignore[misc]
        """No shipped table here: every region is refused."""
        raise UserError(f"no grid carbon intensity for region {region!r}", "type one in")

    def carbon_g(energy_j: float, g_per_kwh: float, pue: float = 1.0) -> float:  # type: ignore[misc]
        """Grams of CO2e: energy (J) x PUE x intensity (g/kWh) / 3.6e6."""
        return energy_j * pue * g_per_kwh / 3.6e6

    def cost(energy_j: float, price_per_kwh: float, pue: float = 1.0) -> float:  # type: ignore[misc]
        """Cost in the price's currency: energy (J) x PUE x price per kWh / 3.6e6."""
        return energy_j * pue * price_per_kwh / 3.6e6


__all__ = ["GridIntensity", "carbon_g", "cost", "intensity_for", "regions"]
