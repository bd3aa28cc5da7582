"""The estimator's pipeline profile: splitting, fit of a 175B model, U shape against A40 data."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from optimize_cases import run_cli

from mlenergy.errors import UserError
from mlenergy.estimate.training import estimate_pipeline_stages, split_layers
from mlenergy.optimize.estimated_profile import clock_shape_agreement, estimated_pipeline_profile
from mlenergy.optimize.profile import read_profile_csv
from mlenergy.reference import reference_dir

GPT3 = {
    "model_type": "gpt2",
    "hidden_size": 12288,
    "num_hidden_layers": 96,
    "num_attention_heads": 96,
    "intermediate_size": 49152,
    "vocab_size": 50257,
    "tie_word_embeddings": True,
}


@pytest.fixture
def gpt3(tmp_path):
    p = tmp_path / "gpt3.json"
    p.write_text(json.dumps(GPT3))
    return str(p)


def test_split_layers_even_or_as_told():
    assert split_layers(96, 8, None) == [12] * 8
    assert split_layers(10, 4, None) == [3, 3, 2, 2]
    assert split_layers(10, 2, [4, 6]) == [4, 6]
    with pytest.raises(UserError, match="does not split"):
        split_layers(10, 2, [4, 5])


def test_175b_fits_at_tp8_pp8_and_first_last_stages_differ(gpt3):
    rows = pd.DataFrame(
        [r.__dict__ for r in estimate_pipeline_stages(gpt3, "A100-SXM4-80GB", 8, 8)]
    )
    assert set(rows["stage"]) == set(range(8))
    top = rows[rows["frequency_mhz"] == rows["frequency_mhz"].max()]
    fwd = top[top["instruction"] == "forward"].set_index("stage")["time_s"]
    assert fwd[7] > fwd[3]  # the last stage carries the LM head
    assert (rows["energy_source"].str.startswith("estimated:")).all()
    with pytest.raises(UserError, match="does not fit"):
        estimate_pipeline_stages(gpt3, "A100-SXM4-80GB", 2, 1)


def _shape(time_s: np.ndarray, energy_j: np.ndarray) -> dict[str, float]:
    """Clocks descending: time ratio lowest/highest, least-energy index, dip and rise."""
    i = int(np.argmin(energy_j))
    return {
        "time_ratio": time_s[-1] / time_s[0],
        "argmin": i,
        "dip": energy_j[i] / energy_j[0],
        "rise": energy_j[-1] / energy_j[i],
    }


def test_energy_versus_clock_has_the_measured_u_shape(gpt3):
    measured = pd.read_csv(reference_dir() / "perseus-profiles" / "gpt3-175b_a40.csv")
    prof = estimated_pipeline_profile(gpt3, "A40", 8, 8, data_parallel=8)
    for inst in ("forward", "backward"):
        m = measured[(measured["stage"] == 3) & (measured["instruction"] == inst)]
        m = m.sort_values("frequency", ascending=False)
        e = sorted(prof.options[(3, inst)], key=lambda o: -o.frequency_mhz)
        got = _shape(np.array([o.time_s for o in e]), np.array([o.energy_j for o in e]))
        want = _shape(m["time"].to_numpy(), m["energy"].to_numpy())
        freqs = [o.frequency_mhz for o in e]
        # Energy falls as the clock drops, bottoms out strictly inside the range, rises again.
        assert 0 < got["argmin"] < len(e) - 1
        assert got["dip"] < 0.9 and want["dip"] < 0.9
        assert got["rise"] > 1.01 and want["rise"] > 1.01
        # Least-energy clock within 200 MHz of the measured one; time grows alike.
        assert abs(freqs[got["argmin"]] - m["frequency"].iloc[want["argmin"]]) <= 200
        assert 1.2 < got["time_ratio"] < 2.0 and 1.2 < want["time_ratio"] < 2.0


def test_cli_from_estimate_writes_profile_and_plan(tmp_path):
    cfg = tmp_path / "small.json"
    cfg.write_text(
        json.dumps(
            {
                **GPT3,
                "hidden_size": 2048,
                "num_hidden_layers": 8,
                "num_attention_heads": 16,
                "intermediate_size": 8192,
            }
        )
    )
    argv = [
        "optimize",
        "pipeline",
        "--from-estimate",
        "--model",
        str(cfg),
        "--gpu",
        "A100-SXM4-80GB",
        "--stages",
        "2",
        "--tensor-parallel",
        "2",
        "--microbatches",
        "3",
        "--microbatch-size",
        "1",
        "--seq-len",
        "1024",
        "--time-unit",
        "0.0005",
        "--profile-out",
        str(tmp_path / "p.csv"),
        "--frontier-out",
        str(tmp_path / "f.csv"),
        "--out",
        str(tmp_path / "plan.json"),
    ]
    res = run_cli(argv)
    assert res.exit_code == 0, res.output
    prof = read_profile_csv(tmp_path / "p.csv")
    assert prof.num_stages == 2
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["energy_source"].startswith("estimated:")
    assert plan["plan_makespan_s"] <= plan["iteration_time_s"] + 1e-12


@pytest.mark.parametrize("name", ["gpt3-175b-a40", "bloom-176b-a40"])
def test_clock_shape_against_the_shipped_perseus_profiles(name):
    """The figures ``benchmarks/training_clock_shape.py`` prints, held at their present level.

    The goals are 5% on the energy ratio at every clock and 90 MHz on the least-energy clock;
    the estimate reaches 10-14% and 15-105 MHz (see docs/estimate.md, "One power model"):
    these bounds catch a step back, not the goal.
    """
    shapes = clock_shape_agreement(name)
    assert {(s.stage, s.instruction) for s in shapes} == {
        (st, inst) for st in range(8) for inst in ("forward", "backward")
    }
    for s in shapes:
        assert len(s.clocks_mhz) >= 55 and s.clocks_mhz[0] == 1740
        assert s.measured_ratio[0] == s.estimated_ratio[0] == 1.0
        assert s.worst_ratio_error <= 0.15
        assert s.best_clock_error_mhz <= 105
    # GPT-3's forward and backward meet the 90 MHz goal.
    if name == "gpt3-175b-a40":
        assert max(s.best_clock_error_mhz for s in shapes) <= 90
