"""Carbon and cost of an energy figure, derived at view time from a cited grid intensity.

Stored records keep energy only. A view that shows grams of CO2e or money multiplies energy by
the data centre's PUE and by a grid carbon intensity (g CO2e per kWh) or an electricity price
(per kWh, in the user's currency), and labels the figure with the intensity, its source and
year. Intensities come from the shipped yearly-average table
(``mlenergy/reference/grid-carbon-intensity.csv``, see its row in ``SOURCES.md``), from a value
the user gives, or from one of Zeus's live providers (``zeus.monitor.carbon``,
``zeus.monitor.price``), which need ``requests`` and the network and are built only when the
user asks for them.

This module imports nothing of mlenergy but its errors and the reference folder.
"""

from __future__ import annotations

import csv
import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from mlenergy.errors import UserError
from mlenergy.reference import reference_dir

INTENSITY_FILE = "grid-carbon-intensity.csv"
"""The shipped table of yearly average grid carbon intensities (in the reference folder)."""
JOULES_PER_KWH = 3.6e6
USER_SOURCE = "given with --carbon-intensity"
ZEUS_CARBON_PREFIX = "electricitymaps:"
"""``--region electricitymaps:LAT,LON`` asks Zeus's ElectricityMaps client for the live value."""
ZEUS_PRICE_PREFIX = "openei:"
"""``--price-kwh openei:LAT,LON:LABEL`` asks Zeus's OpenEI client for the rate in force now."""

MAX_G_PER_KWH = 2_000.0
"""Highest grid carbon intensity accepted, g CO2e/kWh: above every grid and power plant."""
MAX_PRICE_PER_KWH = 1e6
"""Highest electricity price accepted per kWh, in any currency."""
MAX_PUE = 5.0
"""Highest power usage effectiveness accepted (total facility energy over IT energy)."""
_G_WHY = "gCO2e/kWh; the dirtiest grids and lignite plants emit about 1,000-1,300"
_PRICE_WHY = "per kWh in any currency; even in the weakest currencies electricity costs less"
_PUE_WHY = "facility over IT energy; surveyed data centres lie between about 1.1 and 2.5"
BOUNDS: dict[str, tuple[float, float, bool, str]] = {
    "g_per_kwh": (0.0, MAX_G_PER_KWH, False, _G_WHY),
    "price_per_kwh": (0.0, MAX_PRICE_PER_KWH, False, _PRICE_WHY),
    "pue": (1.0, MAX_PUE, True, _PUE_WHY),
}
"""Input -> (lowest, highest, lowest allowed itself, why): the physical range of each input."""

PER_1K_TOKENS = 1_000
"""Tokens that carbon per token figures are given per (``carbon_g_per_1k_tokens``)."""
PER_1M_TOKENS = 1_000_000
"""Tokens that cost per token figures are given per (``cost_per_m_tokens``)."""
PER_TOKEN_COLUMNS = ("carbon_g_per_1k_tokens", "cost_per_m_tokens")
"""The per-token figures of every view, named with their units (:func:`per_token_figures`)."""

__all__ = [
    "BOUNDS",
    "PER_1K_TOKENS",
    "PER_1M_TOKENS",
    "PER_TOKEN_COLUMNS",
    "Footprint",
    "GridIntensity",
    "carbon_g",
    "check_footprint_input",
    "cost",
    "intensity_for",
    "intensity_from_provider",
    "per_token_figures",
    "price_from_provider",
    "regions",
]


@dataclass(frozen=True)
class GridIntensity:
    """A grid carbon intensity with where it came from.

    Attributes:
        region: Region code (ISO 3166 alpha-3 country, ``USA-XX`` for a US state, ``custom``
            for a value the user gave, ``electricitymaps:LAT,LON`` for a live value).
        g_per_kwh: Grams of CO2-equivalent per kWh of electricity.
        source: Where the figure was read.
        year: The year the figure averages over (for a live value, the year it was read);
            ``None`` when the user gave the figure without one.
    """

    region: str
    g_per_kwh: float
    source: str
    year: int | None

    def label(self) -> str:
        """One line naming the intensity, its region, year and source."""
        year = f", {self.year}" if self.year is not None else ""
        return f"{self.g_per_kwh:.0f} gCO2e/kWh ({self.region}{year}; {self.source})"


