"""What a newcomer tripped on: silent validate, calibrate writing into the package, unknown ids."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import mlenergy.commands.estimate_fit as estimate_fit
import mlenergy.estimate.coefficients as shipped_coefficients
import mlenergy.reference.measurements as measurements
from mlenergy.cli import main
from mlenergy.errors import UserError
from mlenergy.estimate.coefficients import COEFFICIENTS_FILE
from mlenergy.estimate.configs import close_model_ids, resolve_model_config

PACKAGE_COEFFICIENTS = Path(shipped_coefficients.__file__).parent / COEFFICIENTS_FILE


@pytest.fixture
def small_reference(monkeypatch):
    """``validate`` on every 12th v3 row (a few seconds instead of minutes)."""
    full = measurements.load_reference(include_v2=False)
    sample = full.iloc[::12].reset_index(drop=True)
    for module in (measurements, estimate_fit):  # the reader, and the command that calls it
        monkeypatch.setattr(module, "load_reference", lambda *a, **k: sample.copy())
    return sample


def test_unknown_id_suggests_the_shipped_name(capsys, configs_dir):
    argv = ["estimate", "--model", "deepseek-ai/DeepSeek-R1", "--gpu", "H100", "--batch-size", "8"]
    assert main([*argv, "--output-tokens", "64"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err
    assert "Did you mean deepseek-ai/DeepSeek-R1-0528" in err


def test_close_ids_put_a_longer_shipped_id_first(configs_dir):
    assert close_model_ids("deepseek-ai/DeepSeek-R1", configs_dir)[0] == (
        "deepseek-ai/DeepSeek-R1-0528"
    )
    # letter case and a missing organisation still find it
    assert "deepseek-ai/DeepSeek-R1-0528" in close_model_ids("deepseek-r1", configs_dir)
    assert "Qwen/Qwen3-32B" in close_model_ids("Qwen/Qwen3-33B", configs_dir)
    assert close_model_ids("foo/bar-baz", configs_dir) == []


def test_an_id_with_nothing_close_suggests_nothing(configs_dir):
    with pytest.raises(UserError) as info:
        resolve_model_config("foo/bar-baz", configs_dir)
    assert "Did you mean" not in info.value.message


def test_calibrate_needs_out_and_leaves_the_package_file_alone(capsys):
    before = hashlib.sha256(PACKAGE_COEFFICIENTS.read_bytes()).hexdigest()
    assert main(["estimate", "calibrate", "--folds", "0", "--no-v2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out is required") and "--coefficients" in err
    assert hashlib.sha256(PACKAGE_COEFFICIENTS.read_bytes()).hexdigest() == before


@pytest.mark.slow
def test_calibrated_coefficients_load_only_when_named(tmp_path, capsys, configs_dir):
    out = tmp_path / "mine.json"
    assert main(["estimate", "calibrate", "--out", str(out), "--folds", "0", "--no-v2"]) == 0
    assert f"--coefficients {out}" in capsys.readouterr().out
    args = ["estimate", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--batch-size", "8"]
    args += ["--output-tokens", "64", "--json"]
    data = json.loads(out.read_text())
    data["eta_mem"] = 0.5 * data["eta_mem"]
    out.write_text(json.dumps(data))
    assert main(args) == 0
    shipped = capsys.readouterr().out
    assert main([*args, "--coefficients", str(out)]) == 0
    assert capsys.readouterr().out != shipped  # the named file was used, the default was not


@pytest.mark.slow
def test_validate_shows_progress_on_stderr(capsys, small_reference, configs_dir):
    assert main(["estimate", "validate", "--folds", "2", "--no-v2"]) == 0
    captured = capsys.readouterr()
    assert "cross-validating (architecture held out)" in captured.err
    assert "2/2" in captured.err
    assert "cross-validating" not in captured.out


@pytest.mark.slow
def test_validate_markdown_names_its_command(capsys, small_reference, configs_dir):
    argv = ["estimate", "validate", "--folds", "2", "--no-v2", "--hold-out", "gpu"]
    assert main([*argv, "--markdown"]) == 0
    text = capsys.readouterr().out
    first = text.splitlines()[0]
    assert first.startswith(
        "Printed by `mlenergy estimate validate --hold-out gpu --folds 2 --no-v2 --markdown`"
    )
    assert "| overall | rows | energy median % | energy p90 %" in text
    assert "**By gpu**" in text and "| B200 |" in text
    assert "- energy_median[held-out gpu=B200]" in text
    rows = first.split("folds, ")[1].split(" rows")[0]
    assert f"| all | {rows} |" in text and 0 < int(rows) <= len(small_reference)
