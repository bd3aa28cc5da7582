"""The shipped example power-limit profile: labelled as an estimate, usable as shipped."""

from __future__ import annotations

import json
from pathlib import Path

from optimize_cases import run_cli

from mlenergy.optimize.power_limit import profile_source, read_power_limit_profile

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "power-limit-profile.estimated.csv"


def test_example_profile_reads_and_declares_its_source():
    rows = read_power_limit_profile(EXAMPLE)
    assert len(rows) >= 5
    assert profile_source(EXAMPLE).startswith("estimated:mlenergy-")
    # Energy never rises as the limit rises above the estimator's knee (a sanity check of
    # the shipped figures, which the estimator wrote).
    by_limit = sorted(rows, key=lambda m: m.power_limit)
    assert by_limit[0].time >= by_limit[-1].time


def test_choice_on_the_example_is_labelled_an_estimate():
    res = run_cli(["optimize", "power-limit", "--profile", str(EXAMPLE), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["energy_source"].startswith("estimated:")
    assert out["power_limit_w"] in {m.power_limit for m in read_power_limit_profile(EXAMPLE)}


def test_comment_lines_keep_row_numbers_in_errors(tmp_path):
    bad = tmp_path / "p.csv"
    bad.write_text("# energy_source: example\npower_limit_w,time_s,energy_j\n300,1,x\n")
    res = run_cli(["optimize", "power-limit", "--profile", str(bad)])
    assert res.exit_code == 2 and "row 3" in res.output, res.output


def test_without_a_source_comment_the_file_name_labels_the_figures(tmp_path):
    plain = tmp_path / "mine.csv"
    plain.write_text("power_limit_w,time_s,energy_j\n300,10,3000\n250,11,2800\n")
    res = run_cli(["optimize", "power-limit", "--profile", str(plain), "--json"])
    assert json.loads(res.stdout)["energy_source"] == "profile:mine.csv"
