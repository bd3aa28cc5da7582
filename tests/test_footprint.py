"""Carbon and cost derived from energy: the shipped table, the formulas, the CLI settings."""

from __future__ import annotations

import csv
import math
from datetime import datetime

import pytest

from mlenergy import footprint
from mlenergy.errors import UserError
from mlenergy.footprint import Footprint, GridIntensity, carbon_g, cost, intensity_for, regions
from mlenergy.reference import PACKAGE_DIR, sources


def test_table_rows_are_cited_and_plausible():
    with (PACKAGE_DIR / footprint.INTENSITY_FILE).open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) > 200
    for row in rows:
        value = float(row["g_co2e_per_kwh"])
        assert 0 < value < 1500, row
        assert 2000 <= int(row["year"]) <= 2030, row
        assert row["source"].startswith("CodeCarbon 3.3.2"), row
    assert len({row["region"] for row in rows}) == len(rows)
    assert footprint.INTENSITY_FILE in {s.path for s in sources()}


def test_intensity_by_code_or_name_any_case():
    france = intensity_for("fra")
    assert france == intensity_for("France")
    assert france.region == "FRA" and france.year == 2023
    assert france.g_per_kwh == pytest.approx(56.039)
    assert intensity_for("usa-ca").region == "USA-CA"
    assert "FRA" in regions() and regions() == sorted(regions())


def test_unknown_region_lists_close_names():
    with pytest.raises(UserError) as err:
        intensity_for("Frnace")
    assert "France" in str(err.value)


def test_formulas():
    # 3.6 MJ = 1 kWh
    assert carbon_g(3.6e6, 400.0) == pytest.approx(400.0)
    assert carbon_g(3.6e6, 400.0, pue=1.5) == pytest.approx(600.0)
    assert cost(7.2e6, 0.10, pue=1.2) == pytest.approx(0.24)


def test_footprint_per_token_figures():
    fp = Footprint.from_options(carbon_intensity=360.0, price_kwh=0.2, pue=1.1)
    figures = fp.per_token(0.5)
    # 0.5 J/token x 1000 tokens x 1.1 x 360 g/kWh / 3.6e6 J/kWh
    assert figures["carbon_g_per_1k_tokens"] == pytest.approx(0.5 * 1000 * 1.1 * 360 / 3.6e6)
    assert figures["cost_per_m_tokens"] == pytest.approx(0.5 * 1e6 * 1.1 * 0.2 / 3.6e6)
    only_price = Footprint.from_options(price_kwh="0.2")
    assert set(only_price.per_token(0.5)) == {"cost_per_m_tokens"}
    lines = Footprint.from_options(region="FRA").lines(3.6e6, "per run")
    assert lines == [f"carbon per run: 56.04 gCO2e at {intensity_for('FRA').label()}"]


def test_no_options_means_no_footprint():
    assert Footprint.from_options() is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"carbon_intensity": 100.0, "region": "FRA"},
        {"carbon_intensity": -1.0},
        {"carbon_intensity": math.inf},
        {"price_kwh": "0"},
        {"price_kwh": "cheap"},
        {"price_kwh": "nan"},
        {"region": "FRA", "pue": 0.9},
        {"pue": 1.2},
        {"region": "Atlantis"},
        {"region": "electricitymaps:abc"},
        {"price_kwh": "openei:40,-100"},
    ],
)
def test_bad_options_are_user_errors(kwargs):
    with pytest.raises(UserError):
        Footprint.from_options(**kwargs)


class _FakeCarbonProvider:
    """Stands in for zeus.monitor.carbon.ElectrictyMapsClient (which needs the network)."""

    def __init__(self, value):
        self.value = value

    def get_current_carbon_intensity(self) -> float:
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


def _tariff():
    # OpenEI's shape as zeus.monitor.price reads it: 12 months x 24 hours of tier indices.
    weekday = [[0] * 24 for _ in range(12)]
    weekday[6][14] = 1
    return {
        "energy_rate_structure": [[{"rate": 0.11}], [{"rate": 0.31}]],
        "energy_weekday_schedule": weekday,
        "energy_weekend_schedule": [[0] * 24 for _ in range(12)],
    }


