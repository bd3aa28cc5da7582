"""A config.json given by path must name its sizes: no silent transformers defaults."""

from __future__ import annotations

import json

import pytest

from mlenergy.errors import UserError
from mlenergy.models import preset_config
from mlenergy.models.config_file import read_config_file
from mlenergy.models.loading import resolve_source


def _write(tmp_path, cfg: dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


def test_bare_model_type_names_every_missing_field(tmp_path):
    path = _write(tmp_path, {"model_type": "llama"})
    with pytest.raises(UserError) as info:
        read_config_file(path)
    msg = info.value.message
    assert "missing required field(s) hidden_size, num_hidden_layers, num_attention_heads" in msg
    assert "vocab_size" in msg and str(path) in msg


def test_known_family_is_checked_by_the_architecture_parser(tmp_path):
    cfg = preset_config("tiny-dense").to_dict()
    cfg = {k: v for k, v in cfg.items() if k != "intermediate_size"}
    cfg["model_type"] = "llama"
    with pytest.raises(UserError, match="missing required field 'intermediate_size'"):
        read_config_file(_write(tmp_path, cfg))


def test_known_family_with_mla_needs_its_ranks(tmp_path):
    cfg = {
        "model_type": "deepseek_v3",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "vocab_size": 128,
        "intermediate_size": 128,
    }
    with pytest.raises(UserError, match="kv_lora_rank"):
        read_config_file(_write(tmp_path, cfg))


def test_unknown_family_needs_only_the_core_fields(tmp_path):
    # gpt2 spells its sizes n_embd / n_layer / n_head: accepted aliases
    cfg = {"model_type": "gpt2", "n_embd": 32, "n_layer": 1, "n_head": 2}
    with pytest.raises(UserError, match=r"missing required field\(s\) vocab_size"):
        read_config_file(_write(tmp_path, cfg))
    cfg["vocab_size"] = 64
    assert read_config_file(_write(tmp_path, cfg)).n_embd == 32


def test_complete_configs_still_load(tmp_path):
    cfg = preset_config("tiny-moe").to_dict()
    resolved = resolve_source(str(_write(tmp_path, cfg)))
    assert resolved.config.model_type == cfg["model_type"]


def test_non_causal_config_is_left_to_the_builder_check(tmp_path):
    path = _write(tmp_path, {"model_type": "t5", "d_model": 32, "num_layers": 1})
    assert read_config_file(path).model_type == "t5"
