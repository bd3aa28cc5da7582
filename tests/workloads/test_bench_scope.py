"""Bench measures the GPUs the model occupies, or those --gpu-indices names, and says which."""

from __future__ import annotations

import pytest
import torch

from mlenergy.errors import UserError
from mlenergy.measure.emulated import install_emulated_gpus
from mlenergy.workloads.bench import BenchOptions, run_bench
from mlenergy.workloads.inference import InferenceSpec

torch.set_num_threads(1)

SPEC = InferenceSpec(batch_sizes=(1,), input_tokens=4, output_tokens=3, repeats=1, idle_s=0)


def test_override_charges_one_gpu_of_an_eight_gpu_node():
    with install_emulated_gpus(power_w=250.0, count=8):
        (record,) = run_bench(
            ["preset:tiny-dense"], SPEC, BenchOptions(gpu_indices=[3], progress=False)
        )
    assert record.scope.gpu_indices == (3,)
    assert record.energy_source == "emulated:zeus-gpu"
    for phase in record.phases:
        assert set(phase.energy_by_device_j) == {"gpu:3"}
        assert phase.avg_power_w == pytest.approx(250.0, rel=0.05)


def test_model_on_cpu_charges_no_gpu_of_the_node():
    with install_emulated_gpus(power_w=250.0, count=8):
        (record,) = run_bench(["preset:tiny-dense"], SPEC, BenchOptions(progress=False))
    assert record.scope.gpu_indices == ()
    assert record.energy_source == "modelled:cpu-tdp"
    assert all(not any(k.startswith("gpu:") for k in p.energy_by_device_j) for p in record.phases)


def test_bad_gpu_indices_are_refused_before_anything_runs():
    with pytest.raises(UserError):
        run_bench(["preset:tiny-dense"], SPEC, BenchOptions(gpu_indices=[0, 0]))
