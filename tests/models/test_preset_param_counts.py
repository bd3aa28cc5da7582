"""The estimator's parameter count from a config agrees with the built presets' tensors."""

from __future__ import annotations

import pytest
import torch

from mlenergy.models import PRESETS, count_model_parameters, moe_shape, preset_config

architecture = pytest.importorskip(
    "mlenergy.models.architecture", reason="the estimator's architecture module is missing"
)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_count_from_config_matches_built_model(name):
    from transformers import AutoModelForCausalLM

    config = preset_config(name)
    counts = architecture.count_parameters(
        architecture.ArchitectureSpec.from_config(config.to_dict())
    )
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    real_total = sum(p.numel() for p in model.parameters())
    experts, top_k, _ = moe_shape(config)
    _, real_active = count_model_parameters(model, experts, top_k)
    # DeepSeek-V3's router carries a 16-entry correction bias per MoE layer that some
    # counters treat as a buffer: allow 0.01% (a few dozen of ~2M parameters).
    assert counts.total == pytest.approx(real_total, rel=1e-4)
    assert counts.active == pytest.approx(real_active, rel=1e-4)
