"""Power samples in Zeus's convention (each held until the next), and power set live."""

from __future__ import annotations

import time

import pytest

from mlenergy.measure import EnergyMeter
from mlenergy.measure.emulated import LivePower, PowerProfile, install_emulated_gpus
from mlenergy.measure.timeline import ThreadSampler, held_from
from mlenergy.workloads.serving.energy_split import timeline_energy_j


def test_period_means_are_stamped_at_their_periods_start():
    sampler = ThreadSampler(lambda now: 42.0, period_s=60.0)
    try:
        origin = sampler._origin_s
        sampler.sample_now()
        sampler.sample_now()
        (t1, _), (t2, _) = sampler.samples()
        assert sampler.held_samples() == [(origin, 42.0), (t1, 42.0), (t2, 42.0)]
    finally:
        sampler.stop()


def test_a_full_sampler_drops_the_sample_whose_start_it_lost():
    sampler = ThreadSampler(lambda now: 7.0, period_s=60.0, max_samples=2)
    try:
        for _ in range(3):
            sampler.sample_now()
        (t2, _), (t3, _) = sampler.samples()
        assert sampler.held_samples() == [(t2, 7.0), (t3, 7.0)]
    finally:
        sampler.stop()


def test_held_from_restamps_the_sample_in_force():
    pts = [(0.0, 10.0), (1.0, 20.0), (2.0, 30.0)]
    assert held_from(pts, 1.5) == [(1.5, 20.0), (2.0, 30.0)]
    assert held_from(pts, -1.0) == pts
    assert held_from(pts, None) == pts


def test_meter_samples_integrate_to_the_counters_energy():
    profile = PowerProfile.piecewise([(0.0, 100.0), (0.15, 400.0), (0.3, 100.0)])
    with install_emulated_gpus(power_w=profile, count=2):
        meter = EnergyMeter(power_timeline=True, timeline_period_s=0.02)
        try:
            start = time.time()
            meter.begin("w")
            time.sleep(0.45)
            result = meter.end("w")
            samples = meter.power_samples(start)
        finally:
            meter.close()
    assert samples[0][0] == start and samples == sorted(samples)
    a, b = result.start_time_s, result.start_time_s + result.duration_s
    sampled = timeline_energy_j(samples, a, b)
    assert sampled == pytest.approx(result.energy_j, rel=0.02)
    assert result.energy_j == pytest.approx(2 * profile.energy_j(a, b), rel=0.02)


def test_live_power_answers_like_a_profile_as_it_is_set():
    live = LivePower(50.0, t0=100.0)
    live.set(101.0, 300.0)
    live.set(101.5, 50.0)
    live.set(101.5, 80.0)  # a step starting where the last one ended replaces it
    assert live.power_w(100.5) == 50.0 and live.power_w(101.2) == 300.0
    assert live.power_w(102.0) == 80.0
    assert live.energy_j(100.0, 102.0) == pytest.approx(50.0 + 150.0 + 40.0)
    with pytest.raises(ValueError, match="before the last one"):
        live.set(101.0, 10.0)
    reference = PowerProfile.piecewise([(0.0, 50.0), (1.0, 300.0), (1.5, 80.0)], t0=100.0)
    for lo, hi in [(99.0, 100.7), (100.2, 101.7), (101.1, 103.0)]:
        assert live.energy_j(lo, hi) == pytest.approx(reference.energy_j(lo, hi), rel=1e-12)
