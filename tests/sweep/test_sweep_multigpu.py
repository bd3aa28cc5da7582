"""A run over several GPUs of one node: one Zeus monitor over all of them, the split on record."""

from __future__ import annotations

import torch

from mlenergy.measure.emulated import install_emulated_gpus
from mlenergy.models import load_model
from mlenergy.sweep.placement import layer_groups, split_layers
from mlenergy.sweep.runs import execute_run, with_gpu_split
from mlenergy.sweep.spec import KEY_TAG, RunSpec


def test_two_gpu_run_is_measured_over_both_by_one_monitor(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    spec = RunSpec(
        kind="bench",
        model="preset:tiny-dense",
        batch_size=1,
        input_tokens=2,
        output_tokens=4,
        repeats=2,
        gpus=2,
    )
    with install_emulated_gpus(power_w=[100.0, 300.0], count=2):
        (record,) = execute_run(spec)
    assert record.status == "ok" and record.energy_source == "emulated:zeus-gpu"
    assert record.scope.gpu_indices == (0, 1)
    assert record.hardware.accelerator_count == 2
    assert record.tags["gpu_ids"] == "3,5" and record.tags[KEY_TAG] == spec.key
    # The model ran on the host (a CPU-only torch): one stage, said so on the record.
    assert record.workload.tensor_parallel == 1 and record.workload.pipeline_parallel == 1
    assert record.tags["gpu_split"] == "2 GPU(s), tensor_parallel=1, layers over 1 device(s): cpu"
    split = with_gpu_split(record, spec, ["cuda:0", "cuda:1"])
    assert split.workload.pipeline_parallel == 2
    assert split.tags["gpu_split"].endswith("layers over 2 device(s): cuda:0,cuda:1")
    for phase in record.phases:
        by_device = phase.energy_by_device_j
        assert set(by_device) == {"gpu:0", "gpu:1"}
        # Both GPUs are read over the same windows: energies in the ratio of their power.
        assert abs(by_device["gpu:1"] / by_device["gpu:0"] - 3.0) < 0.05
        assert abs(phase.energy_j - 400.0 * phase.duration_s) < 0.05 * phase.energy_j


def test_layer_split_keeps_the_outputs():
    loaded = load_model("preset:tiny-dense")
    ids = torch.randint(0, loaded.vocab_size, (2, 5), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = loaded.model(ids).logits
        groups = split_layers(loaded.model, ["cpu", "cpu", "cpu"])
        after = loaded.model(ids).logits
    assert [len(g) for g in groups] == [2, 1, 1]
    assert torch.allclose(before, after)
    assert layer_groups(5, 2) == [range(0, 3), range(3, 5)]


def test_plan_asking_for_two_gpus_stores_runs_measured_over_both(tmp_path):
    from sweep_helpers import TINY

    from mlenergy.store import RunStore
    from mlenergy.sweep import LocalExecutor, check_plan, parse_plan, run_sweep

    plan = parse_plan({**TINY, "batch_sizes": [1], "resources": {"gpus": 2}})
    store = RunStore(tmp_path / "data")
    with install_emulated_gpus(power_w=200.0, count=2):
        summary = run_sweep(check_plan(plan), store, LocalExecutor(), progress=False)
    assert summary.ok == 1
    (record,) = store.runs()
    assert record.energy_source == "emulated:zeus-gpu" and record.scope.gpu_indices == (0, 1)
    assert record.scope.cpu_indices == () and record.hardware.accelerator_count == 2
    decode = record.phase("decode")
    assert set(decode.energy_by_device_j) == {"gpu:0", "gpu:1"}
