"""The static bench marks host-bound runs on emulated GPUs, and says so in its table."""

from __future__ import annotations

import io
import time

import pytest
import torch
from rich.console import Console

from mlenergy.measure import EnergyMeter
from mlenergy.measure.emulated import PowerProfile, install_emulated_gpus
from mlenergy.models import load_model
from mlenergy.workloads.bench import BenchOptions, run_bench
from mlenergy.workloads.inference import InferenceSpec, run_inference_sweep

torch.set_num_threads(1)

SPEC = InferenceSpec(batch_sizes=(1,), input_tokens=4, output_tokens=3, repeats=2, idle_s=0.2)


def _table(records) -> str:
    from mlenergy.commands.bench import summary_table

    out = io.StringIO()
    Console(file=out, width=400, color_system=None).print(summary_table(records))
    return out.getvalue()


def test_a_gpu_at_its_idle_power_through_the_work_is_marked():
    # the model runs on the CPU: the emulated GPU draws what it drew at rest throughout
    with install_emulated_gpus(power_w=90.0, count=1):
        (record,) = run_bench(
            ["preset:tiny-dense"], SPEC, BenchOptions(gpu_indices=[0], progress=False)
        )
    verdict = record.host_bound
    assert record.energy_source == "emulated:zeus-gpu"
    assert verdict.marked and verdict.near_idle_share == pytest.approx(1.0)
    assert set(verdict.near_idle) == {"prefill", "decode"}
    assert verdict.idle_power_w == pytest.approx(90.0, rel=0.02)
    assert verdict.power_limit_w == 700.0  # the emulated GPU's limit
    assert record.interval.kind == "within-run" and record.interval.n == 2
    row = next(line for line in _table([record]).splitlines() if "preset:tiny-dense" in line)
    assert "ok, host-bound" in row and "within-run, 2 repeats" in row


def test_a_gpu_well_above_its_idle_power_is_not_marked():
    """Idle is measured at 90 W; from then on the GPU draws 500 W (of a 700 W limit)."""
    with install_emulated_gpus(power_w=90.0, count=1) as gpus:
        gpu = gpus.gpus[0]
        meter = EnergyMeter(gpu_indices=[0])
        try:
            meter.measure_idle(0.2)
            # the new profile agrees with the old one on the past, so the counter stays whole
            busy = PowerProfile.piecewise(
                [(0.0, 90.0), (time.time() - gpu.profile.t0, 500.0)], t0=gpu.profile.t0
            )
            gpu.profile = gpu._counter.profile = busy
            loaded = load_model("preset:tiny-dense", "float32", "cpu", 0)
            (record,) = run_inference_sweep(loaded, SPEC, meter, progress=False, reuse_idle=True)
        finally:
            meter.close()
    verdict = record.host_bound
    assert verdict is not None and not verdict.marked and verdict.near_idle == ()
    assert verdict.window_power_w["decode"] == pytest.approx(500.0, rel=0.05)
    row = next(line for line in _table([record]).splitlines() if "preset:tiny-dense" in line)
    assert "host-bound" not in row


def test_a_cpu_modelled_run_is_not_judged():
    spec = InferenceSpec(batch_sizes=(1,), input_tokens=4, output_tokens=3, repeats=1, idle_s=0.1)
    (record,) = run_bench(["preset:tiny-dense"], spec, BenchOptions(progress=False))
    assert record.energy_source == "modelled:cpu-tdp"
    assert record.host_bound is None
    assert record.interval is None  # one repeat: no interval
