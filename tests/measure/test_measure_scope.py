"""The scope rule: a run measures the GPUs its model occupies, GPU energy is the headline."""

from __future__ import annotations

import time

import pytest
import torch

from mlenergy.errors import UserError
from mlenergy.measure import measured_gpus, meter_for, occupied_gpus
from mlenergy.measure.emulated import install_emulated_cpus, install_emulated_gpus
from mlenergy.measure.scope import parse_gpu_indices


def test_devices_and_device_maps_name_their_gpus():
    assert occupied_gpus("cpu") == []
    assert occupied_gpus(None) == []
    assert occupied_gpus("cuda:3") == [3]
    assert occupied_gpus(torch.device("cuda", 2)) == [2]
    assert occupied_gpus({"embed": 0, "layers.0": "cuda:1", "layers.1": 1, "head": "cpu"}) == [
        0,
        1,
    ]
    assert occupied_gpus(["cuda:4", "cuda:4", "disk"]) == [4]


def test_a_module_on_the_cpu_occupies_no_gpu_and_its_device_map_wins():
    module = torch.nn.Linear(2, 2)
    assert occupied_gpus(module) == []
    module.hf_device_map = {"a": 5, "b": 6}
    assert occupied_gpus(module) == [5, 6]

    class Loaded:
        model = module
        device = "cpu"

    assert occupied_gpus(Loaded()) == [5, 6]


def test_override_wins_and_is_checked():
    assert measured_gpus("cuda:0", [2, 3]) == [2, 3]
    assert measured_gpus("cuda:0", []) == []
    with pytest.raises(UserError):
        measured_gpus("cpu", [1, 1])
    with pytest.raises(UserError):
        measured_gpus("cpu", [-1])
    assert parse_gpu_indices("0, 2") == [0, 2]
    assert parse_gpu_indices("none") == []
    assert parse_gpu_indices(None) is None
    with pytest.raises(UserError):
        parse_gpu_indices("0,x")


def test_one_gpu_model_on_an_eight_gpu_node_is_charged_one_gpu():
    with install_emulated_gpus(power_w=300.0, count=8), install_emulated_cpus(power_w=80.0):
        meter = meter_for("cuda:5")
        with meter.window("w") as w:
            time.sleep(0.2)
        meter.close()
    res = w.result
    assert meter.scope.gpu_indices == (5,)
    assert set(res.energy_by_device_j) == {"gpu:5"}
    assert res.energy_j == pytest.approx(300.0 * res.duration_s, rel=0.02)
    assert res.energy_source == "emulated:zeus-gpu"
    # the CPU package is beside it, with its own label, not in the GPU figure
    assert res.host_energy_j == pytest.approx(80.0 * res.duration_s, rel=0.02)
    assert res.host_energy_source == "emulated:zeus-rapl"


def test_a_model_on_the_cpu_charges_no_gpu(no_devices_but_gpus):
    meter = meter_for("cpu")
    with meter.window("w"):
        time.sleep(0.05)
    meter.close()
    assert meter.scope.gpu_indices == ()
    assert meter.energy_source == "modelled:cpu-tdp"


@pytest.fixture
def no_devices_but_gpus():
    with install_emulated_gpus(power_w=300.0, count=8, hide_real_cpus=True):
        yield
