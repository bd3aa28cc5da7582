import warnings

import pytest

from mlenergy.errors import UserError
from mlenergy.studies.families import SIZES, get_size


@pytest.mark.parametrize("name", list(SIZES))
def test_families_are_matched_by_construction(name):
    size = SIZES[name]
    roles = {v.role for v in size.variants}
    assert {"dense-active", "dense-total", "moe"} <= roles
    active = next(v for v in size.variants if v.role == "dense-active")
    total = next(v for v in size.variants if v.role == "dense-total")
    for v in size.variants:
        if v.role != "moe":
            continue
        assert v.top_k * v.expert_ffn + v.shared_ffn == active.ffn, v.name
        assert v.num_experts * v.expert_ffn + v.shared_ffn <= total.ffn, v.name
        assert v.num_experts * v.expert_ffn + v.shared_ffn >= 0.75 * total.ffn, v.name
    pairs = size.pairs()
    n_moe = sum(v.role == "moe" for v in size.variants)
    assert len(pairs) == 2 * n_moe


def test_tiny_family_covers_the_design_space():
    moe = [v for v in SIZES["tiny"].variants if v.role == "moe"]
    assert {v.top_k for v in moe} == {1, 2}
    assert any(v.shared_ffn for v in moe) and any(not v.shared_ffn for v in moe)
    assert len({v.num_experts for v in moe}) >= 2


def test_built_models_are_matched_on_active_and_total_parameters():
    import torch
    from transformers import AutoModelForCausalLM

    from mlenergy.models import count_model_parameters, model_info_from_config

    size = SIZES["test"]
    counts = {}
    for v in size.variants:
        cfg = size.build_config(v, 300)
        assert cfg.vocab_size == 300
        with torch.device("meta"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zero-width shared expert
            model = AutoModelForCausalLM.from_config(cfg)
        info = model_info_from_config(cfg, f"x/{v.name}", "float32", "trained", model)
        assert info.is_moe == (v.role == "moe")
        counts[v.role] = count_model_parameters(model, info.num_experts, info.experts_per_token)
    # total, active; the MoE's router adds well under 3%
    assert counts["moe"][1] == pytest.approx(counts["dense-active"][1], rel=0.03)
    assert counts["moe"][0] == pytest.approx(counts["dense-total"][0], rel=0.03)


def test_unknown_size():
    with pytest.raises(UserError, match="unknown study size"):
        get_size("huge")
