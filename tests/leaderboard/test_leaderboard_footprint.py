"""Carbon and cost columns derived at view time from energy per token, PUE, intensity, price."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from mlenergy import footprint as fp
from mlenergy.errors import UserError
from mlenergy.leaderboard import answers
from mlenergy.leaderboard import footprint_view as fv
from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.table_tab import footprint_of

FAKE = {"FRA": fp.GridIntensity("FRA", 56.0, "test table", 2023)}


@pytest.fixture
def fake_table(monkeypatch):
    def _intensity(region: str):
        if region.upper() not in FAKE:
            raise UserError(f"no grid carbon intensity for region {region!r}", "pick another")
        return FAKE[region.upper()]

    monkeypatch.setattr(fp, "intensity_for", _intensity)
    monkeypatch.setattr(fp, "regions", lambda: sorted(FAKE))


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return AppContext.load(tmp_path_factory.mktemp("empty-store"))


def test_columns_follow_the_formula():
    rows = pd.DataFrame({"energy_per_token_j": [0.36, 3.6, math.nan]})
    setting = fv.view_footprint("", 500.0, 1.2, 0.2)
    out = setting.attach(rows)
    # 0.36 J/token x 1000 tokens x 1.2 x 500 g/kWh / 3.6e6 J/kWh = 0.06 g
    assert out["carbon_g_per_1k_tokens"].iloc[0] == pytest.approx(0.06)
    assert out["carbon_g_per_1k_tokens"].iloc[1] == pytest.approx(0.6)
    # 0.36 J/token x 1e6 tokens x 1.2 x 0.2 per kWh / 3.6e6 = 0.024
    assert out["cost_per_m_tokens"].iloc[0] == pytest.approx(0.024)
    assert out.iloc[2].isna().all() or math.isnan(out["cost_per_m_tokens"].iloc[2])
    none = fv.view_footprint("", None, None, None)
    assert not none.active and none.pue == 1.0


def test_region_is_cited_and_a_typed_value_wins(fake_table):
    by_region = fv.view_footprint("FRA", None, 1.0, None)
    assert by_region.intensity.g_per_kwh == 56.0
    label = by_region.label()
    assert "FRA" in label and "2023" in label and "test table" in label
    typed = fv.view_footprint("FRA", 300, 1.0, None)
    assert typed.intensity.region == fv.CUSTOM and typed.intensity.g_per_kwh == 300
    assert fv.region_choices() == ["FRA"]


@pytest.mark.parametrize(
    "settings,problem",
    [
        (("", "x", 1.0, None), "not a number"),
        (("", None, 0.8, None), "PUE"),
        (("", math.inf, 1.0, None), "intensity"),
        (("", None, 1.0, -1), "price"),
    ],
)
def test_bad_settings_are_one_message_and_no_columns(settings, problem):
    setting, line = footprint_of(settings)
    assert setting is None and problem in line


def test_table_shows_the_columns_only_when_set(ctx, fake_table):
    q = lb.TableQuery(task="lm-arena-chat", source_kinds=lb.DEFAULT_SOURCES)
    plain, _, _ = answers.table_page(ctx, None, q)
    assert "carbon_g_per_1k_tokens" not in plain
    setting = fv.view_footprint("FRA", None, 1.1, 0.25)
    html, _, _ = answers.table_page(ctx, None, q, footprint=setting)
    assert 'data-col="carbon_g_per_1k_tokens"' in html and 'data-col="cost_per_m_tokens"' in html
    head = html.split("</thead>")[0]
    assert head.index("energy_per_token_j") < head.index("carbon_g_per_1k_tokens")
    csv = answers.table_csv(ctx, None, q, setting).splitlines()
    assert "gCO2e/1k tok" in csv[0] and "Cost/M tok" in csv[0]
    # the stored frame keeps energy only
    assert "carbon_g_per_1k_tokens" not in ctx.frame(None).columns
