"""Generation backends: the static-cache decode's tokens, the policies, what the record keeps."""

from __future__ import annotations

import pytest
import torch

from mlenergy.errors import UserError
from mlenergy.measure import EnergyMeter
from mlenergy.models import load_model
from mlenergy.records import GenerationInfo
from mlenergy.workloads import backends
from mlenergy.workloads.backends import check_generation, resolve_generation
from mlenergy.workloads.generation import (
    WARM_CALLS,
    EagerGenerator,
    PassRunner,
    StaticCacheGenerator,
    generate,
)
from mlenergy.workloads.inference import InferenceSpec, run_inference_sweep, run_interleaved

torch.set_num_threads(1)

SMALL = {"input_tokens": 6, "output_tokens": 5, "repeats": 1, "warmup": 1, "idle_s": 0}


@pytest.fixture(scope="module")
def dense():
    return load_model("preset:tiny-dense")


@pytest.fixture(scope="module")
def moe():
    return load_model("preset:tiny-moe")


@pytest.fixture
def meter():
    m = EnergyMeter(cpu_tdp_w=50.0)
    yield m
    m.close()


@pytest.mark.parametrize("name", ["dense", "moe"])
def test_the_static_cache_decodes_the_eager_tokens(name, request):
    loaded = request.getfixturevalue(name)
    ids = torch.randint(0, loaded.vocab_size, (3, 7), generator=torch.Generator().manual_seed(1))
    expected = generate(loaded.model, ids, 9)
    static = StaticCacheGenerator(loaded.model, "cpu", max_tokens=7 + 9, compile=False)
    assert torch.equal(static.generate(ids, 9), expected)
    # repeated passes: the cache is cropped back and decoded again, still the same tokens
    runner = PassRunner(static, ids, 8)
    runner.prefill(2)
    assert len(runner.decode(3)) == 24
    assert torch.equal(runner.state.output_ids(), expected)
    assert int(runner.state.cache.get_seq_length()) == 7 + 8


def test_auto_compiles_on_cuda_only_and_only_what_compiles(dense):
    assert resolve_generation("auto", dense.model, "cpu") == "eager"
    assert resolve_generation("auto", dense.model, "cuda:0") == "compiled-static-cache"
    assert resolve_generation("eager", dense.model, "cuda") == "eager"
    assert resolve_generation("compiled-static-cache", dense.model, "cpu") == (
        "compiled-static-cache"
    )

    class NoFullGraph(torch.nn.Module):
        _can_compile_fullgraph = False

    assert resolve_generation("auto", NoFullGraph(), "cuda") == "eager"
    with pytest.raises(UserError, match="Use --generation eager"):
        resolve_generation("compiled-static-cache", NoFullGraph(), "cuda")
    with pytest.raises(UserError, match="auto, eager, compiled-static-cache"):
        resolve_generation("fast", dense.model, "cpu")


def test_preflight_refuses_the_compiled_backend_for_a_class_that_cannot(dense, monkeypatch):
    from transformers import LlamaForCausalLM

    check_generation(dense.config, "compiled-static-cache", "m")  # Llama compiles
    check_generation(dense.config, "auto", "m")
    monkeypatch.setattr(LlamaForCausalLM, "_can_compile_fullgraph", False)
    with pytest.raises(UserError, match=r"'m' .*LlamaForCausalLM.* cannot decode compiled"):
        check_generation(dense.config, "compiled-static-cache", "m")
    check_generation(dense.config, "eager", "m")


def test_a_bad_policy_fails_the_spec():
    with pytest.raises(UserError, match="unknown generation backend"):
        InferenceSpec(generation="compiled").validate()
    with pytest.raises(UserError, match="unknown experts backend"):
        InferenceSpec(experts_backend="fastest").validate()


@pytest.mark.slow
def test_eager_records_say_so_with_versions_and_warmup(dense, moe, meter):
    spec = InferenceSpec(batch_sizes=(2,), **SMALL)
    (d,) = run_inference_sweep(dense, spec, meter, progress=False)
    (m,) = run_inference_sweep(moe, spec, meter, progress=False)
    for r in (d, m):
        g = r.generation
        assert g.backend == "eager" and g.compile_mode is None
        assert g.torch == r.software.torch and g.transformers == r.software.transformers
        assert g.warmup_s is not None and g.warmup_s > 0
    assert d.generation.experts_backend is None and d.generation.label() == "eager"
    assert (m.generation.experts_backend, m.generation.experts_backend_source) == (
        "grouped_mm",
        "device-default",
    )
    back = type(m).model_validate_json(m.model_dump_json())
    assert back.generation == m.generation


