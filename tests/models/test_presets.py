"""The built-in presets: real architectures, random weights, fast on one CPU thread."""

from __future__ import annotations

import pytest
import torch

from mlenergy.errors import UserError
from mlenergy.models import PRESETS, config_fingerprint, load_model, preset_config
from mlenergy.models.presets import PRESET_VOCAB_SIZE

torch.set_num_threads(1)

EXPECTED = {
    # name: (model_type, class name, num_experts, experts_per_token, shared experts)
    "tiny-dense": ("llama", "LlamaForCausalLM", None, None, None),
    "tiny-moe": ("mixtral", "MixtralForCausalLM", 8, 2, 0),
    "tiny-moe-fine": ("qwen3_moe", "Qwen3MoeForCausalLM", 32, 4, 0),
    "tiny-moe-deepseek": ("deepseek_v3", "DeepseekV3ForCausalLM", 16, 4, 1),
}


def test_registry_has_the_four_presets():
    assert set(PRESETS) == set(EXPECTED)
    for name, preset in PRESETS.items():
        assert preset.model_id == f"preset:{name}"
        assert preset.description and preset.style


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_builds_runs_and_describes_itself(name):
    model_type, cls, experts, top_k, shared = EXPECTED[name]
    loaded = load_model(f"preset:{name}")
    info = loaded.info
    assert type(loaded.model).__name__ == cls
    assert not loaded.model.training
    assert loaded.tokenizer is None
    assert loaded.model_id == f"preset:{name}"
    assert info.architecture == model_type
    assert info.is_moe == (experts is not None)
    assert (info.num_experts, info.experts_per_token, info.num_shared_experts) == (
        experts,
        top_k,
        shared,
    )
    assert info.weights == "random" and info.dtype == "float32"
    real = sum(p.numel() for p in loaded.model.parameters())
    assert info.total_params == pytest.approx(real, rel=1e-3)
    if experts is None:
        assert info.active_params == info.total_params
    else:
        assert info.active_params < info.total_params
    assert loaded.vocab_size == PRESET_VOCAB_SIZE
    ids = torch.randint(0, PRESET_VOCAB_SIZE, (2, 8), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        logits = loaded.model(input_ids=ids).logits
    assert logits.shape == (2, 8, PRESET_VOCAB_SIZE)
    assert torch.isfinite(logits).all()


def test_moe_presets_are_genuinely_sparse():
    """Active share: Mixtral top-2 of 8 and fine-grained top-4 of 32 use few expert weights."""
    dense = load_model("preset:tiny-dense").info
    moe = load_model("preset:tiny-moe").info
    fine = load_model("preset:tiny-moe-fine").info
    assert moe.total_params > 2 * dense.total_params
    assert moe.active_params < 0.5 * moe.total_params
    assert fine.active_params < 0.35 * fine.total_params


def test_same_seed_same_weights_other_seed_other_weights():
    a = load_model("preset:tiny-moe", seed=3).model.state_dict()
    b = load_model("preset:tiny-moe", seed=3).model.state_dict()
    c = load_model("preset:tiny-moe", seed=4).model.state_dict()
    key = next(k for k in a if "experts" in k)
    assert torch.equal(a[key], b[key])
    assert not torch.equal(a[key], c[key])


def test_fingerprint_is_stable_and_distinguishes_presets():
    prints = {name: config_fingerprint(preset_config(name)) for name in PRESETS}
    assert len(set(prints.values())) == len(prints)
    assert all(len(p) == 16 for p in prints.values())
    assert config_fingerprint(preset_config("tiny-moe")) == prints["tiny-moe"]
    # dtype is not part of the architecture: same fingerprint in bfloat16
    assert (
        load_model("preset:tiny-moe", dtype="bfloat16").info.config_fingerprint
        == prints["tiny-moe"]
    )


def test_unknown_preset_names_the_choices():
    with pytest.raises(UserError, match=r"unknown preset 'nope'.*preset:tiny-dense"):
        load_model("preset:nope")