class _FakePriceProvider:
    def get_current_electricity_prices(self):
        return _tariff()


def test_zeus_carbon_provider_is_used_when_configured():
    seen = []

    def build(lat, lon):
        seen.append((lat, lon))
        return _FakeCarbonProvider(123.0)

    fp = Footprint.from_options(region="electricitymaps:48.86,2.35", carbon_provider=build)
    assert seen == [(48.86, 2.35)]
    assert fp.intensity.g_per_kwh == 123.0
    assert "_FakeCarbonProvider" in fp.intensity.source and "live" in fp.intensity.source


def test_zeus_carbon_provider_failure_is_one_user_error():
    with pytest.raises(UserError, match="could not be read"):
        Footprint.from_options(
            region="electricitymaps:48.86,2.35",
            carbon_provider=lambda lat, lon: _FakeCarbonProvider(OSError("no network")),
        )


def test_zeus_price_provider_reads_the_tier_in_force():
    # A Wednesday in July at 14:00 is tier 1; at 03:00 tier 0.
    assert footprint.price_from_provider(_FakePriceProvider(), datetime(2025, 7, 9, 14)) == 0.31
    assert footprint.price_from_provider(_FakePriceProvider(), datetime(2025, 7, 9, 3)) == 0.11
    fp = Footprint.from_options(
        price_kwh="openei:40.0,-105.0:Residential TOU",
        price_provider=lambda lat, lon, label: _FakePriceProvider(),
    )
    assert fp.price_per_kwh in (0.11, 0.31)
    assert "Residential TOU" in fp.price_source


def test_user_intensity_has_no_invented_year():
    fp = Footprint.from_options(carbon_intensity=250.0)
    assert fp.intensity == GridIntensity("custom", 250.0, footprint.USER_SOURCE, None)
    assert fp.describe()["carbon_intensity_year"] is None


def test_every_input_has_one_physical_range():
    check = footprint.check_footprint_input
    assert check("g_per_kwh", 1300) == 1300.0 and check("pue", 1) == 1.0
    for name, value in (
        ("g_per_kwh", 0),
        ("g_per_kwh", 2001),
        ("price_per_kwh", 0),
        ("price_per_kwh", 2e6),
        ("pue", 0.99),
        ("pue", 5.01),
        ("pue", math.nan),
        ("g_per_kwh", math.inf),
    ):
        with pytest.raises(UserError, match="outside its physical range"):
            check(name, value)
    with pytest.raises(UserError, match="at most 5"):
        Footprint(pue=100.0)
    with pytest.raises(UserError, match="the carbon intensity"):
        Footprint(GridIntensity("custom", 1e308, "typed", None))


def test_live_values_beyond_physics_are_refused():
    class Provider:
        def get_current_carbon_intensity(self):
            return 1e9

    with pytest.raises(UserError, match="the live carbon intensity is 1e\\+09"):
        footprint.intensity_from_provider(Provider(), "electricitymaps:0,0")


def test_a_non_finite_carbon_or_cost_is_refused():
    fp = Footprint(GridIntensity("custom", 2000.0, "typed", None), 1e6, pue=5.0)
    assert math.isfinite(fp.carbon_g(1e12))
    with pytest.raises(UserError, match="the carbon figure is inf"):
        fp.carbon_g(1e306)
    with pytest.raises(UserError, match="the cost figure is inf"):
        fp.cost(1e306)


def test_strict_json_refuses_non_finite_numbers_and_names_where():
    from mlenergy.strict_json import dumps

    assert dumps({"a": [1.5, None]}) == '{"a": [1.5, null]}'
    with pytest.raises(UserError, match=r"at rows\[1\]\.carbon"):
        dumps({"rows": [{"carbon": 1.0}, {"carbon": math.inf}]})
    with pytest.raises(UserError, match="non-finite"):
        dumps(math.nan)
