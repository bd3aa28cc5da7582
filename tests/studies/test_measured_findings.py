"""The measured study's headlines: host-bound runs marked, with and without them; fits with the
deployment's size; exact output lengths; settings stated."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from mlenergy.analysis.model_ids import precision_base
from mlenergy.studies.measured import measured_frame
from mlenergy.studies.measured_analysis import parameter_fits


def test_host_bound_runs_are_marked_and_named(reference_study):
    r = reference_study
    flagged = r.configs[r.configs["host_bound"]]
    assert len(flagged) > 0
    # The rule: one B200 with gpqa, image-chat or video-chat; nothing else.
    assert (flagged["gpu"] == "B200").all() and (flagged["num_gpus"] == 1).all()
    assert set(flagged["task"]) <= {"gpqa", "image-chat", "video-chat"}
    others = r.configs[~r.configs["host_bound"]]
    assert not (
        (others["gpu"] == "B200") & (others["num_gpus"] == 1) & (others["task"] == "gpqa")
    ).any()
    first = r.conclusion[0]
    assert first.startswith("Host-bound runs:") and "Qwen3-8B" in first
    assert "host_bound.py" in first and "W per GPU" in first
    page = (r.report_dir / "index.html").read_text()
    assert 'id="stalled"' in page and "host-bound (stalled)" in page


def test_every_stalled_headline_comes_with_and_without_them(reference_study):
    r = reference_study
    b200 = next(p for p in r.conclusion if p.startswith("gpqa on B200"))
    assert "Best MoE / best dense = 0.05" in b200
    assert "Without the host-bound runs:" in b200
    # Without them no dense model keeps a configuration on B200 gpqa: the ratio is not claimed.
    after = b200.split("Without the host-bound runs:")[1]
    assert "Best MoE / best dense" not in after and "cannot compare" in after
    h100 = next(p for p in r.conclusion if p.startswith("gpqa on H100"))
    assert "Best MoE / best dense = 0.10" in h100 and "Without" not in h100
    clean = r.unstalled.rows
    flagged_ids = set(r.configs.loc[r.configs["host_bound"], "run_id"])
    assert not set(clean.loc[clean["configuration"] != "", "run_id"]) & flagged_ids
    assert set(r.rows["run_id"]) & flagged_ids  # with them, some headline rests on them


def test_energy_per_response_uses_the_exact_mean_output_length(reference_study):
    c = reference_study.configs
    v3 = pd.read_csv(
        __import__("mlenergy.reference", fromlist=["reference_dir"]).reference_dir()
        / "mlenergy-leaderboard"
        / "v3_llm.csv"
    )
    lengths = set(v3["avg_output_len"].round(6))
    assert (c["mean_output_tokens"] != c["mean_output_tokens"].round()).any()
    assert set(c["mean_output_tokens"].round(6)) <= lengths
    np.testing.assert_allclose(
        c["energy_per_response_j"], c["energy_per_token_j"] * c["mean_output_tokens"]
    )


def test_v2_latency_is_labelled_mean_time_per_output_token():
    from mlenergy.reference.runs import read_reference

    frame = measured_frame(read_reference(), include_legacy=True)
    v2 = frame[frame["measured_by"] == "ML.ENERGY Leaderboard v2"]
    assert len(v2) and (v2["latency_kind"] == "mean time per output token").all()
    assert (frame.loc[frame["measured_by"] != "ML.ENERGY Leaderboard v2", "latency_kind"]
            == "median ITL").all()  # fmt: skip


def _rows(points):
    return pd.DataFrame(
        [
            {"task": "t", "gpu": "G", "arch": "dense", "model_id": mid, "total_params": p,
             "active_params": p, "num_gpus": g, "energy_per_token_j": e}
            for mid, p, g, e in points
        ]
    )  # fmt: skip


def test_fit_gives_gpu_count_its_own_term():
    # Energy per token follows GPU count exactly; parameters add nothing beyond it.
    rng = np.random.default_rng(0)
    pts = []
    for i, g in enumerate([1, 1, 2, 2, 4, 4, 8, 8]):
        params = 1e9 * g * float(rng.uniform(0.5, 2.0))
        pts.append((f"org/m{i}", params, g, 0.1 * g))
    fits = parameter_fits(_rows(pts))
    row = fits[(fits["family"] == "all") & (fits["predictor"] == "total")].iloc[0]
    assert row["r2_gpus_alone"] == pytest.approx(1.0)
    assert row["r2_both"] == pytest.approx(1.0)
    assert row["params_beyond_gpus"] == pytest.approx(0.0, abs=1e-9)
    assert row["slope_params"] == pytest.approx(0.0, abs=1e-9)
    assert row["slope_gpus"] == pytest.approx(1.0)
    assert 0 < row["r2_params_alone"] < 1 and row["corr_params_gpus"] > 0.5


def test_precision_copies_are_one_point():
    pts = [("org/a", 1e9, 1, 0.1), ("org/a-FP8", 1e9, 1, 0.08), ("org/b", 4e9, 2, 0.3),
           ("org/c", 16e9, 4, 0.9), ("org/d", 64e9, 8, 2.0)]  # fmt: skip
    row = parameter_fits(_rows(pts)).iloc[0]
    assert row["points"] == 4 and row["model_ids"] == 5
    assert precision_base("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8") == (
        "Qwen/Qwen3-235B-A22B-Instruct-2507"
    )
    assert precision_base("meta-llama/Llama-3.1-405B-Instruct-FP8") == (
        "meta-llama/Llama-3.1-405B-Instruct"
    )


def test_fit_conclusion_words_what_the_fit_shows(reference_study):
    fit = next(p for p in reference_study.conclusion if p.startswith("Energy per token against"))
    assert "GPU count alone explains" in fit and "beyond GPU count" in fit
    assert "BF16/FP8 copies of a model merged" in fit
    assert "better than" not in fit
    chat = reference_study.fits[
        (reference_study.fits["task"] == "lm-arena-chat")
        & (reference_study.fits["family"] == "all")
    ]
    assert (chat["points"] < chat["model_ids"]).all()  # FP8 copies merged
    assert chat["corr_params_gpus"].between(-1, 1).all()
    assert not math.isnan(float(chat["r2_both"].iloc[0]))


def test_settings_stated(reference_study):
    rows = reference_study.rows
    oss = rows[(rows["model_id"] == "openai/gpt-oss-120b") & (rows["task"] == "gpqa")].iloc[0]
    assert "reasoning_effort: medium" in oss["quality_how"]
    assert "states none" not in oss["quality_how"]
    assert any("temperature 0.8, top-p 0.95" in p for p in reference_study.conclusion)
