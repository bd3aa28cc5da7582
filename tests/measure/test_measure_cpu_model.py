"""The CPU power model used when Zeus finds no counter: modelled, labelled, never 0 J."""

import pytest

from mlenergy.errors import UserError
from mlenergy.measure import EnergyMeter, resolve_cpu_power_model
from mlenergy.measure import cpu_model as cm


def test_table_matches_families_and_falls_back():
    assert cm.per_cpu_watts("AMD EPYC 7763 64-Core Processor")[0] == pytest.approx(280 / 128)
    assert cm.per_cpu_watts("Intel(R) Xeon(R) Platinum 8380 CPU")[0] == pytest.approx(270 / 80)
    assert cm.per_cpu_watts("Mystery CPU 9000")[0] == cm.DEFAULT_PER_CPU_W
    assert cm.per_cpu_watts(None)[0] == cm.DEFAULT_PER_CPU_W


def test_tdp_scales_with_affinity(monkeypatch):
    monkeypatch.setattr(cm.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(cm, "cpu_model_name", lambda: "AMD EPYC 9654")
    model = resolve_cpu_power_model()
    assert model.num_cpus == 4
    assert model.tdp_w == pytest.approx(4 * 280 / 128)


def test_model_formula():
    m = cm.CpuPowerModel(tdp_w=100.0, idle_fraction=0.3, num_cpus=2, tdp_source="t")
    assert m.idle_w == 30.0
    assert m.power_w(0.5) == pytest.approx(65.0)
    assert m.power_w(7.0) == 100.0  # clipped
    # 2 s wall, 2 CPU-seconds on 2 CPUs: utilisation 0.5
    assert m.energy_j(2.0, 2.0) == pytest.approx(130.0)
    assert m.energy_j(0.0, 1.0) == 0.0


def test_override_by_argument_and_env(monkeypatch):
    assert resolve_cpu_power_model(cpu_tdp_w=123.0).tdp_w == 123.0
    monkeypatch.setenv("MLENERGY_CPU_TDP_W", "55")
    model = resolve_cpu_power_model()
    assert model.tdp_w == 55.0 and "MLENERGY_CPU_TDP_W" in model.tdp_source
    assert resolve_cpu_power_model(cpu_tdp_w=10.0).tdp_w == 10.0  # argument wins
    monkeypatch.setenv("MLENERGY_CPU_IDLE_FRACTION", "0.5")
    assert resolve_cpu_power_model().idle_fraction == 0.5


@pytest.mark.parametrize("bad", ["abc", "-3", "0", "nan", "inf"])
def test_bad_env_tdp_is_user_error(monkeypatch, bad):
    monkeypatch.setenv("MLENERGY_CPU_TDP_W", bad)
    with pytest.raises(UserError, match="MLENERGY_CPU_TDP_W"):
        resolve_cpu_power_model()


@pytest.mark.parametrize("bad", [0, -5.0, float("nan"), "65"])
def test_bad_argument_tdp_is_user_error(bad):
    with pytest.raises(UserError, match="cpu_tdp_w"):
        resolve_cpu_power_model(cpu_tdp_w=bad)


def test_bad_idle_fraction_is_user_error():
    with pytest.raises(UserError, match="idle_fraction"):
        resolve_cpu_power_model(idle_fraction=1.5)


def test_busy_window_is_modelled_and_positive(no_devices, busy):
    meter = EnergyMeter(cpu_tdp_w=20.0, cpu_idle_fraction=0.25)
    assert meter.energy_source == "modelled:cpu-tdp"
    assert "modelled" in meter.scope.description
    cpu0 = cm.process_cpu_seconds()
    with meter.window("busy") as w:
        busy(0.3)
    cpu_s = cm.process_cpu_seconds() - cpu0
    res = w.result
    assert res.energy_source == "modelled:cpu-tdp"
    assert res.energy_j is not None and res.energy_j > 0
    assert set(res.energy_by_device_j) == {"cpu:modelled"}
    idle_j = 5.0 * res.duration_s
    full_j = 20.0 * res.duration_s
    # one busy thread out of num_cpus: well above idle, at most full load
    assert idle_j < res.energy_j <= full_j * 1.001
    # the figure is the documented model applied to this process's CPU time
    expected = meter.cpu_power_model.energy_j(res.duration_s, cpu_s)
    assert res.energy_j == pytest.approx(expected, rel=0.05)
    assert res.energy_j <= expected * 1.0001


def test_tdp_override_changes_energy(no_devices, monkeypatch, busy):
    monkeypatch.setenv("MLENERGY_CPU_TDP_W", "40")
    meter = EnergyMeter()
    assert meter.cpu_power_model.tdp_w == 40.0
    meter2 = EnergyMeter(cpu_tdp_w=400.0)
    assert meter2.cpu_power_model.tdp_w == 400.0
    with meter.window("a") as a, meter2.window("b") as b:
        busy(0.1)
    assert b.result.energy_j > 5 * a.result.energy_j


def test_empty_window_is_not_zero(no_devices):
    meter = EnergyMeter(cpu_tdp_w=10.0)
    meter.begin("nothing")
    res = meter.end("nothing")
    assert res.energy_j is not None and res.energy_j > 0


def test_idle_baseline_modelled(no_devices):
    meter = EnergyMeter(cpu_tdp_w=20.0, cpu_idle_fraction=0.3)
    idle = meter.measure_idle(0.2)
    assert idle.energy_source == "modelled:cpu-tdp"
    assert idle.duration_s == pytest.approx(0.2, abs=0.05)
    assert idle.avg_power_w == pytest.approx(6.0, rel=0.1)
    with pytest.raises(UserError, match="duration_s"):
        meter.measure_idle(0)


def test_unreadable_rapl_falls_back_to_model(monkeypatch):
    import zeus.device
    import zeus.monitor.energy
    from zeus.device.cpu.common import ZeusCPUNoPermissionError
    from zeus.device.gpu.common import ZeusGPUInitError

    def no_gpus(*args, **kwargs):
        raise ZeusGPUInitError("no NVML")

    def rapl_root_only():
        raise ZeusCPUNoPermissionError("RAPL needs root")

    for mod in (zeus.device, zeus.monitor.energy):
        monkeypatch.setattr(mod, "get_gpus", no_gpus)
        monkeypatch.setattr(mod, "get_cpus", rapl_root_only)
    meter = EnergyMeter(cpu_tdp_w=10.0)
    assert meter.energy_source == "modelled:cpu-tdp"
    assert meter.cpu_indices == []
    with pytest.raises(UserError, match="cpu_indices"):
        EnergyMeter(cpu_indices=[0])
