"""The CPU power model used when Zeus finds no counter: modelled, labelled, never 0 J."""

import pytest

from mlenergy.errors import UserError
from mlenergy.measure import EnergyMeter, resolve_cpu_power_model
from mlenergy.measure import cpu_model as cm


@pytest.fixture(autouse=True)
def _no_other_tests_children(monkeypatch):
    """Charge only this test's work: servers and browsers that other tests of the session keep
    running are children of this process too, and the model would rightly charge their CPU.
    (How children are charged is tested in test_measure_cpu_children.py.)"""
    monkeypatch.setattr(cm, "running_children_cpu_s", lambda: 0.0)


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
    assert m.per_cpu_w == 50.0  # 35 W active + 15 W idle share per CPU-second
    # 2 CPU-seconds are charged 100 J whether they took 2 s or 20 s of wall time
    assert m.energy_j(2.0, 2.0) == pytest.approx(100.0)
    assert m.energy_j(20.0, 2.0) == pytest.approx(100.0)
    assert m.energy_j(1.0, 7.0) == pytest.approx(100.0)  # never above full load
    assert m.power_w(1.0, 2.0) == pytest.approx(25.0)
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
    full_j = 20.0 * res.duration_s
    # one busy thread: about its wall time at one CPU's share, at most full load
    per_cpu_w = 20.0 / meter.cpu_power_model.num_cpus
    assert 0 < res.energy_j <= min(full_j, per_cpu_w * 0.3) * 1.001
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


def test_cpu_clock_resolves_milliseconds(busy):
    """The CPU-time clock must not count in 10 ms ticks (regression: short windows read 0 s)."""
    t0 = cm.process_cpu_seconds()
    busy(0.003)  # 3 ms of wall time: at most ~3 ms of CPU time, more than 0
    used = cm.process_cpu_seconds() - t0
    assert 0.0 < used < 0.009  # a 10 ms tick clock reads exactly 0.0 or 0.01 here


def _spin_cpu(cpu_seconds: float) -> None:
    """Spin this thread until it alone has used ``cpu_seconds`` more CPU time.

    Its own clock, not the process's: with other threads of the process running beside it, the
    process's CPU time can grow ``cpu_seconds`` in less wall time than that, and the window's
    power is capped at the TDP of the (one, here) CPU it may use.
    """
    import time

    end = time.thread_time() + cpu_seconds
    x = 0
    while time.thread_time() < end:
        x += 1


@pytest.mark.parametrize("num_cpus", [1, 2])
def test_short_windows_see_their_computation(no_devices, monkeypatch, num_cpus):
    """A ~5 ms busy window is charged its CPU time; a ~5 ms sleep window almost nothing.

    Regression: with a clock-tick (10 ms) CPU clock, windows under ~15 ms often read 0 CPU
    seconds while the CPU was computing.
    """
    import time

    monkeypatch.setattr(cm.os, "sched_getaffinity", lambda pid: set(range(num_cpus)))
    tdp_w, spin_s = 40.0, 0.005
    meter = EnergyMeter(cpu_tdp_w=tdp_w, cpu_idle_fraction=0.3)
    model = meter.cpu_power_model
    assert model is not None and model.num_cpus == num_cpus
    busy_j = spin_s * model.per_cpu_w  # the spin's CPU time at one CPU's power
    for i in range(3):  # sleeping: no computation, only Zeus's own bookkeeping
        # Threads other tests left running in this process (servers, clients) are charged too,
        # as the process's work: take out what they used, measured beside the window.
        proc0, thread0 = time.process_time(), time.thread_time()
        with meter.window(f"sleep{i}") as w:
            time.sleep(0.005)
        others_s = (time.process_time() - proc0) - (time.thread_time() - thread0)
        own_j = w.result.energy_j - max(others_s, 0.0) * model.per_cpu_w
        assert own_j < 0.3 * busy_j, (i, w.result, others_s)
    for i in range(20):  # every window, not by luck of a clock tick
        with meter.window(f"busy{i}") as w:
            _spin_cpu(spin_s)
        res = w.result
        assert res.avg_power_w <= tdp_w * 1.0001
        # holds however busy the machine: the window holds >= spin_s CPU seconds
        assert res.energy_j >= busy_j * (1 - 1e-9), (i, res)


def test_a_neighbour_stretching_the_window_does_not_change_the_charge(no_devices):
    """The same CPU time is charged the same energy however long the window took."""
    meter = EnergyMeter(cpu_tdp_w=40.0)
    model = meter.cpu_power_model
    assert model.energy_j(0.1, 0.05) == model.energy_j(0.3, 0.05)  # wall time stretched 3x
