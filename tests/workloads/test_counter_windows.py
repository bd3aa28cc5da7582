"""Bench figures on stepwise counters: every phase within 5% of the emulated truth."""

from __future__ import annotations

import time

import pytest
import torch

from mlenergy.measure import EnergyMeter
from mlenergy.measure.emulated import install_emulated_gpus
from mlenergy.measure.resolve import measure_resolved
from mlenergy.workloads.bench import BenchOptions, run_bench
from mlenergy.workloads.inference import InferenceSpec

torch.set_num_threads(1)

WATTS = 300.0


@pytest.mark.slow
@pytest.mark.parametrize("period_s", [0.02, 0.1])
def test_every_phase_of_a_bench_record_matches_the_emulated_truth(period_s):
    spec = InferenceSpec(
        batch_sizes=(1,), input_tokens=8, output_tokens=4, repeats=2, warmup=1, idle_s=0.1
    )
    with install_emulated_gpus(power_w=WATTS, count=2, counter_period_s=period_s):
        (record,) = run_bench(
            ["preset:tiny-dense"], spec, BenchOptions(gpu_indices=[1], progress=False)
        )
    assert record.scope.counter_period_s == pytest.approx(period_s)
    assert record.idle is not None and record.idle.avg_power_w == pytest.approx(WATTS, rel=0.05)
    for phase in record.phases:
        # the truth: a constant 300 W over the phase's time
        assert phase.energy_j == pytest.approx(WATTS * phase.duration_s, rel=0.05), phase.phase
        for value in phase.energy_j_repeats.values:
            assert value > 0
    prefill, decode = record.phase("prefill"), record.phase("decode")
    assert prefill.passes_per_window > 1 and decode.passes_per_window > 1


def test_a_window_under_ten_counter_periods_is_flagged():
    with install_emulated_gpus(power_w=WATTS, counter_period_s=0.05):
        meter = EnergyMeter()
        assert meter.counter_period_s == pytest.approx(0.05)
        assert meter.min_window_s == pytest.approx(0.5)
        with meter.window("short") as short:
            time.sleep(0.05)
        with meter.window("long") as long:
            time.sleep(0.55)
        meter.close()
    assert not short.result.resolvable
    assert long.result.resolvable


def test_measure_resolved_repeats_short_work_and_divides():
    calls = []

    def work(passes: int) -> int:
        calls.append(passes)
        time.sleep(0.004 * passes)
        return passes

    with install_emulated_gpus(power_w=WATTS, counter_period_s=0.02):
        meter = EnergyMeter()
        result, passes, out = measure_resolved(meter, "w", work, passes=1)
        meter.close()
    assert calls[0] == 1 and passes == out and passes > 1  # the first window was too short
    assert result.resolvable
    assert result.duration_s == pytest.approx(0.004, rel=0.5)
    assert result.energy_j == pytest.approx(WATTS * result.duration_s, rel=0.1)


def test_a_window_that_never_resolves_reports_no_energy():
    with install_emulated_gpus(power_w=WATTS, counter_period_s=0.02):
        meter = EnergyMeter()
        with pytest.warns(RuntimeWarning, match="not reported"):
            result, _, _ = measure_resolved(meter, "w", lambda passes: None, attempts=2)
        meter.close()
    assert result.energy_j is None and result.energy_by_device_j == {}
