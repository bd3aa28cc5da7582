"""One power model for serving, offline jobs, the training step and pipeline instructions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlenergy.estimate import estimate
from mlenergy.estimate.coefficients import Coefficients
from mlenergy.estimate.power_model import (
    VOLTAGE_KNEE_FRACTION,
    gpu_power,
    idle_power_w,
    lowest_clock_mhz,
    relative_voltage,
    settled_clock,
    throttled_clock,
)
from mlenergy.estimate.training import estimate_pipeline_stages, estimate_training
from mlenergy.estimate.training_pipeline import blocking_power_w, memory_busy_power_w
from mlenergy.optimize.estimated_profile import estimated_blocking_power_w
from mlenergy.reference.gpus import resolve_gpu

LOW_CLOCK = 900.0
"""An H100 clock below the voltage knee (0.45 of 1980 MHz)."""


def test_voltage_is_flat_below_the_knee_and_linear_above():
    assert relative_voltage(1.0, 0.65) == pytest.approx(1.0)
    assert relative_voltage(VOLTAGE_KNEE_FRACTION, 0.65) == pytest.approx(0.65)
    assert relative_voltage(0.3, 0.65) == pytest.approx(0.65)
    mid = 0.5 * (1.0 + VOLTAGE_KNEE_FRACTION)
    assert relative_voltage(mid, 0.65) == pytest.approx(0.825)
    got = relative_voltage(np.array([0.3, mid, 1.0]), 0.65)
    assert got == pytest.approx([0.65, 0.825, 1.0])


def test_power_terms_add_up_and_compute_scales_with_clock_and_voltage_squared():
    c = Coefficients()
    p = gpu_power(70.0, 700.0, 0.8, 0.5, 0.25, c, u_quant=0.1)
    span = 630.0
    v = relative_voltage(0.8, c.voltage_floor)
    assert p.compute == pytest.approx(span * c.p_comp * 0.5 * 0.8 * v * v)
    assert p.total == pytest.approx(
        70.0 + span * (c.p_base * 0.8 + c.p_mem * 0.25 + c.p_quant * 0.1) + p.compute
    )


def test_unknown_idle_and_lowest_clock_follow_one_rule():
    c = Coefficients()
    assert idle_power_w(None, 500.0, c) == pytest.approx(c.idle_frac * 500.0)
    assert idle_power_w(np.nan, 500.0, c) == pytest.approx(c.idle_frac * 500.0)
    assert idle_power_w(np.array([np.nan, 60.0]), 500.0, c) == pytest.approx([100.0, 60.0])
    assert lowest_clock_mhz(None, 2000.0) == pytest.approx(600.0)
    assert lowest_clock_mhz(345.0, 1980.0) == 345.0


def test_throttled_clock_keeps_rows_that_fit_and_lowers_the_others():
    def power(clock):
        return 0.5 * clock  # W per MHz

    clock = throttled_clock(
        power, np.array([1000.0, 2000.0, 2000.0]), 300.0, np.array([600.0, 600.0, 100.0])
    )
    assert clock[0] == 1000.0
    assert clock[1] == pytest.approx(1200.0, abs=0.2)
    assert clock[2] == 300.0  # cannot fit even at the lowest clock: stays there


def test_settled_clock_is_the_throttled_clock_of_one_row_to_the_bit():
    def power(clock):
        return 90.0 + 0.31 * clock + 1.7e-4 * clock * clock  # W, rising with the clock (MHz)

    for clock, cap in ((1980.0, 2000.0), (1980.0, 700.0), (1410.0, 333.3), (1980.0, 10.0)):
        vector = throttled_clock(power, np.array([clock]), 210.0, cap)[0]
        assert settled_clock(power, clock, 210.0, cap) == vector, (clock, cap)


def _floor_ratio(energy_floor_a: float, energy_floor_b: float, idle_j: float) -> float:
    return (energy_floor_b - idle_j) / (energy_floor_a - idle_j)


@pytest.fixture
def compute_only() -> dict[str, Coefficients]:
    """Coefficients whose only dynamic power is the compute term, at two voltage floors."""
    base = Coefficients(p_base=0.0, p_mem=0.0, p_quant=0.0)
    return {"a": base.replace(voltage_floor=0.5), "b": base.replace(voltage_floor=0.7)}


def test_serving_uses_the_knee_relation(tiny_config, compute_only):
    """Below the knee the compute power goes as floor^2 (the linear relation would not)."""
    kw = dict(batch_size=64, input_tokens=512, output_tokens=256, sm_clock_mhz=LOW_CLOCK)
    a = estimate(str(tiny_config), "H100", coefficients=compute_only["a"], **kw)
    b = estimate(str(tiny_config), "H100", coefficients=compute_only["b"], **kw)
    ratio = b.breakdown_j_per_token["compute"] / a.breakdown_j_per_token["compute"]
    assert ratio == pytest.approx((0.7 / 0.5) ** 2, rel=1e-9)
    # Above the knee the floor moves the voltage less than in proportion.
    kw["sm_clock_mhz"] = 1800.0
    a = estimate(str(tiny_config), "H100", coefficients=compute_only["a"], **kw)
    b = estimate(str(tiny_config), "H100", coefficients=compute_only["b"], **kw)
    ratio = b.breakdown_j_per_token["compute"] / a.breakdown_j_per_token["compute"]
    v = [relative_voltage(1800.0 / 1980.0, f) for f in (0.5, 0.7)]
    assert ratio == pytest.approx((v[1] / v[0]) ** 2, rel=1e-9)


def test_training_step_uses_the_knee_relation(tiny_config, compute_only):
    kw = dict(batch_size=8, seq_len=1024, sm_clock_mhz=LOW_CLOCK)
    a = estimate_training(str(tiny_config), "H100", coefficients=compute_only["a"], **kw)
    b = estimate_training(str(tiny_config), "H100", coefficients=compute_only["b"], **kw)
    assert a.step_duration_s == b.step_duration_s
    idle_j = resolve_gpu("H100").idle_power_w * a.step_duration_s
    ratio = _floor_ratio(a.energy_per_step_j, b.energy_per_step_j, idle_j)
    assert ratio == pytest.approx((0.7 / 0.5) ** 2, rel=1e-9)


def test_pipeline_instructions_use_the_knee_relation(tiny_config, compute_only):
    rows = {
        k: estimate_pipeline_stages(
            str(tiny_config), "H100", stages=2, clocks_mhz=[int(LOW_CLOCK)], coefficients=c
        )
        for k, c in compute_only.items()
    }
    idle = resolve_gpu("H100").idle_power_w
    for a, b in zip(rows["a"], rows["b"], strict=True):
        assert a.time_s == b.time_s
        ratio = _floor_ratio(a.energy_j, b.energy_j, idle * a.time_s)
        assert ratio == pytest.approx((0.7 / 0.5) ** 2, rel=1e-9)


def test_training_throttles_at_the_tdp_as_serving_does(tiny_config):
    """Over the TDP a step runs at a lower clock (longer), not at full clock with clipped power."""
    cool = Coefficients(p_comp=0.1)
    hot = Coefficients(p_comp=5.0)
    kw = dict(batch_size=8, seq_len=1024)
    a = estimate_training(str(tiny_config), "H100", coefficients=cool, **kw)
    b = estimate_training(str(tiny_config), "H100", coefficients=hot, **kw)
    tdp = resolve_gpu("H100").tdp_w
    assert b.step_duration_s > a.step_duration_s
    assert b.avg_power_w / b.num_gpus == pytest.approx(tdp, rel=1e-3)
    fwd = {
        name: estimate_pipeline_stages(
            str(tiny_config), "H100", stages=2, clocks_mhz=[1980], coefficients=c
        )[0]
        for name, c in (("cool", cool), ("hot", hot))
    }
    assert fwd["hot"].time_s > fwd["cool"].time_s
    assert fwd["hot"].energy_j / fwd["hot"].time_s == pytest.approx(tdp, rel=1e-3)
    serving = {
        name: estimate(
            str(tiny_config),
            "H100",
            batch_size=64,
            input_tokens=512,
            output_tokens=256,
            coefficients=c,
        )
        for name, c in (("cool", cool), ("hot", hot.replace(p_comp=50.0, p_mem=5.0)))
    }
    assert serving["hot"].itl_s > serving["cool"].itl_s
    assert serving["hot"].avg_power_w == pytest.approx(tdp, rel=1e-3)


def test_waiting_and_memory_busy_power_use_the_same_terms(tmp_path):
    c = Coefficients()
    spec = {
        "name": "Nameless",
        "vendor": "NVIDIA",
        "architecture": "unknown",
        "memory_gb": 80,
        "memory_bandwidth_tb_s": 2.0,
        "tdp_w": 500,
        "bf16_tflops": 400,
        "max_sm_clock_mhz": 1800,
    }
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(spec))
    g = resolve_gpu(str(path))
    assert g.idle_power_w is None
    assert blocking_power_w(c, g) == pytest.approx(c.idle_frac * 500.0)
    # The planner's default waiting power is the same idle rule (default coefficients).
    assert estimated_blocking_power_w(str(path)) == pytest.approx(Coefficients().idle_frac * 500.0)
    busy = gpu_power(blocking_power_w(c, g), 500.0, 0.5, 0.0, 1.0, c).total
    assert memory_busy_power_w(c, g, 900.0) == pytest.approx(busy)
