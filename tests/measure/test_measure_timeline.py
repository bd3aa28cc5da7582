"""Power timelines: downsampling and the in-process sampler."""

import time

import pytest

from mlenergy.measure import EnergyMeter
from mlenergy.measure.emulated import PowerProfile, install_emulated_gpus
from mlenergy.measure.timeline import MAX_TIMELINE_POINTS, downsample, to_power_timeline


def test_downsample_keeps_mean_and_bounds():
    n = 10_007
    t = [i * 0.01 for i in range(n)]
    p = [100.0 + (i % 7) for i in range(n)]
    t2, p2 = downsample(t, p)
    assert len(t2) == len(p2) == MAX_TIMELINE_POINTS
    assert t2 == sorted(t2) and t[0] <= t2[0] and t2[-1] <= t[-1]
    assert sum(p2) / len(p2) == pytest.approx(sum(p) / n, rel=1e-3)
    assert downsample([0.0, 1.0], [5.0, 6.0]) == ([0.0, 1.0], [5.0, 6.0])
    with pytest.raises(ValueError):
        downsample([0.0], [1.0, 2.0])


def test_to_power_timeline_offsets_and_filters():
    samples = [(100.0 + i, float(i)) for i in range(1000)]
    tl = to_power_timeline(samples, "emulated:test", start_time_s=500.0, max_points=100)
    assert len(tl.t_s) == 100 and tl.t_s[0] >= 0
    assert tl.energy_source == "emulated:test"
    assert to_power_timeline([], "emulated:test") is None


@pytest.mark.slow
def test_meter_timeline_emulated_piecewise():
    # The switch at 1.5 s leaves room for a slow meter start on a busy machine.
    profile = PowerProfile.piecewise([(0.0, 100.0), (1.5, 400.0)])
    with (
        install_emulated_gpus(power_w=profile),
        EnergyMeter(power_timeline=True, timeline_period_s=0.02) as meter,
    ):
        with meter.window("run"):
            time.sleep(2.0)
        tl = meter.timeline(start_time_s=profile.t0)
    assert tl is not None and tl.energy_source == "emulated:zeus-gpu"
    assert 10 <= len(tl.t_s) <= MAX_TIMELINE_POINTS
    early = [w for t, w in zip(tl.t_s, tl.power_w, strict=True) if t < 1.4]
    late = [w for t, w in zip(tl.t_s, tl.power_w, strict=True) if t > 1.65]
    assert early and late
    assert sum(early) / len(early) == pytest.approx(100.0, rel=0.05)
    assert sum(late) / len(late) == pytest.approx(400.0, rel=0.05)


def test_meter_timeline_modelled(no_devices, busy):
    with EnergyMeter(cpu_tdp_w=10.0, power_timeline=True, timeline_period_s=0.02) as meter:
        with meter.window("busy"):
            busy(0.3)
        tl = meter.timeline()
    assert tl is not None and tl.energy_source == "modelled:cpu-tdp"
    # the power charged to the work: CPU time at 10 W / CPUs, never above full load
    assert all(0.0 <= w <= 10.0 + 1e-9 for w in tl.power_w)
    assert max(tl.power_w) > 0.0


def test_no_timeline_unless_asked(no_devices):
    assert EnergyMeter().timeline() is None


def test_gpu_power_monitor_samples_are_summed(no_devices):
    class FakePowerMonitor:
        def get_power_timeline(self, domain):
            assert domain == "device_instant"
            return {0: [(1.0, 100.0), (3.0, 150.0)], 1: [(2.0, 50.0)]}

    meter = EnergyMeter()
    meter.gpu_indices = [0, 1]  # pretend two real GPUs were found
    meter._power_monitor = FakePowerMonitor()
    tl = meter.timeline(start_time_s=0.0)
    assert tl.t_s[:2] == (2.0, 3.0) and tl.power_w[:2] == (150.0, 200.0)


def test_real_gpu_path_labels_and_uses_zeus_power_monitor(monkeypatch):
    """Devices that are not marked emulated take the measured path and Zeus's PowerMonitor."""
    import zeus.monitor

    import mlenergy.measure.emulated as em

    created = {}

    class FakePowerMonitor:
        def __init__(self, gpu_indices, update_period, power_domains):
            created.update(gpu_indices=gpu_indices, domains=power_domains)

        def get_power_timeline(self, domain):
            return {0: [(time.time() - 0.1, 300.0)]}

        def stop(self):
            created["stopped"] = True

    monkeypatch.setattr(zeus.monitor, "PowerMonitor", FakePowerMonitor)
    with install_emulated_gpus(power_w=300.0) as gpus:
        monkeypatch.setattr(type(gpus), "emulated", False)  # pose as real NVIDIA GPUs
        monkeypatch.setattr(em.EmulatedGPU, "emulated", False)
        with EnergyMeter(power_timeline=True) as meter:
            assert meter.energy_source == "measured:zeus-nvml"
            assert meter.sync_execution is False  # CPU-only torch: nothing to synchronise
            with meter.window("x") as w:
                time.sleep(0.05)
            tl = meter.timeline(start_time_s=time.time() - 1.0)
    assert created["gpu_indices"] == [0] and created["domains"] == ["device_instant"]
    assert created["stopped"]
    assert w.result.energy_source == "measured:zeus-nvml"
    assert tl.energy_source == "measured:zeus-nvml" and tl.power_w[0] == 300.0
