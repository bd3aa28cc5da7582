"""load_model: every kind of source, and one-line errors for bad ones."""

from __future__ import annotations

import json

import pytest
import torch

from mlenergy.errors import UserError
from mlenergy.models import (
    ModelSource,
    load_model,
    model_info_from_config,
    preset_config,
    resolve_source,
)

torch.set_num_threads(1)


def _write_config(path, **overrides):
    cfg = preset_config("tiny-dense").to_dict()
    cfg.update(overrides)
    path.write_text(json.dumps(cfg))
    return path


def test_parse_classifies_sources(tmp_path):
    assert ModelSource.parse("preset:tiny-moe") == ModelSource("preset", "tiny-moe")
    assert ModelSource.parse("Qwen/Qwen3-0.6B") == ModelSource("hub", "Qwen/Qwen3-0.6B")
    assert ModelSource.parse(str(tmp_path)).kind == "local_dir"
    cfg = _write_config(tmp_path / "config.json")
    assert ModelSource.parse(str(cfg)).kind == "config_file"
    with pytest.raises(UserError, match="does not exist"):
        ModelSource.parse(str(tmp_path / "nothing" / "config.json"))
    with pytest.raises(UserError, match="empty model source"):
        ModelSource.parse("  ")


def test_config_json_builds_random_weights(tmp_path):
    cfg = _write_config(tmp_path / "config.json", num_hidden_layers=1)
    loaded = load_model(str(cfg))
    assert loaded.info.weights == "random"
    # A name and the fingerprint, never the path it was given by.
    assert loaded.model_id == f"config:{tmp_path.name}@{loaded.info.config_fingerprint[:8]}"
    assert loaded.info.model_id == loaded.model_id
    assert loaded.config.num_hidden_layers == 1
    assert loaded.info.architecture == "llama"


def test_reference_style_config_with_annotations(tmp_path):
    """Keys like _source, model_id and quantization_config (reference configs) are ignored."""
    cfg = _write_config(
        tmp_path / "c.json",
        _source="somewhere",
        model_id="org/name",
        quantization_config={"quant_method": "fp8"},
    )
    loaded = load_model(str(cfg))
    assert loaded.info.weights == "random"
    assert loaded.model_id == f"config:org/name@{loaded.info.config_fingerprint[:8]}"


def test_config_file_model_id_is_a_name_and_fingerprint_not_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write_config(tmp_path / "small.json", num_hidden_layers=1)
    (tmp_path / "copy").mkdir()
    _write_config(tmp_path / "copy" / "small.json", num_hidden_layers=1)
    _write_config(tmp_path / "other.json", num_hidden_layers=2)
    here = resolve_source("small.json")
    there = resolve_source(str(tmp_path / "copy" / "small.json"))
    assert here.model_id == there.model_id  # same config, same id, wherever it was read
    assert here.model_id.startswith("config:small@") and "/" not in here.model_id
    assert resolve_source("other.json").model_id != here.model_id


def test_config_object_and_model_id_override():
    config = preset_config("tiny-moe")
    config.num_hidden_layers = 1
    loaded = load_model(config)
    assert loaded.model_id == "config:mixtral"
    assert loaded.info.is_moe
    named = load_model(config, model_id="study:moe-1")
    assert named.info.model_id == "study:moe-1"


def test_local_folder_with_weights_loads_them(tmp_path):
    src = load_model("preset:tiny-dense", seed=7)
    src.model.save_pretrained(tmp_path)
    loaded = load_model(str(tmp_path))
    assert loaded.info.weights == "pretrained"
    a, b = src.model.state_dict(), loaded.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_local_folder_with_only_config_is_random(tmp_path):
    _write_config(tmp_path / "config.json")
    loaded = load_model(str(tmp_path))
    assert loaded.info.weights == "random"


def test_folder_without_config(tmp_path):
    with pytest.raises(UserError, match=r"has no config\.json"):
        load_model(str(tmp_path))


