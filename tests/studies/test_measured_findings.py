"""The measured study's headlines: host-bound runs marked, with and without them; fits with the
deployment's size; exact output lengths; settings stated."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from mlenergy.analysis.model_ids import precision_base
from mlenergy.studies.measured import measured_frame
from mlenergy.studies.measured_analysis import adjusted_r2, parameter_fits
from mlenergy.studies.measured_headline import terminal_lines

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does


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


def test_adjusted_r2_and_both_single_fits_with_their_separation():
    rng = np.random.default_rng(1)
    pts = []
    for i in range(12):  # energy follows parameters exactly; GPU count is unrelated to both
        params, gpus = 1e9 * 2.0 ** (i / 2), [1, 8, 2, 4][i % 4]
        pts.append((f"org/m{i}", params, gpus, 1e-11 * params * float(rng.uniform(0.98, 1.02))))
    row = parameter_fits(_rows(pts)).query("family == 'all' and predictor == 'total'").iloc[0]
    n, r2 = row["points"], row["r2_gpus_alone"]
    assert n == 12 and row["adj_r2_gpus_alone"] == pytest.approx(1 - (1 - r2) * (n - 1) / (n - 2))
    assert row["adj_r2_params_alone"] > 0.99 > row["adj_r2_gpus_alone"]
    assert row["params_ahead_share"] == 1.0 and row["separated"]
    assert adjusted_r2(0.5, 3, 2) != adjusted_r2(0.5, 3, 2)  # n <= k + 1: NaN


def test_collinear_regressors_are_not_separated():
    # GPU count doubles with parameters; energy follows both with noise: neither is ahead.
    rng = np.random.default_rng(2)
    pts = [(f"org/m{i}", 1e9 * 2.0**i * float(rng.uniform(0.7, 1.4)), 2**i,
            0.1 * 1.5**i * float(rng.uniform(0.7, 1.4))) for i in range(6)]  # fmt: skip
    row = parameter_fits(_rows(pts)).query("predictor == 'total'").iloc[0]
    assert row["corr_params_gpus"] > 0.95
    assert 0.025 < row["params_ahead_share"] < 0.975 and not row["separated"]


def test_the_terminal_gets_the_findings_in_a_few_lines(reference_study):
    lines = terminal_lines(reference_study)
    assert len(lines) <= 12 and all(len(x) < 260 for x in lines)
    text = "\n".join(lines)
    assert "gpqa on H100-SXM5-80GB: best MoE / best dense energy per correct answer 0.10" in text
    assert "the data cannot separate them in 8 of 8 groups" in text
    assert str(reference_study.report_path) in lines[-1]
    assert "Quality was not measured" not in text  # the prose is in the report


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
    assert "one regressor at a time" in fit and "adjusted R^2" in fit
    assert "lm-arena-chat/H100-SXM5-80GB (n = 11 models" in fit
    assert "BF16/FP8 copies of a model merged" in fit
    assert "In 8 of 8 groups the data cannot separate" in fit
    assert "follows the deployment's GPU count" not in fit
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
