"""The batch CSV contract: columns, per-row errors, agreement with single estimates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlenergy.estimate import estimate
from mlenergy.estimate.batch import INPUT_COLUMNS, OUTPUT_COLUMNS, estimate_csv, estimate_frame

ROWS = [
    # model, gpu, num_gpus, tp, ep, dp, pp, precision, task, batch, max_seqs, in, out
    (
        "meta-llama/Llama-3.1-8B-Instruct",
        "H100",
        1,
        1,
        1,
        1,
        "",
        "bfloat16",
        "lm-arena-chat",
        64,
        64,
        "",
        400,
    ),
    ("meta-llama/Llama-3.1-8B-Instruct-FP8", "B200", 1, 1, 1, 1, 1, "fp8", "", 64, 64, 512, 400),
    (
        "Qwen/Qwen3-30B-A3B-Instruct-2507",
        "H100",
        2,
        1,
        2,
        1,
        1,
        "bfloat16",
        "gpqa",
        64,
        64,
        "",
        8000,
    ),
    ("foo/bar", "H100", 1, 1, 1, 1, 1, "bfloat16", "", 8, 8, 100, 100),
    ("meta-llama/Llama-3.1-8B-Instruct", "H999", 1, 1, 1, 1, 1, "bfloat16", "", 8, 8, 100, 100),
    ("meta-llama/Llama-3.1-8B-Instruct", "H100", 3, 3, 1, 1, 1, "bfloat16", "", 8, 8, 100, 100),
    (
        "meta-llama/Llama-3.1-8B-Instruct",
        "H100",
        1,
        1,
        1,
        1,
        1,
        "bfloat16",
        "",
        1e5,
        1e5,
        1000,
        1000,
    ),
    ("meta-llama/Llama-3.1-8B-Instruct", "H100", 1, 1, 1, 1, 1, "bfloat16", "", 8, 8, -5, 100),
    ("openai/gpt-oss-120b", "H100-SXM5-80GB", 1, 1, 1, 1, 1, "mxfp4", "gpqa", 64, 64, "", 1700),
    ("deepseek-ai/DeepSeek-V3.1", "B200", 8, 1, 8, 1, 1, "fp8", "gpqa", 64, 64, "", 9000),
    ("meta-llama/Llama-3.1-8B-Instruct", "H100", 1, 1, 1, 1, 1, "bfloat16", "", "abc", 8, 1, 1),
    (
        "meta-llama/Llama-3.1-8B-Instruct",
        "H100",
        1,
        1,
        1,
        1,
        1,
        "bfloat16",
        "",
        16,
        8,
        100,
        100,
    ),
]


@pytest.fixture
def batch_csv(tmp_path, configs_dir):
    df = pd.DataFrame(ROWS, columns=INPUT_COLUMNS)
    path = tmp_path / "in.csv"
    df.to_csv(path, index=False)
    return path


def test_batch_contract(batch_csv, tmp_path, configs_dir):
    out = tmp_path / "out.csv"
    res = estimate_csv(batch_csv, out, configs_dir)
    back = pd.read_csv(out, keep_default_na=False)
    assert list(back.columns) == [*INPUT_COLUMNS, *OUTPUT_COLUMNS, "error", "warning"]
    assert len(back) == len(ROWS)
    err = res["error"].tolist()
    assert err[0] == err[1] == err[2] == err[8] == err[9] == ""
    assert "foo__bar.json" in err[3]
    assert "unknown gpu 'H999'" in err[4]
    assert "tensor_parallel (3) does not divide num_attention_heads (32)" in err[5]
    assert "does not fit" in err[6]
    assert "input_tokens" in err[7]
    assert "batch_size" in err[10]
    assert "exceeds max_num_seqs" in err[11]
    good = res["error"] == ""
    assert res.loc[good, "energy_per_token_j"].gt(0).all()
    assert (res.loc[good, "energy_per_token_j_lo"] < res.loc[good, "energy_per_token_j"]).all()
    assert (res.loc[good, "energy_per_token_j_hi"] > res.loc[good, "energy_per_token_j"]).all()
    assert res.loc[~good, "energy_per_token_j"].isna().all()
    assert (res.loc[~good, "warning"] == "").all()


def test_batch_matches_single_estimates(configs_dir):
    df = pd.DataFrame(ROWS[:3] + ROWS[8:10], columns=INPUT_COLUMNS)
    res = estimate_frame(df.astype(str), configs_dir)
    for row, got in zip(df.itertuples(index=False), res.itertuples(index=False), strict=True):
        single = estimate(
            row.model,
            row.gpu,
            batch_size=float(row.batch_size),
            output_tokens=float(row.output_tokens),
            input_tokens=None if row.input_tokens == "" else float(row.input_tokens),
            task=row.task or None,
            precision=row.precision,
            num_gpus=int(row.num_gpus),
            tensor_parallel=int(row.tensor_parallel),
            expert_parallel=int(row.expert_parallel),
            data_parallel=int(row.data_parallel),
            max_num_seqs=int(row.max_num_seqs),
            configs_dir=configs_dir,
        )
        assert got.energy_per_token_j == pytest.approx(single.energy_per_token_j, rel=1e-9)
        assert got.avg_power_w == pytest.approx(single.avg_power_w, rel=1e-9)
        assert got.warning == single.warning


def test_batch_counts_visual_tokens_as_single_estimates(configs_dir):
    kw = dict(batch_size=64, output_tokens=400, num_gpus=2, tensor_parallel=2)
    tasks = ["video-chat", "image-chat", "lm-arena-chat"]
    df = pd.DataFrame(
        {"model": "Qwen/Qwen3-VL-32B-Instruct", "gpu": "H100", "task": tasks}
        | {k: [v] * 3 for k, v in kw.items()}
    )
    res = estimate_frame(df, configs_dir)
    thr = []
    for task, got in zip(tasks, res.itertuples(index=False), strict=True):
        single = estimate(
            "Qwen/Qwen3-VL-32B-Instruct", "H100", task=task, configs_dir=configs_dir, **kw
        )
        assert got.throughput_tokens_per_s == pytest.approx(
            single.throughput_tokens_per_s, rel=1e-9
        )
        assert got.avg_power_w == pytest.approx(single.avg_power_w, rel=1e-9)
        thr.append(got.throughput_tokens_per_s)
    assert thr[0] < thr[1] < thr[2]


def test_batch_vectorised_scale(configs_dir):
    df = pd.DataFrame([ROWS[0]] * 2000, columns=INPUT_COLUMNS)
    df["batch_size"] = np.linspace(1, 256, len(df))
    df["max_num_seqs"] = 256
    res = estimate_frame(df, configs_dir)
    assert (res["error"] == "").all()
    assert res["energy_per_token_j"].is_monotonic_decreasing


def test_missing_required_column(tmp_path):
    from mlenergy.errors import UserError

    with pytest.raises(UserError, match="gpu"):
        estimate_frame(pd.DataFrame({"model": ["x"], "batch_size": [1], "output_tokens": [1]}))
