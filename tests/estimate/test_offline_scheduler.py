"""Offline jobs under vLLM's offline scheduler: default limits, prompt chunks, decoding beside."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlenergy.cli import main
from mlenergy.estimate import estimate
from mlenergy.estimate.batch import estimate_frame
from mlenergy.estimate.coefficients import default_coefficients
from mlenergy.estimate.features import stack
from mlenergy.estimate.offline import predict_offline
from mlenergy.estimate.offline_lengths import ride_tokens, stop_rate
from mlenergy.estimate.offline_scheduler import offline_scheduler
from mlenergy.estimate.serving import ServingSetup
from mlenergy.reference.gpus import resolve_gpu
from mlenergy.testing.estimate_features import prepare

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
KW = dict(model=LLAMA, batch_size=1000, input_tokens=800, output_tokens=200, mode="offline")


@pytest.mark.parametrize(
    ("gpu", "legacy", "budget", "seqs", "chunked"),
    [
        ("H100", False, 16384, 1024, True),
        ("H200", False, 16384, 1024, True),
        ("B200", False, 16384, 1024, True),
        ("A100-SXM4-80GB", False, 8192, 256, True),  # 80 GB, but an A100
        ("A100-SXM4-40GB", False, 8192, 256, True),
        ("A40", False, 8192, 256, True),
        ("H100", True, 16384, 256, False),  # vLLM 0.5.4: whole prompts, decoding paused
    ],
)
def test_defaults_follow_vllm_offline_llm_class(gpu, legacy, budget, seqs, chunked):
    s = offline_scheduler(resolve_gpu(gpu), legacy)
    assert (s.max_num_batched_tokens, s.max_num_seqs, s.chunked_prefill) == (
        budget,
        seqs,
        chunked,
    )


def _ride_numeric(steps: float, out: float, cap: float) -> float:
    """Mean over u in [0, S] of E[min(u, L)], by sampling lengths and a fine grid of u."""
    u = np.linspace(0.0, steps, 4001)
    if np.isnan(cap):
        lengths = np.array([out])
    else:
        lam = stop_rate(np.array([out]), np.array([cap]))[0]
        q = (np.arange(20000) + 0.5) / 20000
        lengths = np.minimum(-np.log1p(-q) / lam, cap) if lam > 0 else np.array([cap])
    return float(np.minimum(u[:, None], lengths[None, :]).mean())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("steps", "out", "cap"),
    [(8, 256, np.nan), (50, 20, np.nan), (60, 100, 100), (30, 100, 1000), (400, 100, 1000)],
)
def test_tokens_decoded_beside_the_prompts_match_a_direct_average(steps, out, cap):
    got = ride_tokens(np.array([float(steps)]), np.array([float(out)]), np.array([cap]))[0]
    assert got == pytest.approx(_ride_numeric(steps, out, cap), rel=0.01)
    assert 0 < got <= min(steps, out)


@pytest.mark.parametrize("gpu", ["A100", "H100", "B200"])
def test_a_prefill_bound_job_is_no_faster_than_the_tensor_peak(configs_dir, gpu):
    spec = resolve_gpu(gpu)
    job = estimate(
        **{**KW, "output_tokens": 4, "input_tokens": 2000},
        gpu=gpu,
        max_num_seqs=64,
        configs_dir=configs_dir,
    )
    flops = 2.0 * (job.active_params - 128256 * 4096) * 1000 * 2000
    peak = (
        spec.bf16_tflops * 1e12 * job.sm_clock_mhz / (spec.spec_clock_mhz or spec.max_sm_clock_mhz)
    )
    assert job.prefill_duration_s > flops / peak
    assert job.prefill_duration_s < 3.0 * flops / peak
    # Four output tokens per request: the job is nearly all prefill.
    assert job.prefill_duration_s > 0.8 * job.request_duration_s


def test_without_max_num_seqs_the_engine_default_limits_a_job(configs_dir):
    a100 = estimate(**KW, gpu="A100", configs_dir=configs_dir)
    assert "vLLM's offline default on A100-SXM4-80GB is 256 sequences" in a100.warning
    at_256 = estimate(**KW, gpu="A100", max_num_seqs=256, configs_dir=configs_dir)
    assert "offline default" not in at_256.warning
    assert a100.throughput_tokens_per_s == pytest.approx(at_256.throughput_tokens_per_s)
    all_at_once = estimate(**KW, gpu="A100", max_num_seqs=1000, configs_dir=configs_dir)
    assert all_at_once.throughput_tokens_per_s != pytest.approx(a100.throughput_tokens_per_s)
    # An H100 takes 1024 at a time: 1000 requests all run together.
    h100 = estimate(**KW, gpu="H100", configs_dir=configs_dir)
    assert "offline default" not in h100.warning
    # Each data-parallel replica is an engine with its own default.
    dp = estimate(
        **{**KW, "batch_size": 4000},
        gpu="A100",
        num_gpus=4,
        data_parallel=4,
        configs_dir=configs_dir,
    )
    assert "256 per replica x 4 sequences at a time" in dp.warning
    assert "run 1024 at a time" in dp.warning


def test_batch_rows_take_the_same_default_and_say_so(configs_dir):
    rows = pd.DataFrame(
        [
            dict(KW, gpu="A100"),
            dict(KW, gpu="A100", max_num_seqs=256),
            dict(KW, gpu="H100"),
            dict(KW, gpu="H100", engine="leaderboard-v2-server"),
        ]
    )
    out = estimate_frame(rows, configs_dir=configs_dir)
    assert (out["error"] == "").all()
    for i, (gpu, kw) in enumerate(
        [
            ("A100", {}),
            ("A100", {"max_num_seqs": 256}),
            ("H100", {}),
            ("H100", {"engine": "leaderboard-v2-server"}),
        ]
    ):
        single = estimate(**KW, gpu=gpu, configs_dir=configs_dir, **kw)
        assert out.loc[i, "throughput_tokens_per_s"] == pytest.approx(
            single.throughput_tokens_per_s, rel=1e-6
        )
        assert out.loc[i, "avg_power_w"] == pytest.approx(single.avg_power_w, rel=1e-6)
        assert out.loc[i, "warning"] == single.warning
    assert "offline default on A100-SXM4-80GB is 256" in out.loc[0, "warning"]
    assert "256 sequences" in out.loc[3, "warning"]  # the 2024 engine: 256 on any GPU


def test_the_2024_engine_prefills_before_it_decodes(configs_dir):
    kw = {**KW, "batch_size": 256, "gpu": "H100", "engine": "leaderboard-v2-server"}
    job = estimate(**kw, configs_dir=configs_dir)
    assert job.request_duration_s == pytest.approx(
        job.prefill_duration_s + 200 * job.itl_s, rel=1e-6
    )
    # The same job's physics with and without chunked prefill: decoding beside the prompt
    # chunks leaves lighter decode steps after them (the same number of steps).
    setup = ServingSetup(batch_size=64, input_tokens=4000, output_tokens=64)
    f = stack([prepare(LLAMA, "H100", setup, configs_dir=configs_dir)[3]])
    nan, budget = np.array([np.nan]), np.array([16384.0])
    c = default_coefficients()
    paused = predict_offline(f, c, nan, None, budget, np.array([False]))
    beside = predict_offline(f, c, nan, None, budget, np.array([True]))
    assert beside.prefill_duration_s[0] > paused.prefill_duration_s[0]  # fuller steps
    assert beside.step_s[0] < paused.step_s[0]
    assert beside.job_duration_s[0] < paused.job_duration_s[0]


def test_serving_prefill_time_is_never_negative_and_large_batches_save(tmp_path, configs_dir):
    # At large batches a step carrying prompts is modelled no longer than a decode-only one
    # (its decode rows share the taller GEMM): the prompts then cost no time, not less.
    for batch in (8, 256, 1400):
        est = estimate(
            model="Qwen/Qwen3-8B",
            gpu="B200",
            batch_size=batch,
            task="lm-arena-chat",
            output_tokens=650,
            configs_dir=configs_dir,
        )
        assert est.prefill_duration_s >= 0
        assert est.breakdown_j_per_token["prefill"] >= 0
    argv = [
        "estimate",
        "--model",
        "Qwen/Qwen3-8B",
        "--gpu",
        "B200",
        "--batch-size",
        "1400",
        "--task",
        "lm-arena-chat",
        "--output-tokens",
        "650",
        "--save",
        "--data-dir",
        str(tmp_path),
        "--configs-dir",
        str(configs_dir),
    ]
    assert main(argv) == 0
