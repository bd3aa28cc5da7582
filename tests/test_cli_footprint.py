"""Carbon and cost options on ``estimate``, ``bench`` and ``optimize power-cap``."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from mlenergy.cli import main
from mlenergy.footprint import intensity_for
from mlenergy.records import RunRecord

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
ESTIMATE = ["estimate", "--model", MODEL, "--gpu", "H100", "--batch-size", "64"]
ESTIMATE += ["--output-tokens", "500"]


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_estimate_json_adds_carbon_and_cost_per_tokens():
    code, out, _ = _run([*ESTIMATE, "--json"])
    plain = json.loads(out)
    assert "carbon_g_per_1k_tokens" not in plain and "cost_per_m_tokens" not in plain
    argv = [*ESTIMATE, "--json", "--region", "FRA", "--price-kwh", "0.2", "--pue", "1.25"]
    code, out, _ = _run(argv)
    assert code == 0
    got = json.loads(out)
    e = got["energy_per_token_j"]
    assert e == pytest.approx(plain["energy_per_token_j"])
    g = intensity_for("FRA").g_per_kwh
    assert got["carbon_g_per_1k_tokens"] == pytest.approx(e * 1000 * 1.25 * g / 3.6e6)
    assert got["cost_per_m_tokens"] == pytest.approx(e * 1e6 * 1.25 * 0.2 / 3.6e6)
    assert got["footprint"]["carbon_intensity_year"] == 2023
    assert "CodeCarbon" in got["footprint"]["carbon_intensity_source"]


def test_estimate_text_labels_the_intensity_source_and_year():
    code, out, _ = _run([*ESTIMATE, "--carbon-intensity", "400", "--price-kwh", "0.1"])
    assert code == 0
    assert "carbon per 1k output tokens" in out and "400 gCO2e/kWh" in out
    assert "cost per 1M output tokens" in out
    code, out, _ = _run([*ESTIMATE, "--region", "USA-CA"])
    assert "USA-CA, 2023" in out and "eGRID2023" in out


def test_estimate_sweep_gets_the_columns():
    argv = ["estimate", "--model", MODEL, "--gpu", "H100", "--output-tokens", "500"]
    argv += ["--sweep", "batch-size=8,64", "--json", "--carbon-intensity", "300"]
    code, out, err = _run(argv)
    assert code == 0
    rows = json.loads(out)
    assert all(r["carbon_g_per_1k_tokens"] > 0 for r in rows)
    assert "300 gCO2e/kWh" in err


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--region", "Frnace"], "France"),
        (["--region", "FRA", "--carbon-intensity", "100"], "give one of them"),
        (["--price-kwh", "-1"], "--price-kwh"),
        (["--pue", "1.2"], "--pue"),
        (["--region", "FRA", "--pue", "0.5"], "--pue"),
    ],
)
def test_estimate_bad_footprint_options_are_one_line(extra, needle):
    code, out, err = _run([*ESTIMATE, *extra])
    assert code == 2
    assert needle in err and err.startswith("error:") and len(err.strip().splitlines()) == 1
    assert out == ""


def test_estimate_refuses_footprint_where_it_adds_nothing(tmp_path):
    argv = [*ESTIMATE, "--train-seq-len", "512", "--region", "FRA"]
    code, _, err = _run(argv)
    assert code == 2 and "--train-seq-len" in err and len(err.strip().splitlines()) == 1


def test_power_cap_adds_carbon_of_site_energy(tmp_path):
    argv = ["optimize", "power-cap", "--budget-w", "100000"]
    argv += ["--model", "Qwen/Qwen3-30B-A3B-Instruct-2507", "--task", "lm-arena-chat"]
    argv += ["--itl-limit-ms", "50", "--data-dir", str(tmp_path), "--json"]
    code, out, err = _run([*argv, "--region", "DEU"])
    assert code == 0, err
    got = json.loads(out)
    site_j = got["best"]["energy_per_token_j"]  # PUE and host power already inside
    g = intensity_for("DEU").g_per_kwh
    assert got["carbon_g_per_1k_tokens"] == pytest.approx(site_j * 1000 * g / 3.6e6)
    assert got["cost_per_m_tokens"] == pytest.approx(got["energy_cost_per_million_tokens"])
    code, out, _ = _run([a for a in argv if a != "--json"] + ["--carbon-intensity", "250"])
    assert code == 0 and "gCO2e per 1k tokens (site energy" in out and "250 gCO2e/kWh" in out


@pytest.mark.slow
def test_bench_prints_derived_figures_and_stores_energy_only(tmp_path):
    data = tmp_path / "data"
    argv = ["bench", "-m", "preset:tiny-dense", "-b", "1", "--input-tokens", "8"]
    argv += ["--output-tokens", "4", "--repeats", "1", "--warmup", "0", "--idle-s", "0"]
    argv += ["--threads", "1", "--data-dir", str(data), "--region", "FRA", "--price-kwh", "0.2"]
    code, out, err = _run(argv)
    assert code == 0, err
    assert "carbon_g_per_1k_tokens" in out and "cost_per_m_tokens" in out
    assert "FRA, 2023" in out and "records keep energy only" in out
    stored = [p for p in data.rglob("*") if p.is_file()]
    assert stored
    text = b"".join(p.read_bytes() for p in stored)
    assert b"carbon" not in text and b"cost_per_m" not in text
    assert "carbon_g_per_1k_tokens" not in RunRecord.model_fields


def test_reference_regions_lists_the_table_with_sources():
    code, out, _ = _run(["reference", "--regions"])
    assert code == 0
    line = next(row for row in out.splitlines() if row.startswith("FRA "))
    assert "56.0 gCO2e/kWh" in line and "2023" in line and "CodeCarbon" in line
    code, out, _ = _run(["reference", "--regions", "--json"])
    rows = json.loads(out)
    assert len(rows) == len({r["region"] for r in rows}) > 200


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--carbon-intensity", "1e308", "--pue", "100"], "--pue is 100, outside"),
        (["--carbon-intensity", "1e308"], "--carbon-intensity is 1e+308, outside"),
        (["--carbon-intensity", "inf"], "--carbon-intensity is inf"),
        (["--carbon-intensity", "400", "--pue", "5.5"], "at most 5"),
        (["--price-kwh", "1e300"], "--price-kwh is 1e+300, outside"),
    ],
)
def test_footprint_inputs_beyond_physics_are_refused_with_the_bound(extra, needle):
    for argv in ([*ESTIMATE, *extra], [*ESTIMATE, *extra, "--json"]):
        code, out, err = _run(argv)
        assert code == 2 and out == "", (out, err)
        assert needle in err and "physical range" in err and "(" in err
        assert len(err.strip().splitlines()) == 1


def test_estimate_json_is_strict_at_the_largest_bounds():
    argv = [*ESTIMATE, "--json", "--carbon-intensity", "2000", "--pue", "5", "--price-kwh", "1e6"]
    code, out, _ = _run(argv)
    assert code == 0
    got = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in --json output"))
    assert got["carbon_g_per_1k_tokens"] > 0 and got["cost_per_m_tokens"] > 0
