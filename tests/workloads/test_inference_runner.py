"""The inference runner: phases, repeats, latencies, out-of-memory points, meters, prompts."""

from __future__ import annotations

import json

import pytest
import torch

from mlenergy.errors import UserError
from mlenergy.measure import EnergyMeter
from mlenergy.models import load_model
from mlenergy.workloads import InferenceSpec, parse_batch_sizes, run_inference_sweep
from mlenergy.workloads import inference as inference_mod
from mlenergy.workloads.generation import generate

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does

torch.set_num_threads(1)

SMALL = {"input_tokens": 8, "output_tokens": 6, "repeats": 2, "warmup": 1, "idle_s": 0.05}


@pytest.fixture(scope="module")
def dense():
    return load_model("preset:tiny-dense")


@pytest.fixture
def meter():
    m = EnergyMeter(cpu_tdp_w=50.0)
    yield m
    m.close()


def test_sweep_records_prefill_decode_and_request(dense, meter):
    spec = InferenceSpec(batch_sizes=(1, 3), **SMALL)
    records = run_inference_sweep(dense, spec, meter, progress=False)
    assert [r.workload.batch_size for r in records] == [1, 3]
    for r in records:
        b = r.workload.batch_size
        assert r.status == "ok" and r.error is None
        assert r.energy_source == meter.energy_source == "modelled:cpu-tdp"
        assert r.scope.description
        assert r.repeats == 2 and r.warmup_runs == 1
        assert r.idle is not None and r.idle.avg_power_w > 0
        assert r.model == dense.info
        assert r.hardware.cpu_tdp_w == 50.0
        assert r.software.torch and r.software.transformers
        assert r.workload.kind == "inference"
        assert (r.workload.input_tokens, r.workload.output_tokens) == (8, 6)
        assert r.workload.num_requests == b and r.workload.prompt_source == "synthetic"
        assert r.started_at <= r.ended_at
        assert r.tags["prompt_tokenizer"] == "random-ids"
        pre, dec, req = r.phase("prefill"), r.phase("decode"), r.phase("request")
        assert (pre.tokens, dec.tokens, req.tokens) == (8 * b, 5 * b, 6 * b)
        assert req.duration_s == pytest.approx(pre.duration_s + dec.duration_s)
        assert req.energy_j == pytest.approx(pre.energy_j + dec.energy_j)
        for p in (pre, dec, req):
            assert p.energy_j > 0
            assert p.avg_power_w == pytest.approx(p.energy_j / p.duration_s)
            assert p.energy_per_token_j == pytest.approx(p.energy_j / p.tokens)
            assert p.throughput_tokens_per_s == pytest.approx(p.tokens / p.duration_s)
            assert p.energy_j_repeats.n == 2 and p.energy_j_repeats.ci95 is not None
            assert p.duration_s_repeats.mean == pytest.approx(p.duration_s)
            assert p.energy_by_device_j
        assert pre.ttft_s == req.ttft_s == pytest.approx(pre.duration_s)
        assert 0 < dec.itl_p50_s <= dec.itl_p90_s <= dec.itl_p99_s
        assert req.itl_p50_s == dec.itl_p50_s and pre.itl_p50_s is None
        json.loads(r.model_dump_json())


@pytest.mark.parametrize("name", ["preset:tiny-dense", "preset:tiny-moe-deepseek"])
def test_explicit_kv_loop_matches_greedy_generate(name):
    loaded = load_model(name)
    ids = torch.randint(0, loaded.vocab_size, (2, 7), generator=torch.Generator().manual_seed(0))
    ours = generate(loaded.model, ids, 5)
    with torch.inference_mode():
        ref = loaded.model.generate(
            ids, max_new_tokens=5, min_new_tokens=5, do_sample=False, pad_token_id=0
        )[:, 7:]
    assert ours.shape == (2, 5)
    assert torch.equal(ours, ref)


def test_single_output_token_has_no_decode_phase(dense, meter):
    spec = InferenceSpec(batch_sizes=(2,), **{**SMALL, "output_tokens": 1, "idle_s": 0})
    (record,) = run_inference_sweep(dense, spec, meter, progress=False)
    assert record.phase("decode") is None
    req = record.phase("request")
    assert req.tokens == 2 and req.itl_p50_s is None
    assert req.duration_s == pytest.approx(record.phase("prefill").duration_s)
    assert record.idle is None


class _ListStore:
    def __init__(self):
        self.appended = []

    def append(self, records):
        self.appended.append(list(records))


def test_out_of_memory_point_is_recorded_and_sweep_goes_on(dense, meter, monkeypatch):
    real = inference_mod.measure_point

    def flaky(loaded, m, input_ids, *args, **kwargs):
        if input_ids.shape[0] == 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(loaded, m, input_ids, *args, **kwargs)

    monkeypatch.setattr(inference_mod, "measure_point", flaky)
    store, seen = _ListStore(), []
    spec = InferenceSpec(batch_sizes=(1, 4, 2), **SMALL)
    records = run_inference_sweep(dense, spec, meter, store=store, on_record=seen.append)
    assert [r.status for r in records] == ["ok", "failed", "ok"]
    failed = records[1]
    assert failed.error.startswith("out of memory at batch size 4")
    assert failed.phases == () and failed.workload.batch_size == 4
    assert [batch[0].run_id for batch in store.appended] == [r.run_id for r in records]
    assert seen == records


