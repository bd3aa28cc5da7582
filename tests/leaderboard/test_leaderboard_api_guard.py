"""The API's guard: names only (never a server file), typed arguments, one-line refusals."""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile

import gradio as gr
import pytest

from mlenergy.leaderboard import api

estimate = api.endpoint("estimate")(api._estimate_endpoint)


def _refused(call, *args, **kwargs) -> str:
    with pytest.raises(gr.Error) as err:
        call(*args, **kwargs)
    assert err.value.print_exception is False  # no traceback in the server log
    return str(err.value.message)


@pytest.mark.parametrize(
    "name", ["some_file.json ", " some_file.json", "./some_file.json", "some_file"]
)
def test_estimate_never_opens_a_file_named_by_the_client(tmp_path, monkeypatch, name):
    config = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2}
    monkeypatch.chdir(tmp_path)
    (tmp_path / name.strip().removeprefix("./")).write_text(json.dumps(config))
    (tmp_path / name).write_text(json.dumps(config))
    message = _refused(estimate, model=name)
    assert "is not a model id of the reference catalog" in message
    assert str(tmp_path) not in message


def test_estimate_takes_catalog_names_or_an_uploaded_config():
    answer = estimate(model="meta-llama/Llama-3.1-8B-Instruct", gpu="H100-SXM5-80GB")
    assert answer["energy_per_token_j"] > 0
    assert "not a catalog GPU" in _refused(estimate, gpu="../gpus/my.yaml")
    from mlenergy.reference import default_configs_dir

    text = (default_configs_dir() / "meta-llama__Llama-3.1-8B-Instruct.json").read_text()
    uploaded = estimate(model="ignored", config_json=text)
    assert uploaded["energy_per_token_j"] == pytest.approx(answer["energy_per_token_j"])
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert uploaded["model"] == f"uploaded config.json (sha256 {digest})"
    assert tempfile.gettempdir() not in json.dumps(uploaded)  # no server path in the answer
    assert "not a JSON object" in _refused(estimate, config_json="[1, 2]")
    assert "whole number" in _refused(estimate, batch_size="64")


def test_refusals_carry_no_server_path_nor_python_text(caplog):
    assert "<server path>" in str(api.refuse("cannot read /srv/app/data/x.json now").message)
    assert "J/token" in str(api.refuse("energy in J/token").message)

    def broken(x: str = "") -> dict:
        return {}["missing"]

    with caplog.at_level(logging.INFO, logger="mlenergy.leaderboard.api"):
        message = _refused(api.endpoint("broken")(broken), x="y" * 10_000)
    assert message == "/broken could not answer these arguments"
    assert "KeyError" not in message and "missing" not in message
    (record,) = caplog.records
    assert record.exc_info is None and "KeyError" in record.getMessage()
    assert len(record.getMessage()) < 400  # the 10,000-character input is cut short


def test_a_bad_call_is_one_log_line(caplog):
    def table(hardware: list[str] | None = None) -> dict:
        return {"hardware": api.strings_arg("hardware", hardware)}

    guarded = api.endpoint("leaderboard_table")(table)
    with caplog.at_level(logging.INFO, logger="mlenergy.leaderboard.api"):
        message = _refused(guarded, hardware="H100")
    assert message == "hardware must be a list of texts, not text"
    assert len(caplog.records) == 1 and "H100" in caplog.records[0].getMessage()
    assert guarded(hardware=["H100"]) == {"hardware": ("H100",)}


@pytest.mark.parametrize(
    ("check", "value", "why"),
    [
        (lambda v: api.strings_arg("hardware", v), "B200", "must be a list of texts"),
        (lambda v: api.ints_arg("gpus", v, 1, 8), "8", "must be a list of whole numbers"),
        (lambda v: api.ints_arg("gpus", v, 1, 8), [1, "2"], "gpus[1] must be a whole number"),
        (lambda v: api.int_arg("page", v, 1, 10), 0, "page 0 is out of range"),
        (lambda v: api.int_arg("page", v, 1, 10), True, "must be a whole number"),
        (lambda v: api.float_arg("pue", v, 0, 100), float("nan"), "out of range"),
        (lambda v: api.bool_arg("best", v), "false", "must be true or false"),
        (lambda v: api.text_arg("task", v), ["gpqa"], "must be text, not a list"),
    ],
)
def test_each_argument_is_checked_for_its_type(check, value, why):
    assert why in _refused(check, value)