@dataclass(frozen=True)
class _Row:
    intensity: GridIntensity
    name: str


@lru_cache(maxsize=4)
def _table(folder: str) -> dict[str, _Row]:
    path = Path(folder) / INTENSITY_FILE
    if not path.is_file():
        raise UserError(
            f"no grid carbon intensity table at {path}",
            "reinstall mlenergy or point $MLENERGY_REFERENCE_DIR at a full reference folder",
        )
    rows: dict[str, _Row] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        for record in csv.DictReader(handle):
            code = record["region"].strip()
            rows[code.upper()] = _Row(
                GridIntensity(
                    region=code,
                    g_per_kwh=float(record["g_co2e_per_kwh"]),
                    source=record["source"].strip(),
                    year=int(record["year"]),
                ),
                record["name"].strip(),
            )
    return rows


def _rows() -> dict[str, _Row]:
    return _table(str(reference_dir()))


def regions() -> list[str]:
    """Codes of the regions in the shipped table, sorted."""
    return sorted(row.intensity.region for row in _rows().values())


def intensity_for(region: str) -> GridIntensity:
    """The yearly average intensity of a region from the shipped table.

    Args:
        region: A code (``FRA``, ``USA-CA``, any case) or a country or state name (``France``).

    Raises:
        UserError: The region is not in the table; the message lists close names.
    """
    rows = _rows()
    key = region.strip().upper()
    if key in rows:
        return rows[key].intensity
    by_name = {row.name.upper(): row for row in rows.values()}
    if key in by_name:
        return by_name[key].intensity
    choices = [row.intensity.region for row in rows.values()] + [row.name for row in rows.values()]
    close = difflib.get_close_matches(region.strip(), choices, n=5, cutoff=0.6)
    close += [
        c for c in difflib.get_close_matches(key, list(rows), n=3, cutoff=0.6) if c not in close
    ]
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise UserError(
        f"no grid carbon intensity for region {region!r}",
        f"{hint}`mlenergy reference --regions` lists the table; use an ISO 3166 alpha-3 code "
        "(FRA, USA), "
        "USA-XX for a US state, or give --carbon-intensity G_PER_KWH",
    )


def check_footprint_input(name: str, value: float, what: str | None = None) -> float:
    """``value`` if it lies in the physical range of input ``name`` (:data:`BOUNDS`).

    The one check of carbon intensities, prices and PUEs, wherever they come from (an option,
    a live provider, the leaderboard's boxes).

    Args:
        name: ``g_per_kwh``, ``price_per_kwh`` or ``pue``.
        value: The value.
        what: How the user gave it (``--pue``), for the message; ``name`` by default.

    Returns:
        ``value`` as a float.

    Raises:
        UserError: Not a finite number, or outside the range; the message states the range
            and why.
    """
    low, high, low_ok, why = BOUNDS[name]
    label = what or name
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{label} must be a number, got {value!r}") from None
    below = number < low or (number == low and not low_ok)
    if not math.isfinite(number) or below or number > high:
        low_text = f"at least {low:g}" if low_ok else f"more than {low:g}"
        raise UserError(
            f"{label} is {number:g}, outside its physical range",
            f"Give a value {low_text} and at most {high:,.0f} ({why})",
        )
    return number


def _finite(value: float, what: str) -> float:
    """``value`` if finite; a carbon or cost figure that overflowed is refused."""
    if not math.isfinite(value):
        raise UserError(
            f"the {what} figure is {value!r}: the energy is too large for the settings given",
            "check the energy figure and the intensity, price and PUE",
        )
    return value


def carbon_g(energy_j: float, g_per_kwh: float, pue: float = 1.0) -> float:
    """Grams of CO2e for an energy figure.

    Args:
        energy_j: Energy of the IT equipment, joules.
        g_per_kwh: Grid carbon intensity, g CO2e per kWh.
        pue: Power usage effectiveness of the facility (total over IT energy, >= 1).
    """
    return energy_j * pue * g_per_kwh / JOULES_PER_KWH


def cost(energy_j: float, price_per_kwh: float, pue: float = 1.0) -> float:
    """Cost of an energy figure, in the currency of the price.

    Args:
        energy_j: Energy of the IT equipment, joules.
        price_per_kwh: Electricity price per kWh.
        pue: Power usage effectiveness of the facility (total over IT energy, >= 1).
    """
    return energy_j * pue * price_per_kwh / JOULES_PER_KWH


