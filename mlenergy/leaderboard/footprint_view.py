"""Carbon and cost beside every energy figure, derived at view time.

Stored records keep energy only. The reader picks a region (the shipped table of yearly grid
carbon intensities, :mod:`mlenergy.footprint`) or types an intensity, a PUE and a price per
kWh; the table then adds, per row,

- ``carbon_g_per_1k_tokens``: energy per output token (J) x 1,000 x PUE x intensity
  (g CO2e/kWh) / 3.6e6, in grams of CO2e per 1,000 output tokens;
- ``cost_per_m_tokens``: energy per output token (J) x 1e6 x PUE x price per kWh / 3.6e6, in
  the price's currency per million output tokens,

and a line names the intensity with its region, source and year.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from mlenergy import footprint as fp
from mlenergy.errors import UserError

CUSTOM = "custom"
"""Region label of an intensity the reader typed in."""

FOOTPRINT_COLUMNS = fp.PER_TOKEN_COLUMNS
"""The derived columns (see the module docstring; :func:`mlenergy.footprint.per_token_figures`)."""


@dataclass(frozen=True)
class ViewFootprint:
    """What the carbon and cost columns are derived with.

    Attributes:
        intensity: The grid intensity (``None``: no carbon column).
        pue: Power usage effectiveness (>= 1; 1.0: the measured energy only).
        price_per_kwh: Electricity price per kWh (``None``: no cost column).
    """

    intensity: fp.GridIntensity | None = None
    pue: float = 1.0
    price_per_kwh: float | None = None

    @property
    def active(self) -> bool:
        """Whether any derived column has a figure."""
        return self.intensity is not None or self.price_per_kwh is not None

    def key(self) -> tuple:
        """A hashable key of the settings (for memoised answers)."""
        i = self.intensity
        ident = None if i is None else (i.region, i.g_per_kwh, i.source, i.year)
        return (ident, self.pue, self.price_per_kwh)

    def attach(self, rows: pd.DataFrame) -> pd.DataFrame:
        """``rows`` with :data:`FOOTPRINT_COLUMNS` (NaN where a setting or energy is missing)."""
        ept = pd.to_numeric(rows["energy_per_token_j"], errors="coerce").to_numpy(dtype=float)
        g_per_kwh = self.intensity.g_per_kwh if self.intensity is not None else None
        figures = fp.per_token_figures(ept, g_per_kwh, self.price_per_kwh, self.pue)
        nan = np.full(len(rows), np.nan)
        return rows.assign(**{c: figures.get(c, nan) for c in FOOTPRINT_COLUMNS})

    def label(self) -> str:
        """One line: the intensity (region, source, year), the PUE and the price."""
        parts = []
        i = self.intensity
        if i is not None:
            year = f", {i.year}" if i.year is not None else ""
            parts.append(f"carbon at {i.g_per_kwh:g} gCO2e/kWh ({i.region}{year}; {i.source})")
        if self.price_per_kwh is not None:
            parts.append(f"cost at {self.price_per_kwh:g} per kWh (given)")
        if not parts:
            return "Pick a region or type an intensity (and a price) to see carbon and cost."
        return " · ".join([*parts, f"PUE {self.pue:g}; derived from energy per token, not stored"])


def _number(value: Any, what: str) -> float | None:
    """A typed number, ``None`` when empty; refuses non-finite and negative values."""
    if value is None or value == "":
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{what} {value!r} is not a number", f"type a number for {what}") from None
    if not math.isfinite(v) or v < 0:
        raise UserError(f"{what} is {v:g}", f"give {what} as a finite number >= 0")
    return v


def view_footprint(
    region: str | None, g_per_kwh: object, pue: object, price_per_kwh: object
) -> ViewFootprint:
    """The settings from the selector's values.

    Args:
        region: A region code of the shipped table (empty: none).
        g_per_kwh: A typed intensity (g CO2e/kWh); when positive it wins over ``region``.
        pue: Power usage effectiveness (empty: 1.0).
        price_per_kwh: Price per kWh (empty or 0: no cost column).

    Raises:
        UserError: A value is not a finite number, the PUE is below 1, or the region is
            unknown.
    """
    typed = _number(g_per_kwh, "the intensity")
    p = _number(pue, "the PUE")
    p = 1.0 if p is None else p
    if p < 1.0:
        raise UserError(f"the PUE is {p:g}; it must be at least 1", "give e.g. 1.2")
    price = _number(price_per_kwh, "the price per kWh") or None
    intensity = None
    if typed:
        intensity = fp.GridIntensity(CUSTOM, typed, "typed in by the reader", None)
    elif region:
        intensity = fp.intensity_for(str(region))
    return ViewFootprint(intensity, p, price)


def region_choices() -> list[str]:
    """The region picker's choices: the shipped table's codes (empty without a table)."""
    try:
        return fp.regions()
    except UserError:
        return []
