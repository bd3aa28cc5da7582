"""Carbon and cost beside the measured study's joules: headline table, report, summary.csv."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from mlenergy.cli import main
from mlenergy.footprint import Footprint
from mlenergy.studies.measured import SUMMARY_COLUMNS
from mlenergy.studies.measured_study import run_measured_study

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does


def _cli(store, quality, report, *extra: str) -> list[str]:
    return [
        "study", "dense-vs-moe", "--measured", "--without-reference", "--data-dir", str(store),
        "--quality-file", str(quality), "--report-dir", str(report), "--no-progress", *extra,
    ]  # fmt: skip


def test_report_adds_carbon_and_cost_per_response_and_correct(
    measured_store, quality_file, tmp_path
):
    fp = Footprint.from_options(carbon_intensity=360.0, price_kwh="0.5", pue=1.5)
    result = run_measured_study(
        measured_store, quality_file=quality_file, report_dir=tmp_path / "rep", progress=False,
        include_reference=False, footprint=fp,
    )  # fmt: skip
    csv = pd.read_csv(result.csv_path)
    assert list(csv.columns[: len(SUMMARY_COLUMNS)]) == list(SUMMARY_COLUMNS)
    assert list(result.summary.columns) == list(csv.columns)  # the notebook's table too
    row = csv[csv["energy_per_correct_j"].notna()].iloc[0]
    # 3.6e6 J per kWh: 360 g/kWh x 1.5 PUE is 1.5e-4 g per joule; 0.5/kWh x 1.5 is 2.083e-7.
    assert row["carbon_g_per_response"] == pytest.approx(row["energy_per_response_j"] * 1.5e-4)
    assert row["carbon_g_per_correct"] == pytest.approx(row["energy_per_correct_j"] * 1.5e-4)
    assert row["cost_per_correct"] == pytest.approx(row["energy_per_correct_j"] * 0.75 / 3.6e6)
    assert row["carbon_intensity_source"] == "given with --carbon-intensity"
    assert row["pue"] == 1.5 and row["price_per_kwh"] == 0.5
    no_correct = csv[csv["energy_per_correct_j"].isna()]
    assert no_correct.empty or no_correct["carbon_g_per_correct"].isna().all()
    md = result.summary_path.read_text()
    assert "gCO2e/correct (custom, PUE 1.5)" in md and "cost/response (at 0.5/kWh, PUE 1.5)" in md
    assert "360 gCO2e/kWh (custom; given with --carbon-intensity)" in md
    html = result.report_path.read_text()
    assert "id='footprint-note'" in html and "gCO2e/response (custom, PUE 1.5)" in html


def test_cli_prints_the_headline_with_the_region_source_and_year(
    measured_store, quality_file, tmp_path, capsys
):
    code = main(_cli(measured_store, quality_file, tmp_path / "rep", "--region", "FRA"))
    out = capsys.readouterr().out
    assert code == 0
    assert "Headline:" in out and "gCO2e/correct (FRA 2023)" in out
    assert "(FRA, 2023; CodeCarbon" in out  # the intensity's source and year
    assert "cost/" not in out  # no price given, no cost column
    csv = pd.read_csv(tmp_path / "rep" / "summary.csv")
    assert "carbon_g_per_response" in csv and "cost_per_response" not in csv
    assert (csv["carbon_intensity_region"] == "FRA").all()
    first = csv.iloc[0]
    expected = first["energy_per_response_j"] * first["carbon_intensity_g_per_kwh"] / 3.6e6
    assert math.isclose(first["carbon_g_per_response"], expected, rel_tol=1e-9)


def test_without_the_options_nothing_changes(measured_store, quality_file, tmp_path, capsys):
    assert main(_cli(measured_store, quality_file, tmp_path / "rep")) == 0
    out = capsys.readouterr().out
    assert "Headline:" not in out and "gCO2e" not in out
    assert list(pd.read_csv(tmp_path / "rep" / "summary.csv").columns) == list(SUMMARY_COLUMNS)
    assert "gCO2e" not in (tmp_path / "rep" / "index.html").read_text()


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--region", "Atlantis"], "no grid carbon intensity for region"),
        (["--pue", "1.2"], "--pue applies to carbon or cost"),
        (["--carbon-intensity", "100", "--region", "FRA"], "both give the grid intensity"),
    ],
)
def test_bad_footprint_options_are_one_line(
    measured_store, quality_file, tmp_path, capsys, extra, needle
):
    code = main(_cli(measured_store, quality_file, tmp_path / "rep", *extra))
    err = capsys.readouterr().err
    assert code == 2 and needle in err
    assert not (tmp_path / "rep").exists()


def test_footprint_options_need_measured(tmp_path, capsys):
    code = main(["study", "dense-vs-moe", "--data-dir", str(tmp_path / "d"), "--region", "FRA"])
    assert code == 2 and "--region does not apply without --measured" in capsys.readouterr().err
