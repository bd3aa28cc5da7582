"""One strict config check: bench, quality and estimate refuse a count that is not a whole number.

``"num_hidden_layers": "thirty-two"`` or ``2.5`` in a config.json ends every command in one
``error:`` line that names the field, with exit code 2, before anything is built or stored.
"""

from __future__ import annotations

import json

import pytest

from mlenergy.cli import main
from mlenergy.errors import UserError
from mlenergy.models.architecture import ArchitectureSpec
from mlenergy.models.config_values import check_config_values

GOOD = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "intermediate_size": 128,
    "max_position_embeddings": 128,
}


def _config(tmp_path, **changes):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({**GOOD, **changes}))
    return path


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert "Traceback" not in err
    return err


COMMANDS = {
    "bench": lambda cfg, data: ["bench", "-m", str(cfg), "-b", "1", "--data-dir", str(data)],
    "quality": lambda cfg, data: ["quality", "--model", str(cfg), "--data-dir", str(data)],
    "estimate": lambda cfg, data: [
        "estimate",
        "--model",
        str(cfg),
        "--gpu",
        "H100",
        "--batch-size",
        "8",
        "--input-tokens",
        "64",
        "--output-tokens",
        "64",
    ],
}


@pytest.mark.parametrize("bad", ["thirty-two", 2.5, True, 0])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_non_integer_layer_count_is_one_line_naming_the_field(tmp_path, capsys, command, bad):
    cfg = _config(tmp_path, num_hidden_layers=bad)
    data = tmp_path / "data"
    assert main(COMMANDS[command](cfg, data)) == 2
    err = _one_error_line(capsys)
    assert "num_hidden_layers" in err and repr(bad) in err
    assert not data.exists()


def test_the_same_check_serves_estimator_and_builder():
    for field, value in (("num_key_value_heads", 1.5), ("num_local_experts", "8")):
        bad = {**GOOD, field: value}
        with pytest.raises(UserError, match=field):
            check_config_values(bad)
        with pytest.raises(UserError, match=field):
            ArchitectureSpec.from_config(bad)
    nested = {"model_type": "x", "text_config": {**GOOD, "hidden_size": 64.0}}
    with pytest.raises(UserError, match="hidden_size"):
        check_config_values(nested)
    check_config_values(GOOD)  # whole numbers pass
    assert ArchitectureSpec.from_config(GOOD).num_layers == 2


@pytest.mark.parametrize(
    "field,value", [("rms_norm_eps", "small"), ("tie_word_embeddings", "yes"), ("hidden_act", 5)]
)
def test_a_value_transformers_refuses_is_one_line_naming_it(tmp_path, capsys, field, value):
    cfg = _config(tmp_path, **{field: value})
    assert main(COMMANDS["bench"](cfg, tmp_path / "data")) == 2
    assert f"field '{field}'" in _one_error_line(capsys)


def test_a_value_that_breaks_the_build_is_one_line_too(tmp_path, capsys):
    cfg = _config(tmp_path, rope_theta="ten thousand")
    assert main(COMMANDS["bench"](cfg, tmp_path / "data")) == 2
    assert "wrong type" in _one_error_line(capsys)


def test_bench_from_a_config_path_records_a_name_and_fingerprint(tmp_path, monkeypatch, capsys):
    from mlenergy.store import RunStore

    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "small.json").write_text(json.dumps(GOOD))
    data = tmp_path / "data"
    args = ["bench", "-m", "configs/small.json", "-b", "1", "--input-tokens", "4"]
    args += ["--output-tokens", "2", "--repeats", "1", "--idle-s", "0", "--data-dir", str(data)]
    assert main(args) == 0, capsys.readouterr().err
    (run,) = RunStore(data).runs()
    assert run.model.model_id == f"config:small@{run.model.config_fingerprint[:8]}"
    assert "configs" not in run.model.model_id