def test_the_compiled_backend_prepares_before_any_window(dense, meter, monkeypatch):
    """The plumbing of compiled-static-cache, with torch.compile itself left out (fast)."""
    from mlenergy.workloads import point

    calls = {"forward": 0, "at_first_window": None}

    def compiled_call(self, config):
        assert config.mode == "default"  # no CUDA graphs off a GPU

        def forward(*args, **kwargs):
            calls["forward"] += 1
            return self(*args, **kwargs)

        return forward

    real_resolved = point.measure_resolved

    def spy(meter, name, work, passes):
        if calls["at_first_window"] is None:
            calls["at_first_window"] = calls["forward"]
        return real_resolved(meter, name, work, passes)

    monkeypatch.setattr(type(dense.model), "get_compiled_call", compiled_call)
    monkeypatch.setattr(point, "measure_resolved", spy)
    spec = InferenceSpec(batch_sizes=(1,), generation="compiled-static-cache", **SMALL)
    (r,) = run_inference_sweep(dense, spec, meter, progress=False)
    g = r.generation
    assert (g.backend, g.compile_mode) == ("compiled-static-cache", "default")
    assert calls["at_first_window"] >= WARM_CALLS  # compiled and captured before any window
    assert calls["forward"] == calls["at_first_window"] + SMALL["output_tokens"] - 1
    assert r.phase("decode").tokens == 4


def test_experts_are_measured_once_per_shape_and_the_record_keeps_the_times(monkeypatch):
    monkeypatch.setattr(backends, "_MEASURED", {})
    probes = []
    real_probe = backends._probe

    def counting(generator, ids, output_tokens):
        probes.append(generator.model.config._experts_implementation)
        return real_probe(generator, ids, output_tokens)

    monkeypatch.setattr(backends, "_probe", counting)
    a, b = load_model("preset:tiny-moe", seed=1), load_model("preset:tiny-moe", seed=2)
    spec = InferenceSpec(batch_sizes=(1,), experts_backend="measure", **SMALL)
    meter = EnergyMeter(cpu_tdp_w=50.0)
    try:
        ((ra,), (rb,)) = run_interleaved([(a, {}), (b, {})], spec, meter)
    finally:
        meter.close()
    assert probes == ["eager", "grouped_mm", "batched_mm"]  # one shape: timed once
    for r in (ra, rb):
        g = r.generation
        assert g.experts_backend_source == "measured"
        assert set(g.experts_step_s) == {"eager", "grouped_mm", "batched_mm"}
        assert g.experts_backend == min(g.experts_step_s, key=g.experts_step_s.get)
    assert ra.generation.experts_step_s == rb.generation.experts_step_s


def test_generation_info_refuses_inconsistent_fields():
    with pytest.raises(ValueError, match="compile_mode"):
        GenerationInfo(backend="compiled-static-cache", torch="t", transformers="x")
    with pytest.raises(ValueError, match="compile_mode"):
        GenerationInfo(backend="eager", torch="t", transformers="x", compile_mode="default")
    with pytest.raises(ValueError, match="go together"):
        GenerationInfo(backend="eager", torch="t", transformers="x", experts_backend="eager")
    with pytest.raises(ValueError, match="only for a measured"):
        GenerationInfo(
            backend="eager", torch="t", transformers="x", experts_backend="eager",
            experts_backend_source="requested", experts_step_s={"eager": 1.0},
        )  # fmt: skip


def test_a_record_without_generation_keeps_its_hash(dense, meter):
    from mlenergy.records import canonical_json, sha256_hex

    (r,) = run_inference_sweep(dense, InferenceSpec(batch_sizes=(1,), **SMALL), meter)
    old = r.model_copy(update={"generation": None, "interval": None, "host_bound": None})
    fields = {"submission", "serving", "generation", "interval", "host_bound"}
    data = old.model_dump(mode="json", exclude=fields)
    assert old.content_hash() == sha256_hex(canonical_json(data))
    assert r.content_hash() != old.content_hash()


def test_eager_generator_is_the_plain_loop(dense):
    ids = torch.randint(0, dense.vocab_size, (2, 5))
    gen = EagerGenerator(dense.model, "cpu")
    assert gen.backend == "eager" and gen.compile_mode is None
    assert torch.equal(gen.generate(ids, 4), generate(dense.model, ids, 4))


@pytest.mark.slow
def test_torch_compile_decodes_the_eager_tokens():
    """The real thing on the CPU: inductor compiles the decode forward (tens of seconds)."""
    from transformers import LlamaConfig

    config = LlamaConfig(
        vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
    )  # fmt: skip
    loaded = load_model(config)
    ids = torch.randint(0, 256, (2, 5), generator=torch.Generator().manual_seed(3))
    compiled = StaticCacheGenerator(loaded.model, "cpu", max_tokens=5 + 6)
    assert compiled.compile_mode == "default"
    compiled.warm(ids, 6)
    assert torch.equal(compiled.generate(ids, 6), generate(loaded.model, ids, 6))
