"""EnergyMeter windows, repeats, lifecycle and the import rules of the measure package."""

import subprocess
import sys
import time
import types

import pytest

from mlenergy.errors import UserError
from mlenergy.measure import EnergyMeter, WindowResult, summarize_repeats
from mlenergy.measure.emulated import install_emulated_gpus
from mlenergy.measure.provenance import collect_hardware, collect_software


def test_window_result_fields():
    r = WindowResult("x", 2.0, 10.0, {"cpu:modelled": 10.0}, "modelled:cpu-tdp")
    assert r.avg_power_w == 5.0
    assert WindowResult("x", 2.0, None, {}, "modelled:cpu-tdp").avg_power_w is None


def test_begin_end_errors(no_devices):
    meter = EnergyMeter()
    meter.begin("a")
    with pytest.raises(UserError, match="already open"):
        meter.begin("a")
    meter.begin("b")  # nested windows with distinct names are fine
    assert meter.end("b").name == "b"
    assert meter.end("a").duration_s >= 0
    with pytest.raises(UserError, match="not open"):
        meter.end("a")


def test_window_cancelled_on_exception(no_devices):
    meter = EnergyMeter()
    with pytest.raises(RuntimeError), meter.window("boom") as w:
        raise RuntimeError("x")
    assert w.result is None
    with meter.window("boom") as w2:  # the name is free again
        pass
    assert w2.result is not None


def test_repeat_and_summary(no_devices, busy):
    calls = []
    meter = EnergyMeter(cpu_tdp_w=10.0)

    def work():
        calls.append(1)
        busy(0.02)

    results = meter.repeat(work, repeats=3, warmup=2, name="step")
    assert len(calls) == 5 and len(results) == 3
    assert all(r.name == "step" for r in results)
    summary = summarize_repeats(results)
    assert summary.repeats == 3 and summary.energy_j.n == 3
    assert summary.energy_j.ci95 is not None and summary.duration_s.ci95 is not None
    assert summary.avg_power_w > 0
    with pytest.raises(UserError):
        meter.repeat(work, repeats=0)
    with pytest.raises(UserError):
        summarize_repeats([])


def test_summary_with_missing_energy_is_none():
    rs = [WindowResult("x", 1.0, None, {}, "modelled:cpu-tdp")] * 2
    assert summarize_repeats(rs).energy_j is None


def test_closed_meter_refuses_windows(no_devices):
    with EnergyMeter(power_timeline=True) as meter:
        meter.begin("open")
    with pytest.raises(UserError, match="closed"):
        meter.begin("x")


def test_measure_returns_output(no_devices):
    out, res = EnergyMeter().measure(lambda: 42, name="f")
    assert out == 42 and res.name == "f"


def test_provenance_with_emulated_meter():
    with install_emulated_gpus(count=2, name="Emulated H100"):
        hw = collect_hardware(EnergyMeter())
    assert hw.accelerator_model == "Emulated H100" and hw.accelerator_count == 2
    assert hw.accelerator_tdp_w == 700.0 and hw.cpu_tdp_w is None
    assert hw.cpu_cores >= 1


def test_provenance_cpu_only(no_devices):
    hw = collect_hardware(EnergyMeter(cpu_tdp_w=33.0))
    assert hw.accelerator_count == 0 and hw.cpu_tdp_w == 33.0
    assert collect_hardware().cpu_tdp_w is None
    sw = collect_software()
    assert sw.python.count(".") == 2 and sw.mlenergy and sw.zeus
    assert sw.git_commit is None or len(sw.git_commit) == 40


@pytest.mark.slow
def test_measure_does_not_import_transformers_or_torch():
    code = (
        "import sys, time\n"
        "from mlenergy.measure import EnergyMeter\n"
        "from mlenergy.measure.provenance import collect_hardware, collect_software\n"
        "m = EnergyMeter(gpu_indices=[], cpu_indices=[])\n"
        "with m.window('x'): time.sleep(0.01)\n"
        "collect_hardware(m); collect_software()\n"
        "assert 'transformers' not in sys.modules, 'transformers imported'\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        # Zeus's PowerMonitor needs scikit-learn only to integrate: imported on that call
        "assert 'sklearn' not in sys.modules, 'sklearn imported'\n"
        "from zeus.monitor.power import auc\n"
        "from mlenergy.measure.zeus_import import _StandIn\n"
        # what a thread importing it while zeus.monitor was imported got: the real one's names
        "sys.modules['sklearn.metrics'] = _StandIn('sklearn.metrics')\n"
        "from sklearn.metrics import f1_score\n"
        "import sklearn.metrics\n"
        "assert not isinstance(sklearn.metrics, _StandIn) and sklearn.metrics.__file__\n"
        "assert f1_score is sklearn.metrics.f1_score\n"
        "x, y = [0.0, 1.0, 3.0], [2.0, 4.0, 4.0]\n"
        "assert auc(x, y) == sklearn.metrics.auc(x, y) == 11.0\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_zeus_takes_an_already_imported_scikit_learn_as_it_is(monkeypatch):
    import zeus

    from mlenergy.measure.zeus_import import zeus_monitor

    loaded = types.ModuleType("sklearn.metrics")
    loaded.auc = lambda x, y: 0.0
    monkeypatch.setitem(sys.modules, "sklearn.metrics", loaded)
    monkeypatch.setattr(zeus, "monitor", sys.modules.get("zeus.monitor"), raising=False)
    for name in [n for n in sys.modules if n == "zeus.monitor" or n.startswith("zeus.monitor.")]:
        monkeypatch.delitem(sys.modules, name)  # imported afresh, put back after the test
    assert zeus_monitor() is sys.modules["zeus.monitor"]
    assert sys.modules["zeus.monitor.power"].auc is loaded.auc
    assert sys.modules["sklearn.metrics"] is loaded


def test_explicit_empty_indices_use_model():
    with install_emulated_gpus():
        meter = EnergyMeter(gpu_indices=[], cpu_indices=[])
    assert meter.energy_source == "modelled:cpu-tdp"
    with meter.window("x"):
        time.sleep(0.01)