def test_other_errors_are_not_swallowed(dense, meter, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(inference_mod, "measure_point", broken)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        run_inference_sweep(dense, InferenceSpec(**SMALL), meter, progress=False)


def test_host_memory_error_counts_as_out_of_memory():
    assert inference_mod.is_out_of_memory(MemoryError())
    assert inference_mod.is_out_of_memory(RuntimeError("DefaultCPUAllocator: out of memory"))
    assert not inference_mod.is_out_of_memory(RuntimeError("other"))


def test_emulated_gpu_energy_matches_power_times_time(dense):
    from mlenergy.measure.emulated import install_emulated_gpus

    with install_emulated_gpus(power_w=200.0, count=1):
        m = EnergyMeter()
        try:
            (record,) = run_inference_sweep(
                dense, InferenceSpec(batch_sizes=(2,), **SMALL), m, progress=False
            )
        finally:
            m.close()
    assert record.energy_source == "emulated:zeus-gpu"
    assert record.scope.gpu_indices == (0,)
    assert record.hardware.accelerator_count == 1
    for phase in record.phases:
        assert phase.energy_j == pytest.approx(200.0 * phase.duration_s, rel=0.05)
        assert phase.avg_power_w == pytest.approx(200.0, rel=0.05)
    assert record.idle.avg_power_w == pytest.approx(200.0, rel=0.05)


def test_model_id_string_and_dataset_prompts(tmp_path, meter):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(
        "\n".join(json.dumps({"text": f"prompt number {i} about energy"}) for i in range(5))
    )
    spec = InferenceSpec(batch_sizes=(2,), prompts=str(prompts), **SMALL)
    (record,) = run_inference_sweep("preset:tiny-moe-fine", spec, meter, progress=False)
    assert record.model.model_id == "preset:tiny-moe-fine" and record.model.is_moe
    assert record.workload.prompt_source == str(prompts)
    assert record.tags["prompt_tokenizer"] == "trained-bpe"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"batch_sizes": (0,)}, "batch size 0"),
        ({"batch_sizes": (-2,)}, "batch size -2"),
        ({"batch_sizes": ()}, "no batch sizes"),
        ({"output_tokens": 0}, "output tokens must be an integer >= 1"),
        ({"input_tokens": 0}, "input tokens"),
        ({"repeats": 0}, "repeats"),
        ({"warmup": -1}, "warm-up"),
    ],
)
def test_spec_validation(kwargs, match, dense, meter):
    with pytest.raises(UserError, match=match):
        run_inference_sweep(dense, InferenceSpec(**kwargs), meter, progress=False)


def test_parse_batch_sizes():
    assert parse_batch_sizes("1, 4,16,4") == (1, 4, 16)
    for bad, match in (
        ("0", "at least 1"),
        ("-1", "at least 1"),
        ("a", "not an integer"),
        (",", "no batch"),
    ):
        with pytest.raises(UserError, match=match):
            parse_batch_sizes(bad)


@pytest.mark.parametrize(
    "name", ["preset:tiny-moe", "preset:tiny-moe-fine", "preset:tiny-moe-deepseek"]
)
def test_moe_records_expert_utilisation(name, meter):
    loaded = load_model(name)
    (record,) = run_inference_sweep(
        loaded, InferenceSpec(batch_sizes=(2,), **SMALL), meter, progress=False
    )
    util = record.expert_utilisation
    assert util is not None and len(util) == loaded.info.num_experts
    assert sum(util) == pytest.approx(1.0)
    assert max(util) < 1.0  # random routers spread tokens over several experts


def test_dense_or_no_warmup_has_no_expert_utilisation(dense, meter):
    (record,) = run_inference_sweep(
        dense, InferenceSpec(batch_sizes=(1,), **SMALL), meter, progress=False
    )
    assert record.expert_utilisation is None
    moe = load_model("preset:tiny-moe")
    spec = InferenceSpec(batch_sizes=(1,), **{**SMALL, "warmup": 0})
    (record,) = run_inference_sweep(moe, spec, meter, progress=False)
    assert record.expert_utilisation is None and record.warmup_runs == 0


def test_power_timeline_is_recorded_when_the_meter_keeps_one(dense):
    m = EnergyMeter(cpu_tdp_w=50.0, power_timeline=True, timeline_period_s=0.01)
    try:
        spec = InferenceSpec(batch_sizes=(2,), **{**SMALL, "output_tokens": 12})
        (record,) = run_inference_sweep(dense, spec, m, progress=False)
    finally:
        m.close()
    tl = record.power_timeline
    assert tl is not None and tl.energy_source == "modelled:cpu-tdp"
    assert len(tl.t_s) == len(tl.power_w) >= 1
    assert min(tl.t_s) >= 0


def test_idle_baseline_is_reused_across_models_when_asked(dense, meter):
    spec = InferenceSpec(batch_sizes=(1,), **SMALL)
    (first,) = run_inference_sweep(dense, spec, meter, progress=False)
    (again,) = run_inference_sweep(dense, spec, meter, progress=False, reuse_idle=True)
    (fresh,) = run_inference_sweep(dense, spec, meter, progress=False)
    assert again.idle == first.idle
    assert fresh.idle is not None
