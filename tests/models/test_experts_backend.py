"""The experts backend: parsed, applied, chosen by policy (device default, measured, named)."""

from __future__ import annotations

import pytest
import torch

from mlenergy.errors import UserError
from mlenergy.models import load_model
from mlenergy.models.experts import (
    DEVICE_DEFAULTS,
    choose_experts_backend,
    current_experts_backend,
    experts_fields,
    parse_experts_policy,
    set_experts_backend,
    supports_experts_backend,
)
from mlenergy.records import GenerationInfo

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def moe():
    return load_model("preset:tiny-moe")


@pytest.fixture(scope="module")
def dense():
    return load_model("preset:tiny-dense")


def test_policies_parse_and_bad_ones_say_the_choices():
    assert parse_experts_policy("grouped-mm") == "grouped_mm"
    assert parse_experts_policy(" Measure ") == "measure"
    with pytest.raises(UserError, match="auto, measure, eager, grouped_mm, batched_mm"):
        parse_experts_policy("fast")


def test_moe_models_switch_and_dense_ones_have_no_backend(moe, dense):
    assert supports_experts_backend(moe.model) and not supports_experts_backend(dense.model)
    assert current_experts_backend(dense.model) is None
    set_experts_backend(moe.model, "batched_mm")
    assert current_experts_backend(moe.model) == "batched_mm"
    set_experts_backend(moe.model, "eager")
    assert moe.model.config._experts_implementation == "eager"
    with pytest.raises(UserError, match="no MoE layers"):
        set_experts_backend(dense.model, "grouped_mm")
    with pytest.raises(UserError, match="unknown experts backend"):
        set_experts_backend(moe.model, "deepgemm")


def test_the_backends_compute_the_same_layer(moe):
    ids = torch.randint(0, moe.vocab_size, (3, 7))
    logits = {}
    with torch.inference_mode():
        for backend in ("eager", "grouped_mm", "batched_mm"):
            set_experts_backend(moe.model, backend)
            logits[backend] = moe.model(input_ids=ids).logits
    torch.testing.assert_close(logits["grouped_mm"], logits["eager"], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(logits["batched_mm"], logits["eager"], rtol=1e-4, atol=1e-4)


def test_auto_uses_the_cpu_default_without_timing_anything(moe):
    def probe(_backend: str) -> float:
        raise AssertionError("auto on the CPU does not measure")

    choice = choose_experts_backend(moe.model, "auto", "cpu", probe)
    assert (choice.backend, choice.source) == (DEVICE_DEFAULTS["cpu"], "device-default")
    assert current_experts_backend(moe.model) == DEVICE_DEFAULTS["cpu"]


def test_measure_keeps_the_fastest_and_every_time(moe):
    fake = {"eager": 0.03, "grouped_mm": 0.02, "batched_mm": 0.01}
    seen = []

    def probe(backend: str) -> float:
        assert current_experts_backend(moe.model) == backend  # timed as applied
        seen.append(backend)
        return fake[backend]

    choice = choose_experts_backend(moe.model, "measure", "cpu", probe)
    assert seen == ["eager", "grouped_mm", "batched_mm"]
    assert (choice.backend, choice.source, choice.step_s) == ("batched_mm", "measured", fake)
    assert current_experts_backend(moe.model) == "batched_mm"
    info = GenerationInfo(backend="eager", torch="t", transformers="x", **experts_fields(choice))
    assert info.experts_step_s == fake and info.label() == "eager, experts batched_mm"


def test_auto_measures_on_a_device_without_a_default(moe):
    choice = choose_experts_backend(
        moe.model, "auto", "cuda:0", lambda b: {"eager": 3, "grouped_mm": 1}.get(b, 2)
    )
    assert (choice.backend, choice.source) == ("grouped_mm", "measured")


def test_a_named_backend_applies_to_moe_and_leaves_dense_alone(moe, dense):
    choice = choose_experts_backend(moe.model, "eager", "cpu", lambda b: 1.0)
    assert (choice.backend, choice.source, choice.step_s) == ("eager", "requested", {})
    assert choose_experts_backend(dense.model, "grouped_mm", "cpu", lambda b: 1.0) is None
    assert experts_fields(None) == {}