def per_token_figures(
    energy_per_token_j: Any,
    g_per_kwh: float | None,
    price_per_kwh: float | None,
    pue: float = 1.0,
) -> dict[str, Any]:
    """Carbon per 1k tokens and cost per 1M tokens of an energy per token.

    The one place the per-token units are attached (:data:`PER_TOKEN_COLUMNS`): every view
    (``estimate``, ``bench``, ``optimize power-cap``, the leaderboard) reads its figures here.

    Args:
        energy_per_token_j: Energy per token, joules (a float or a numpy array).
        g_per_kwh: Grid carbon intensity, g CO2e per kWh (``None``: no carbon figure).
        price_per_kwh: Electricity price per kWh (``None``: no cost figure).
        pue: Power usage effectiveness applied (1.0 when the energy already includes it).

    Returns:
        ``carbon_g_per_1k_tokens`` (g CO2e) and ``cost_per_m_tokens`` (the price's currency),
        only those whose setting is given.
    """
    out: dict[str, Any] = {}
    if g_per_kwh is not None:
        out[PER_TOKEN_COLUMNS[0]] = carbon_g(energy_per_token_j * PER_1K_TOKENS, g_per_kwh, pue)
    if price_per_kwh is not None:
        out[PER_TOKEN_COLUMNS[1]] = cost(energy_per_token_j * PER_1M_TOKENS, price_per_kwh, pue)
    return out


def intensity_from_provider(provider: Any, label: str) -> GridIntensity:
    """The current intensity from a Zeus carbon intensity provider.

    Args:
        provider: A ``zeus.monitor.carbon.CarbonIntensityProvider`` (or any object with
            ``get_current_carbon_intensity() -> float`` in g CO2e per kWh).
        label: The region as the user named it (e.g. ``electricitymaps:48.86,2.35``).

    Raises:
        UserError: The provider failed (no network, no data for the location).
    """
    try:
        value = float(provider.get_current_carbon_intensity())
    except Exception as exc:  # Zeus raises its own errors, requests its own
        raise UserError(
            f"the live carbon intensity for {label} could not be read"
            f" ({type(exc).__name__}: {exc})",
            "check the network and the location, or give --region CODE or --carbon-intensity",
        ) from exc
    check_footprint_input("g_per_kwh", value, "the live carbon intensity")
    source = f"live, zeus {type(provider).__name__}"
    return GridIntensity(label, value, source, datetime.now(UTC).year)


def price_from_provider(provider: Any, when: datetime | None = None) -> float:
    """The price per kWh in force at ``when`` from a Zeus electricity price provider.

    Reads the rate the way ``zeus.monitor.price`` does: the month and hour pick a tier from the
    weekday or weekend schedule, and the tier's first ``rate`` is the price per kWh.

    Args:
        provider: A ``zeus.monitor.price.ElectricityPriceProvider`` (``OpenEIClient``), or any
            object whose ``get_current_electricity_prices()`` returns that dictionary.
        when: The moment (local time of the provider's tariff); now when ``None``.

    Raises:
        UserError: The provider failed or returned a tariff this reader cannot parse.
    """
    when = when or datetime.now()
    try:
        data = provider.get_current_electricity_prices()
        schedule = data[
            "energy_weekday_schedule" if when.weekday() < 5 else "energy_weekend_schedule"
        ]
        tier = schedule[when.month - 1][when.hour]
        value = float(data["energy_rate_structure"][tier][0]["rate"])
    except Exception as exc:  # Zeus raises its own errors, requests its own
        raise UserError(
            f"the live electricity price could not be read ({type(exc).__name__}: {exc})",
            "check the network, the location and the tariff label, or give --price-kwh PRICE",
        ) from exc
    return check_footprint_input("price_per_kwh", value, "the live electricity price")


def _lat_lon(text: str, option: str) -> tuple[float, float]:
    try:
        lat, lon = (float(part) for part in text.split(","))
    except ValueError:
        raise UserError(f"{option} needs LAT,LON after the provider, got {text!r}") from None
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise UserError(f"{option}: latitude or longitude out of range in {text!r}")
    return lat, lon


