"""The GPU check's non-GPU parts, on emulated GPUs: counter period, power integral, agreement."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlenergy.measure import EnergyMeter
from mlenergy.measure.counter_check import PowerSampler, agreement, integrate_power
from mlenergy.measure.counter_period import estimate_update_period, gpu_counter_periods
from mlenergy.measure.emulated import EmulatedGPU, PowerProfile, install_emulated_gpus

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("period_s", [0.02, 0.1])
def test_counter_period_is_measured_by_polling(period_s):
    gpu = EmulatedGPU(0, power=300.0, counter_period_s=period_s)
    found = estimate_update_period(lambda: float(gpu.get_total_energy_consumption()), 0.8)
    assert found == pytest.approx(period_s, rel=0.15)


def test_a_counter_that_never_moves_has_no_period():
    assert estimate_update_period(lambda: 5.0, budget_s=0.05) is None


def test_real_gpus_are_polled_and_emulated_ones_state_their_period():
    class Polled:  # a GPU collection without a stated period: polled through Zeus's API
        def __init__(self):
            self.gpu = EmulatedGPU(0, power=100.0, counter_period_s=0.03)

        def get_total_energy_consumption(self, index):
            return self.gpu.get_total_energy_consumption()

    assert gpu_counter_periods(Polled(), [0], 0.5)[0] == pytest.approx(0.03, rel=0.2)
    with install_emulated_gpus(counter_period_s=0.07, count=2) as gpus:
        assert gpu_counter_periods(gpus, [1], 0.5) == [0.07]


def test_integral_of_samples_clips_to_the_window():
    samples = [(0.0, 100.0), (1.0, 100.0), (2.0, 300.0), (3.0, 300.0)]
    assert integrate_power(samples, 0.0, 1.0) == pytest.approx(100.0)
    assert integrate_power(samples, 0.5, 2.5) == pytest.approx(50 + 200 + 150)
    assert integrate_power(samples, 10.0, 11.0) is None  # no sample near the window
    assert integrate_power([], 0.0, 1.0) is None


@pytest.mark.slow
def test_counter_window_agrees_with_sampled_power_on_an_emulated_gpu():
    t0 = time.time()
    profile = PowerProfile.piecewise([(0.0, 150.0), (0.4, 450.0), (0.8, 250.0)], t0=t0)
    with install_emulated_gpus(power_w=profile, counter_period_s=0.02) as gpus:
        meter = EnergyMeter()
        with PowerSampler(gpus, 0, period_s=0.002) as sampler, meter.window("w") as w:
            time.sleep(1.2)
        meter.close()
    r = w.result
    check = agreement(
        "w", r.start_time_s, r.duration_s, r.energy_by_device_j["gpu:0"], sampler.samples
    )
    truth = profile.energy_j(r.start_time_s, r.start_time_s + r.duration_s)
    assert check.integral_j == pytest.approx(truth, rel=0.05)
    assert check.agrees, check


def test_disagreement_beyond_five_percent_is_reported():
    samples = [(0.0, 100.0), (2.0, 100.0)]
    assert not agreement("w", 0.0, 1.0, 110.0, samples).agrees
    assert agreement("w", 0.0, 1.0, 104.0, samples).agrees


@pytest.mark.slow
def test_gpu_check_without_a_gpu_exits_2_with_one_line():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env={"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: gpu_check needs an NVIDIA GPU")
    assert proc.stdout == ""