def test_malformed_config_names_file_and_json_error(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama", "hidden_size": 64,')
    with pytest.raises(UserError) as err:
        load_model(str(bad))
    msg = err.value.message
    assert str(bad) in msg and "malformed" in msg and "line" in msg
    assert "\n" not in msg


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("[1, 2]", "not an object"),
        ('{"hidden_size": 64}', "has no model_type"),
        ('{"model_type": "no-such-arch"}', "unknown model_type 'no-such-arch'"),
    ],
)
def test_bad_config_contents(tmp_path, content, match):
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(UserError, match=match):
        load_model(str(path))


def _spy_config_reads(monkeypatch) -> list[bool]:
    """Record the ``local_files_only`` flag of every hub config read (no network retries
    happen when it is True; how long a failure takes is measured by
    ``benchmarks/hub_failure_latency.py``)."""
    import mlenergy.models.loading as loading

    flags: list[bool] = []
    real = loading._pretrained_config

    def spy(name, local_files_only):
        flags.append(local_files_only)
        return real(name, local_files_only)

    monkeypatch.setattr(loading, "_pretrained_config", spy)
    return flags


def test_unknown_hub_id_offline_fails_without_network(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    flags = _spy_config_reads(monkeypatch)
    with pytest.raises(UserError) as err:
        load_model("no-such-org/no-such-model-xyz")
    assert flags == [True]  # the local cache only: no download attempts to wait for
    msg = err.value.message
    assert "could not load 'no-such-org/no-such-model-xyz' from the Hugging Face Hub" in msg
    assert "preset:" in msg and "config.json" in msg


def test_resolve_source_reads_config_without_weights(tmp_path):
    resolved = resolve_source("preset:tiny-moe-fine")
    assert not resolved.pretrained
    assert resolved.config.model_type == "qwen3_moe"
    loaded = load_model(resolved)
    assert loaded.model_id == "preset:tiny-moe-fine"


def test_dtype_and_device_validation():
    loaded = load_model("preset:tiny-dense", dtype="bf16")
    assert loaded.dtype == "bfloat16" and loaded.info.dtype == "bfloat16"
    assert next(loaded.model.parameters()).dtype == torch.bfloat16
    with pytest.raises(UserError, match="unsupported dtype 'int3'"):
        load_model("preset:tiny-dense", dtype="int3")
    with pytest.raises(UserError, match="invalid device"):
        load_model("preset:tiny-dense", device="warp-drive")
    if not torch.cuda.is_available():
        with pytest.raises(UserError, match="no CUDA GPU"):
            load_model("preset:tiny-dense", device="cuda")


def test_config_too_large_for_memory_is_refused(tmp_path):
    huge = _write_config(
        tmp_path / "huge.json", hidden_size=16384, num_hidden_layers=400, intermediate_size=65536
    )
    with pytest.raises(UserError, match=r"parameters .* GiB"):
        load_model(str(huge))


def test_model_info_counts_without_a_built_model():
    config = preset_config("tiny-moe")
    info = model_info_from_config(config, "x", "float32", "random")
    built = load_model(config).info
    assert (info.total_params, info.active_params) == (built.total_params, built.active_params)
    assert info.config_fingerprint == built.config_fingerprint


def test_non_causal_architecture_is_a_user_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "t5", "d_model": 32, "num_layers": 1}))
    with pytest.raises(UserError, match="cannot build a causal language model"):
        load_model(str(path))


def test_unreachable_hub_is_detected_without_offline_flag(monkeypatch):
    """No HF_HUB_OFFLINE: a closed endpoint is detected up front, so no long retries."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    flags = _spy_config_reads(monkeypatch)
    with pytest.raises(UserError, match="no network or unknown id"):
        load_model("no-such-org/no-such-model-xyz")
    assert flags == [True]  # the endpoint was found closed first: no retries against it
