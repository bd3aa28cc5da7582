"""The serving engine as an input: explicit, from the task, in the single and batch paths."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mlenergy.errors import UserError
from mlenergy.estimate import estimate
from mlenergy.estimate.batch import estimate_frame
from mlenergy.estimate.engines import (
    CURRENT_ENGINE,
    LEGACY_ENGINE,
    canonical_task,
    resolve_engine,
)
from mlenergy.estimate.task_defaults import task_input_tokens


def test_engine_from_task_and_override():
    assert resolve_engine(None, None) == CURRENT_ENGINE
    assert resolve_engine("", "lm-arena-chat") == CURRENT_ENGINE
    assert resolve_engine("", "sharegpt-chat") == LEGACY_ENGINE
    assert resolve_engine(None, " llm_text_generation/code ") == LEGACY_ENGINE
    assert resolve_engine("vllm-0.11.1", "code") == CURRENT_ENGINE  # explicit wins
    assert resolve_engine("VLLM-0.5.4", "gpqa") == LEGACY_ENGINE
    with pytest.raises(UserError, match="unknown engine 'tgi'"):
        resolve_engine("tgi", None)


def test_raw_v2_task_labels_take_their_task_defaults():
    assert canonical_task("llm_text_generation/chat") == "sharegpt-chat"
    assert task_input_tokens("llm_text_generation/code") == task_input_tokens("code")
    assert canonical_task("  GPQA ") == "gpqa"
    assert task_input_tokens("Sourcegraph-FIM") == task_input_tokens("sourcegraph-fim")
    assert canonical_task("Chat") == "sharegpt-chat"  # the v2 leaderboard's task name


def test_legacy_engine_is_slower_single_path(tiny_config):
    kw = dict(batch_size=64, input_tokens=256, output_tokens=256)
    new = estimate(str(tiny_config), "H100", **kw)
    old = estimate(str(tiny_config), "H100", engine="vllm-0.5", **kw)
    by_task = estimate(str(tiny_config), "H100", task="sharegpt-chat", **kw)
    assert new.engine == CURRENT_ENGINE and old.engine == LEGACY_ENGINE
    assert by_task.engine == LEGACY_ENGINE
    assert "engine leaderboard-v2-server (the setup task 'sharegpt-chat'" in by_task.warning
    assert old.warning.startswith("engine 'vllm-0.5' is read as leaderboard-v2-server")
    assert "not any job run with vLLM 0.5.4" in old.warning
    named = estimate(str(tiny_config), "H100", engine=LEGACY_ENGINE, **kw)
    assert named.warning == ""  # the profile's own name needs no caveat
    assert old.throughput_tokens_per_s < 0.8 * new.throughput_tokens_per_s
    assert by_task.throughput_tokens_per_s == pytest.approx(old.throughput_tokens_per_s)


def test_batch_engine_column(tiny_config):
    rows = pd.DataFrame(
        {
            "model": [str(tiny_config)] * 4,
            "gpu": ["H100"] * 4,
            "task": ["lm-arena-chat", "code", "code", ""],
            "engine": ["", "", "vllm-0.11", "sglang"],
            "batch_size": ["64"] * 4,
            "input_tokens": ["256"] * 4,
            "output_tokens": ["256"] * 4,
        }
    )
    out = estimate_frame(rows)
    assert list(out["error"][:3]) == ["", "", ""]
    assert out["warning"][1].startswith("engine leaderboard-v2-server (the setup task 'code'")
    assert out["warning"][2].startswith("engine 'vllm-0.11' is read as leaderboard-v3-server")
    assert "unknown engine 'sglang'" in out["error"][3]
    thr = out["throughput_tokens_per_s"].to_numpy()
    assert thr[1] < 0.8 * thr[0]
    assert thr[2] == pytest.approx(thr[0])


def test_version_alias_warns_that_an_offline_job_can_run_faster(tiny_config):
    kw = dict(batch_size=64, input_tokens=256, output_tokens=256)
    job = estimate(str(tiny_config), "H100", engine="vllm-0.5", mode="offline", **kw)
    assert "an offline job has no API server in front" in job.warning
    served = estimate(str(tiny_config), "H100", engine="vllm-0.5", **kw)
    assert "offline" not in served.warning
    rows = pd.DataFrame(
        {
            "model": [str(tiny_config)] * 2,
            "gpu": ["H100"] * 2,
            "engine": ["vllm-0.5.4", "vllm-0.5.4"],
            "mode": ["offline", "serving"],
            "batch_size": ["64"] * 2,
            "output_tokens": ["256"] * 2,
        }
    )
    out = estimate_frame(rows)
    assert list(out["error"]) == ["", ""]
    assert "an offline job has no API server in front" in out["warning"][0]
    assert "offline" not in out["warning"][1]
    assert out["warning"][1].startswith("engine 'vllm-0.5.4' is read as leaderboard-v2-server")


def test_batch_v2_rows_match_calibration_features(configs_dir):
    """v2 rows given as batch rows with their raw task labels are predicted as in the fit."""
    from mlenergy.calibrate.calibration import featurise
    from mlenergy.estimate.coefficients import default_coefficients
    from mlenergy.estimate.physics import predict
    from mlenergy.reference.measurements import load_reference

    ref = load_reference()
    v2 = ref[ref["legacy"].astype(bool)].head(40).reset_index(drop=True)
    raw = {"sharegpt-chat": "llm_text_generation/chat", "code": "llm_text_generation/code"}
    batch = pd.DataFrame(
        {
            "model": v2["model_id"],
            "gpu": "NVIDIA H100 80GB HBM3",
            "num_gpus": v2["num_gpus"],
            "tensor_parallel": v2["tensor_parallel"],
            "pipeline_parallel": v2["pipeline_parallel"],
            "task": v2["task"].map(raw),
            "batch_size": v2["batch_size"],
            "max_num_seqs": v2["max_num_seqs"],
            "output_tokens": v2["output_tokens"],
        }
    ).astype(str)
    out = estimate_frame(batch, configs_dir)
    assert (out["error"] == "").all(), out["error"].unique()
    assert out["warning"].str.startswith(f"engine {LEGACY_ENGINE}").all()
    feats, _ = featurise(v2, configs_dir)
    fitted = predict(feats, default_coefficients())
    np.testing.assert_allclose(
        out["throughput_tokens_per_s"], fitted.throughput_tokens_per_s, rtol=1e-6
    )


def test_profiles_are_named_for_their_setup_and_old_names_still_work():
    from mlenergy.estimate.engines import PROFILES

    assert [p.name for p in PROFILES] == ["leaderboard-v3-server", "leaderboard-v2-server"]
    assert (
        resolve_engine("vllm-0.5", None) == resolve_engine("leaderboard-v2-server") == LEGACY_ENGINE
    )
    assert resolve_engine("vllm-0.11", None) == CURRENT_ENGINE == "leaderboard-v3-server"
    with pytest.raises(UserError, match="leaderboard-v3-server, leaderboard-v2-server"):
        resolve_engine("sglang")


def test_engines_command_lists_what_each_profile_includes(capsys):
    from mlenergy.cli import main

    assert main(["estimate", "engines"]) == 0
    out = capsys.readouterr().out
    assert "leaderboard-v3-server (default):" in out and "vLLM 0.11.1" in out
    assert "not vLLM 0.5 in general" in out
    assert "top-p 0.95 at temperature 0.8" in out  # the v3 campaign's sampling, a per-seq cost
    assert "an estimate given one says so in its warning" in out
    assert main(["estimate", "engines", "--json"]) == 0
    names = [p["name"] for p in json.loads(capsys.readouterr().out)]
    assert names == ["leaderboard-v3-server", "leaderboard-v2-server"]
