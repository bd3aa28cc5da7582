"""Measuring a stage profile with Zeus on emulated GPUs whose power and speed follow the clock."""

from __future__ import annotations

import pytest

from mlenergy.errors import UserError
from mlenergy.measure.emulated_dvfs import DvfsModel, install_clock_responsive_gpus
from mlenergy.optimize.measure_profile import measure_stage_profile, merge_stage_profiles
from mlenergy.optimize.profile import read_profile_csv, write_profile_csv

MODEL = DvfsModel(max_clock_mhz=1800, min_clock_mhz=900, clock_step_mhz=300)


@pytest.mark.slow
def test_profile_follows_the_clock_and_matches_the_emulated_truth(tmp_path):
    with install_clock_responsive_gpus(count=2, model=MODEL) as gpus:
        parts = []
        for stage in (0, 1):
            gpu = gpus.gpus[stage]
            parts.append(
                measure_stage_profile(
                    stage,
                    forward=lambda g=gpu: g.run(0.01),
                    backward=lambda g=gpu: g.run(0.02),
                    gpu_index=stage,
                    warmup=1,
                    repeats=3,
                    sync_execution=False,
                )
            )
        assert gpus.gpus[0].effective_clock_mhz() == 1800  # unlocked afterwards
    profile = merge_stage_profiles(parts, "emulated:test")
    path = write_profile_csv(profile, tmp_path / "p.csv")
    back = read_profile_csv(path)
    assert back.num_stages == 2
    fwd = sorted(back.options[(0, "forward")], key=lambda o: -o.frequency_mhz)
    assert [o.frequency_mhz for o in fwd] == [1800, 1500, 1200, 900]
    times = [o.time_s for o in fwd]
    assert times == sorted(times)  # slower at lower clocks
    for o in fwd:
        want_t = 0.01 * MODEL.time_factor(o.frequency_mhz)
        assert o.time_s == pytest.approx(want_t, rel=0.25)
        assert o.energy_j == pytest.approx(MODEL.busy_power_w(o.frequency_mhz) * o.time_s, rel=0.2)


def test_unsupported_clock_is_a_user_error():
    with (
        install_clock_responsive_gpus(model=MODEL) as gpus,
        pytest.raises(UserError, match="not supported"),
    ):
        g = gpus.gpus[0]
        measure_stage_profile(
            0, lambda: g.run(0.001), lambda: g.run(0.001), clocks_mhz=[1234], sync_execution=False
        )
