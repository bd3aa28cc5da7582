"""Options shared by several commands: the store folder, carbon and cost beside energy."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from mlenergy.footprint import Footprint

DATA_DIR_ENV = "MLENERGY_DATA_DIR"


def default_data_dir() -> Path:
    """Return ``$MLENERGY_DATA_DIR`` if set, else ``./data``."""
    return Path(os.environ.get(DATA_DIR_ENV) or "data")


DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="Store folder (default: $MLENERGY_DATA_DIR, else ./data).",
        show_default=False,
    ),
]


def resolve_data_dir(value: Path | None) -> Path:
    """Return the data folder to use: ``value`` if given, else :func:`default_data_dir`."""
    return value if value is not None else default_data_dir()


CarbonIntensityOption = Annotated[
    float | None,
    typer.Option(
        "--carbon-intensity",
        metavar="G_PER_KWH",
        help="Grid carbon intensity (g CO2e per kWh) to show carbon beside energy.",
        show_default=False,
    ),
]
RegionOption = Annotated[
    str | None,
    typer.Option(
        "--region",
        metavar="CODE",
        help="Region whose yearly grid intensity to use (FRA, USA-CA, ...: `mlenergy reference "
        "--regions`), or electricitymaps:LAT,LON for Zeus's live value (network, requests).",
        show_default=False,
    ),
]
PriceKwhOption = Annotated[
    str | None,
    typer.Option(
        "--price-kwh",
        metavar="PRICE",
        help="Electricity price per kWh (your currency) to show cost beside energy, or "
        "openei:LAT,LON:LABEL for Zeus's OpenEI rate now (network, requests).",
        show_default=False,
    ),
]
PueOption = Annotated[
    float | None,
    typer.Option(
        "--pue",
        help="Power usage effectiveness of the facility (>= 1; default 1: IT energy only).",
        show_default=False,
    ),
]


@dataclass(frozen=True)
class FootprintOptions:
    """Carbon and cost beside energy: a grid intensity (or region), a price and a PUE."""

    carbon_intensity: CarbonIntensityOption = None
    region: RegionOption = None
    price_kwh: PriceKwhOption = None
    pue: PueOption = None

    def footprint(self) -> Footprint | None:
        """The :class:`~mlenergy.footprint.Footprint` of the options (``None``: none given).

        Raises:
            UserError: A bad value (see :meth:`mlenergy.footprint.Footprint.from_options`).
        """
        return Footprint.from_options(self.carbon_intensity, self.region, self.price_kwh, self.pue)

    def given(self) -> list[str]:
        """The options given, by name (``--region``)."""
        return [f"--{k.replace('_', '-')}" for k, v in vars(self).items() if v is not None]