def _zeus_carbon_provider(lat: float, lon: float) -> Any:
    try:
        from zeus.monitor.carbon import ElectrictyMapsClient
    except ImportError as exc:  # zeus.monitor.carbon imports requests, which Zeus does not declare
        raise UserError(
            f"Zeus's carbon providers cannot be imported ({exc})", "pip install requests"
        ) from exc
    return ElectrictyMapsClient((lat, lon))


def _zeus_price_provider(lat: float, lon: float, label: str) -> Any:
    try:
        from zeus.monitor.price import OpenEIClient
    except ImportError as exc:
        raise UserError(
            f"Zeus's price providers cannot be imported ({exc})", "pip install requests"
        ) from exc
    return OpenEIClient((lat, lon), label)


@dataclass(frozen=True)
class Footprint:
    """What turns joules into grams of CO2e and money for one view.

    Attributes:
        intensity: The grid carbon intensity, or ``None`` when no carbon is asked for.
        price_per_kwh: Electricity price per kWh (the user's currency), or ``None``.
        price_source: Where the price came from.
        pue: Power usage effectiveness applied to every figure (1.0 = IT energy only).
    """

    intensity: GridIntensity | None = None
    price_per_kwh: float | None = None
    price_source: str = "given with --price-kwh"
    pue: float = 1.0

    def __post_init__(self) -> None:
        check_footprint_input("pue", self.pue, "the PUE")
        if self.intensity is not None:
            check_footprint_input("g_per_kwh", self.intensity.g_per_kwh, "the carbon intensity")
        if self.price_per_kwh is not None:
            check_footprint_input("price_per_kwh", self.price_per_kwh, "the price per kWh")

    @classmethod
    def from_options(
        cls,
        carbon_intensity: float | None = None,
        region: str | None = None,
        price_kwh: str | float | None = None,
        pue: float | None = None,
        *,
        carbon_provider: Callable[[float, float], Any] | None = None,
        price_provider: Callable[[float, float, str], Any] | None = None,
    ) -> Footprint | None:
        """Build the settings from the command-line options; ``None`` when none is given.

        Args:
            carbon_intensity: ``--carbon-intensity``, g CO2e per kWh.
            region: ``--region``: a table code or name, or ``electricitymaps:LAT,LON`` for Zeus's
                live ElectricityMaps client.
            price_kwh: ``--price-kwh``: a price per kWh, or ``openei:LAT,LON:LABEL`` for the
                rate in force now from Zeus's OpenEI client.
            pue: ``--pue`` (>= 1).
            carbon_provider: Builds the carbon provider from (lat, lon); Zeus's by default
                (tests inject one).
            price_provider: Builds the price provider from (lat, lon, label); Zeus's by default.

        Raises:
            UserError: Both an intensity and a region, a value that is not positive and
                finite, a PUE below 1, a PUE with nothing to apply it to, or an unknown region.
        """
        if carbon_intensity is not None and region is not None:
            raise UserError(
                "--carbon-intensity and --region both give the grid intensity", "give one of them"
            )
        if carbon_intensity is None and region is None and price_kwh is None:
            if pue is not None:
                raise UserError(
                    "--pue applies to carbon or cost",
                    "add --carbon-intensity G_PER_KWH, --region CODE or --price-kwh PRICE",
                )
            return None
        if pue is not None:
            pue = check_footprint_input("pue", pue, "--pue")
        intensity = None
        if carbon_intensity is not None:
            value = check_footprint_input("g_per_kwh", carbon_intensity, "--carbon-intensity")
            intensity = GridIntensity("custom", value, USER_SOURCE, None)
        elif region is not None:
            if region.lower().startswith(ZEUS_CARBON_PREFIX):
                where = region[len(ZEUS_CARBON_PREFIX) :]
                lat, lon = _lat_lon(where, "--region electricitymaps:")
                build = carbon_provider or _zeus_carbon_provider
                intensity = intensity_from_provider(build(lat, lon), region)
            else:
                intensity = intensity_for(region)
        price, price_source = _price(price_kwh, price_provider)
        return cls(intensity, price, price_source, 1.0 if pue is None else float(pue))

    def carbon_g(self, energy_j: float) -> float | None:
        """Grams of CO2e for ``energy_j`` joules, or ``None`` without an intensity."""
        if self.intensity is None:
            return None
        return _finite(carbon_g(energy_j, self.intensity.g_per_kwh, self.pue), "carbon")

    def cost(self, energy_j: float) -> float | None:
        """Cost of ``energy_j`` joules in the price's currency, or ``None`` without a price."""
        if self.price_per_kwh is None:
            return None
        return _finite(cost(energy_j, self.price_per_kwh, self.pue), "cost")

    def per_token(self, energy_per_token_j: float) -> dict[str, float]:
        """``carbon_g_per_1k_tokens`` and ``cost_per_m_tokens`` for an energy per token.

        Only the figures whose setting is given appear (:func:`per_token_figures`).
        """
        g_per_kwh = self.intensity.g_per_kwh if self.intensity is not None else None
        return per_token_figures(energy_per_token_j, g_per_kwh, self.price_per_kwh, self.pue)

    def per_token_lines(self, energy_per_token_j: float, tokens: str = "tokens") -> list[str]:
        """Text lines for carbon per 1k and cost per 1M ``tokens``, each labelled.

        Args:
            energy_per_token_j: Energy per token, joules.
            tokens: What the tokens are (e.g. ``output tokens``).
        """
        carbon = self.lines(energy_per_token_j * PER_1K_TOKENS, f"per 1k {tokens}")
        money = self.lines(energy_per_token_j * PER_1M_TOKENS, f"per 1M {tokens}")
        return [line for line in carbon if line.startswith("carbon")] + [
            line for line in money if line.startswith("cost")
        ]

    def basis(self) -> str:
        """One line saying what the carbon and cost figures were derived with."""
        parts = [f"PUE {self.pue:g}"]
        if self.intensity is not None:
            parts.append(f"carbon at {self.intensity.label()}")
        if self.price_per_kwh is not None:
            parts.append(f"cost at {self.price_per_kwh:g}/kWh ({self.price_source})")
        return "; ".join(parts)

    def describe(self) -> dict[str, Any]:
        """The settings as JSON-ready values (for ``--json`` outputs)."""
        out: dict[str, Any] = {"pue": self.pue}
        if self.intensity is not None:
            out["carbon_intensity_g_per_kwh"] = self.intensity.g_per_kwh
            out["carbon_intensity_region"] = self.intensity.region
            out["carbon_intensity_source"] = self.intensity.source
            out["carbon_intensity_year"] = self.intensity.year
        if self.price_per_kwh is not None:
            out["price_per_kwh"] = self.price_per_kwh
            out["price_source"] = self.price_source
        return out

    def lines(self, energy_j: float, what: str) -> list[str]:
        """Text lines with the carbon and cost of ``energy_j``, each labelled.

        Args:
            energy_j: The energy figure, joules.
            what: What the energy is of (e.g. ``per 1k tokens``).
        """
        pue = f" (PUE {self.pue:g})" if self.pue != 1.0 else ""
        out = []
        grams = self.carbon_g(energy_j)
        if grams is not None and self.intensity is not None:
            out.append(f"carbon {what}: {grams:.4g} gCO2e{pue} at {self.intensity.label()}")
        money = self.cost(energy_j)
        if money is not None:
            out.append(
                f"cost {what}: {money:.4g}{pue} at {self.price_per_kwh:g}/kWh ({self.price_source})"
            )
        return out


def _price(
    price_kwh: str | float | None, price_provider: Callable[[float, float, str], Any] | None
) -> tuple[float | None, str]:
    if price_kwh is None:
        return None, "given with --price-kwh"
    text = str(price_kwh).strip()
    if text.lower().startswith(ZEUS_PRICE_PREFIX):
        parts = text[len(ZEUS_PRICE_PREFIX) :].split(":", 1)
        if len(parts) != 2 or not parts[1]:
            raise UserError(
                f"--price-kwh {text!r} needs openei:LAT,LON:LABEL",
                "LABEL is the OpenEI utility rate label (apps.openei.org)",
            )
        lat, lon = _lat_lon(parts[0], "--price-kwh openei:")
        build = price_provider or _zeus_price_provider
        value = price_from_provider(build(lat, lon, parts[1]))
        return value, f"live, zeus OpenEI rate {parts[1]}"
    try:
        value = float(text)
    except ValueError:
        raise UserError(
            f"--price-kwh must be a number (price per kWh) or openei:LAT,LON:LABEL, got {text!r}"
        ) from None
    return check_footprint_input("price_per_kwh", value, "--price-kwh"), "given with --price-kwh"
