"""The Perseus profiles ship as published and load by name."""

from __future__ import annotations

import pytest

from mlenergy.cli import main
from mlenergy.errors import UserError
from mlenergy.optimize.profile import read_profile_csv
from mlenergy.optimize.reference_profiles import PERSEUS_PROFILES, load_perseus_profile
from mlenergy.reference import reference_dir


@pytest.mark.parametrize("name", sorted(PERSEUS_PROFILES))
def test_shipped_file_reads_with_its_own_column_names(name):
    path = reference_dir() / "perseus-profiles" / PERSEUS_PROFILES[name]
    assert path.read_text().splitlines()[0] == "stage,instruction,frequency,time,energy"
    profile = read_profile_csv(path)
    assert profile.num_stages == 8
    assert load_perseus_profile(f"perseus:{name}").options == profile.options


def test_a_column_given_under_both_names_is_refused(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("stage,instruction,frequency,frequency_mhz,time,energy\n0,forward,1,1,1,1\n")
    with pytest.raises(UserError, match="frequency_mhz given twice"):
        read_profile_csv(path)


def test_unknown_shipped_name_lists_the_names(capsys):
    assert main(["optimize", "pipeline", "--profile", "perseus:gpt4", "--microbatches", "2"]) == 2
    err = capsys.readouterr().err
    assert "perseus:gpt3-175b-a40" in err and "perseus:bloom-176b-a40" in err


def test_plan_on_a_shipped_profile_uses_the_papers_blocking_power(capsys):
    args = ["optimize", "pipeline", "--profile", "perseus:bloom-176b-a40", "--microbatches", "2"]
    assert main([*args, "--time-unit", "0.01"]) == 0
    assert "measured:perseus-bloom-176b-a40" in capsys.readouterr().out
