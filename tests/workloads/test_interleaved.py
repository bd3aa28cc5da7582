"""Interleaved repeats: round r measures repeat r of every compared configuration in turn."""

from __future__ import annotations

import torch

from mlenergy.measure import EnergyMeter
from mlenergy.measure.emulated import install_no_devices
from mlenergy.models import load_model
from mlenergy.workloads import inference
from mlenergy.workloads.inference import InferenceSpec, run_interleaved

torch.set_num_threads(1)


def test_repeats_alternate_between_models_and_batch_sizes(monkeypatch):
    calls = []
    real = inference.measure_point

    def spy(loaded, meter, ids, output_tokens, repeats, warmup, on_step=None, **kw):
        calls.append((loaded.model_id, ids.shape[0], repeats, warmup))
        return real(loaded, meter, ids, output_tokens, repeats, warmup, on_step, **kw)

    monkeypatch.setattr(inference, "measure_point", spy)
    dense, moe = load_model("preset:tiny-dense"), load_model("preset:tiny-moe")
    spec = InferenceSpec(batch_sizes=(1, 2), input_tokens=4, output_tokens=3, repeats=2, idle_s=0)
    with install_no_devices():
        meter = EnergyMeter()
        (d_records, m_records) = run_interleaved(
            [(dense, {"v": "d"}), (moe, {"v": "m"})], spec, meter
        )
        meter.close()
    measured = [(m, b) for m, b, r, _ in calls if r == 1]
    one_round = [("preset:tiny-dense", 1), ("preset:tiny-dense", 2),
                 ("preset:tiny-moe", 1), ("preset:tiny-moe", 2)]  # fmt: skip
    assert measured == one_round * 2  # A B A B, not A A B B
    assert calls[0][3] == 1 and calls[0][2] == 0  # warm-ups come first, unmeasured
    for records, tag in ((d_records, "d"), (m_records, "m")):
        assert [r.workload.batch_size for r in records] == [1, 2]
        for r in records:
            assert r.status == "ok" and r.tags["v"] == tag
            assert r.tags["repeat_order"] == "interleaved"
            assert r.phase("request").energy_j_repeats.n == 2
    assert m_records[0].expert_utilisation is not None


def test_an_arm_that_runs_out_of_memory_fails_alone(monkeypatch):
    real = inference.measure_point

    def oom_at_batch_2(loaded, meter, ids, output_tokens, repeats, warmup, on_step=None, **kw):
        if ids.shape[0] == 2:
            raise RuntimeError("CUDA out of memory")
        return real(loaded, meter, ids, output_tokens, repeats, warmup, on_step, **kw)

    monkeypatch.setattr(inference, "measure_point", oom_at_batch_2)
    spec = InferenceSpec(batch_sizes=(1, 2), input_tokens=4, output_tokens=2, repeats=1, idle_s=0)
    with install_no_devices():
        meter = EnergyMeter()
        ((ok, failed),) = run_interleaved([(load_model("preset:tiny-dense"), {})], spec, meter)
        meter.close()
    assert ok.status == "ok" and failed.status == "failed"
    assert "out of memory at batch size 2" in failed.error
    assert not failed.phases


def test_bench_interleave_measures_two_models_in_turn(tmp_path):
    from mlenergy.store import RunStore
    from mlenergy.workloads.bench import BenchOptions, run_bench

    spec = InferenceSpec(batch_sizes=(1,), input_tokens=4, output_tokens=2, repeats=2, idle_s=0)
    with install_no_devices():
        records = run_bench(
            ["preset:tiny-dense", "preset:tiny-moe"],
            spec,
            BenchOptions(interleave=True, progress=False),
            data_dir=tmp_path,
        )
    assert [r.model.model_id for r in records] == ["preset:tiny-dense", "preset:tiny-moe"]
    assert all(r.tags["repeat_order"] == "interleaved" for r in records)
    assert len(RunStore(tmp_path).runs()) == 2
