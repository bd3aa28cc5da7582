"""The estimator's parameter count from a config agrees with the built presets' tensors."""

from __future__ import annotations

import pytest
import torch

from mlenergy.models import PRESETS, count_model_parameters, moe_shape, preset_config
from mlenergy.models.architecture import ArchitectureSpec
from mlenergy.models.parameters import count_parameters


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_count_from_config_matches_built_model(name):
    from transformers import AutoModelForCausalLM

    config = preset_config(name)
    counts = count_parameters(ArchitectureSpec.from_config(config.to_dict()))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    real_total = sum(p.numel() for p in model.parameters())
    experts, top_k, _ = moe_shape(config)
    _, real_active = count_model_parameters(model, experts, top_k)
    # DeepSeek-V3's router carries a 16-entry correction bias per MoE layer that some
    # counters treat as a buffer: allow 0.01% (a few dozen of ~2M parameters).
    assert counts.total == pytest.approx(real_total, rel=1e-4)
    assert counts.active == pytest.approx(real_active, rel=1e-4)


def _tiny_qwen2(moe: bool, shared: int = 128):
    from transformers import Qwen2Config, Qwen2MoeConfig

    common = dict(
        vocab_size=512,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=False,
    )
    if not moe:
        return Qwen2Config(intermediate_size=256, **common)
    return Qwen2MoeConfig(
        intermediate_size=256,
        moe_intermediate_size=64,
        shared_expert_intermediate_size=shared,
        num_experts=8,
        num_experts_per_tok=2,
        **common,
    )


@pytest.mark.parametrize(
    "moe,shared",
    [(False, 0), (True, 128), (True, 0)],
    ids=["qwen2", "qwen2_moe-shared-expert", "qwen2_moe-gate-without-shared-expert"],
)
def test_qwen2_biases_and_shared_expert_counted(moe, shared):
    from transformers import AutoModelForCausalLM

    config = _tiny_qwen2(moe, shared)
    counts = count_parameters(ArchitectureSpec.from_config(config.to_dict()))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    assert counts.total == sum(p.numel() for p in model.parameters())
    if moe:
        experts, top_k, _ = moe_shape(config)
        _, real_active = count_model_parameters(model, experts, top_k)
        assert counts.active == real_active
