"""Offline batch jobs: a fixed set of requests, the batch shrinking as sequences end."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlenergy.cli import main
from mlenergy.errors import UserError
from mlenergy.estimate import estimate
from mlenergy.estimate.batch import estimate_frame
from mlenergy.estimate.coefficients import default_coefficients
from mlenergy.estimate.features import stack
from mlenergy.estimate.offline_lengths import decode_segments, stop_rate
from mlenergy.estimate.physics import JobStep, predict
from mlenergy.estimate.serving import ServingSetup
from mlenergy.testing.estimate_features import prepare

LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
KW = dict(model=LLAMA, gpu="H100", batch_size=256, input_tokens=512, output_tokens=256)


def test_segments_keep_the_mean_output_length():
    o = np.array([256.0, 256.0, 256.0, 40.0])
    cap = np.array([np.nan, 256.0, 1024.0, 4096.0])
    alive, steps, position = decode_segments(o, cap)
    assert (alive * steps).sum(axis=1) == pytest.approx(o, rel=1e-6)
    assert alive[0].tolist() == pytest.approx([1.0] * alive.shape[1])  # no cap: all decode O
    assert alive[1].tolist() == pytest.approx([1.0] * alive.shape[1])  # cap = mean: all run to it
    assert np.all(np.diff(alive[2]) < 0)  # with a higher cap the batch shrinks
    assert position[2, -1] < 1024 and steps[2].sum() == pytest.approx(1024)
    assert stop_rate(np.array([256.0]), np.array([256.0]))[0] == 0.0


def test_offline_prefill_is_bound_by_the_prompts_flops(configs_dir):
    serving = estimate(**KW, configs_dir=configs_dir)
    job = estimate(**KW, mode="offline", configs_dir=configs_dir)
    assert job.mode == "offline" and serving.mode == "serving"
    # 256 prompts of 512 tokens in chunks of 16,384 tokens (vLLM's offline budget on an
    # H100): no faster than 2 FLOPs per weight per prompt token at the tensor peak, at the
    # 1980 MHz clock (the datasheet figure holds at 1830 MHz).
    peak = 989.4e12 * 1980 / 1830
    flops = 2.0 * serving_params(job) * 256 * 512
    assert flops / peak < job.prefill_duration_s < 2.0 * flops / peak
    # In serving the prompts ride in steps bound by weight reads and partly hide there; in
    # one job they come all at once, compute-bound: slower, by less than the whole prefill.
    serving_s = 256 * 256 / serving.throughput_tokens_per_s
    assert serving_s < job.request_duration_s < serving_s + job.prefill_duration_s
    assert job.request_duration_s == pytest.approx(
        256 * 256 / job.throughput_tokens_per_s, rel=1e-6
    )


def serving_params(est) -> float:
    """Weights that multiply every prompt token (all but the input embedding table)."""
    return est.active_params - 128256 * 4096


def test_a_cap_above_the_mean_leaves_a_shrinking_batch(configs_dir):
    even = estimate(**KW, mode="offline", configs_dir=configs_dir)
    capped = estimate(**KW, mode="offline", max_output_tokens=1024, configs_dir=configs_dir)
    at_cap = estimate(**KW, mode="offline", max_output_tokens=256, configs_dir=configs_dir)
    assert capped.throughput_tokens_per_s < 0.8 * even.throughput_tokens_per_s
    assert capped.energy_per_token_j > even.energy_per_token_j
    assert capped.request_duration_s > even.request_duration_s
    assert at_cap.energy_per_token_j == pytest.approx(even.energy_per_token_j)
    assert sum(capped.breakdown_j_per_token[k] for k in ("prefill", "decode")) == pytest.approx(
        capped.energy_per_token_j
    )
    parts = ("compute", "memory", "static_idle", "overhead")
    assert sum(capped.breakdown_j_per_token[k] for k in parts) == pytest.approx(
        capped.energy_per_token_j, rel=1e-6
    )


def test_pipeline_without_micro_batching_runs_one_stage_at_a_time(configs_dir):
    kw = {**KW, "model": "meta-llama/Llama-3.1-70B-Instruct", "pipeline_parallel": 4}
    serving = estimate(**kw, configs_dir=configs_dir)
    job = estimate(**kw, mode="offline", configs_dir=configs_dir)
    # One job without micro-batches runs each decode step through the four stages one after
    # the other: four times a stage's decode step (at the same mean context; a little less,
    # as the sequences decoded a few tokens beside the prompts of the last chunks).
    setup = ServingSetup(
        batch_size=256, input_tokens=512, output_tokens=256, num_gpus=4, pipeline_parallel=4
    )
    feats = prepare(kw["model"], "H100", setup, configs_dir=configs_dir)[3]
    stage_step = predict(stack([feats]), default_coefficients()).decode_step_s[0]
    assert job.itl_s == pytest.approx(4 * stage_step, rel=0.03)
    assert job.avg_power_w < serving.avg_power_w  # three of four GPUs wait at any time


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        (dict(mode="nightly"), "mode must be serving or offline, got 'nightly'"),
        (dict(mode="offline", max_output_tokens=100), "max_output_tokens (100) is below"),
        (dict(max_output_tokens=1024), "max_output_tokens applies to mode offline only"),
        (dict(mode="offline", max_output_tokens="lots"), "max_output_tokens is not a number"),
    ],
)
def test_bad_mode_or_cap_names_the_field(configs_dir, kw, fragment):
    with pytest.raises(UserError) as err:
        estimate(**KW, configs_dir=configs_dir, **kw)
    assert fragment in str(err.value)


def test_batch_rows_pick_their_mode(configs_dir):
    rows = pd.DataFrame(
        {
            "model": [LLAMA] * 6,
            "gpu": ["H100"] * 6,
            "batch_size": [256] * 6,
            "input_tokens": [512] * 6,
            "output_tokens": [256] * 6,
            "mode": ["", "offline", "OFFLINE", "nightly", "", "offline"],
            "max_output_tokens": ["", "1024", "", "", "1024", "100"],
        }
    )
    out = estimate_frame(rows, configs_dir)
    assert out["error"].tolist()[:3] == ["", "", ""]
    assert "mode must be serving or offline" in out["error"][3]
    assert "applies to mode offline only" in out["error"][4]
    assert "is below output_tokens" in out["error"][5]
    single = estimate(**KW, mode="offline", max_output_tokens=1024, configs_dir=configs_dir)
    assert out["throughput_tokens_per_s"][1] == pytest.approx(single.throughput_tokens_per_s)
    assert out["energy_per_token_j"][1] == pytest.approx(single.energy_per_token_j)
    plain = estimate_frame(rows.drop(columns=["mode", "max_output_tokens"]).iloc[:1], configs_dir)
    assert out["energy_per_token_j"][0] == pytest.approx(plain["energy_per_token_j"][0])


def test_cli_offline_and_its_errors(capsys, configs_dir):
    base = ["estimate", "--model", LLAMA, "--gpu", "H100", "--batch-size", "64"]
    base += ["--input-tokens", "512", "--output-tokens", "256", "--configs-dir", str(configs_dir)]
    assert main([*base, "--mode", "offline", "--max-output-tokens", "1024"]) == 0
    assert "offline job of 64 requests, cap 1024 tokens" in capsys.readouterr().out
    assert main([*base, "--mode", "offline", "--max-output-tokens", "10"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "max_output_tokens (10) is below" in err[0]


def test_a_saved_offline_estimate_says_so(configs_dir):
    from mlenergy.estimate.to_record import to_run_record

    job = estimate(**KW, mode="offline", max_output_tokens=1024, configs_dir=configs_dir)
    rec = to_run_record(job, configs_dir)
    assert rec.tags["mode"] == "offline" and rec.tags["max_output_tokens"] == "1024"
    request = next(p for p in rec.phases if p.phase == "request")
    assert request.duration_s == pytest.approx(job.request_duration_s)
    assert request.throughput_tokens_per_s == pytest.approx(job.throughput_tokens_per_s)
    assert "mode" not in to_run_record(estimate(**KW, configs_dir=configs_dir), configs_dir).tags
    queued = estimate(**KW, mode="offline", max_num_seqs=64, configs_dir=configs_dir)
    rec = to_run_record(queued, configs_dir)
    assert rec.workload.max_num_seqs == 64 and rec.workload.num_requests == 256


def test_requests_beyond_max_num_seqs_queue_at_the_cap(configs_dir):
    at_cap = estimate(**{**KW, "batch_size": 64}, mode="offline", configs_dir=configs_dir)
    serving = estimate(**{**KW, "batch_size": 64}, configs_dir=configs_dir)
    queued = estimate(**KW, mode="offline", max_num_seqs=64, configs_dir=configs_dir)
    long_queue = estimate(
        **{**KW, "batch_size": 6400}, mode="offline", max_num_seqs=64, configs_dir=configs_dir
    )
    # 256 requests, 64 at a time: no faster than 64 together, and no faster than serving.
    assert queued.throughput_tokens_per_s < 1.01 * max(
        at_cap.throughput_tokens_per_s, serving.throughput_tokens_per_s
    )
    assert queued.request_duration_s == pytest.approx(
        256 * 256 / queued.throughput_tokens_per_s, rel=1e-6
    )
    # Equal lengths: waves of 64 started together, each costing what one such job costs.
    assert long_queue.throughput_tokens_per_s == pytest.approx(
        at_cap.throughput_tokens_per_s, rel=1e-6
    )
    assert long_queue.avg_power_w == pytest.approx(at_cap.avg_power_w, rel=1e-6)
    assert long_queue.request_duration_s == pytest.approx(100 * at_cap.request_duration_s)
    assert long_queue.batch_size == 6400
    # A last, part-filled wave decodes as long as a full one with fewer sequences.
    one_more = estimate(
        **{**KW, "batch_size": 6401}, mode="offline", max_num_seqs=64, configs_dir=configs_dir
    )
    lone = estimate(**{**KW, "batch_size": 1}, mode="offline", configs_dir=configs_dir)
    assert one_more.request_duration_s == pytest.approx(
        long_queue.request_duration_s + lone.request_duration_s, rel=1e-6
    )
    # Varying lengths (a cap above the mean): a waiting request starts whenever a sequence
    # ends, so a long queue is steady-state serving at the cap; the drain fades out.
    varied = dict(mode="offline", max_output_tokens=1024, configs_dir=configs_dir)
    flowing = estimate(**{**KW, "batch_size": 64000}, max_num_seqs=64, **varied)
    assert flowing.throughput_tokens_per_s == pytest.approx(
        serving.throughput_tokens_per_s, rel=0.01
    )
    assert flowing.avg_power_w == pytest.approx(serving.avg_power_w, rel=0.01)
    # Only the sequences decoding together need KV cache: 64 of them.
    kv = long_queue.memory_gb_per_gpu["kv_cache"]
    assert kv == pytest.approx(at_cap.memory_gb_per_gpu["kv_cache"], rel=1e-6)


def test_a_job_larger_than_the_kv_cache_runs_what_fits_and_queues_the_rest(configs_dir):
    big = {**KW, "batch_size": 6400}
    with pytest.raises(UserError, match="does not fit"):
        estimate(**big, configs_dir=configs_dir)  # serving: the batch itself must fit
    job = estimate(**big, mode="offline", configs_dir=configs_dir)
    assert "sequences fit in the KV cache at once" in job.warning
    fit = int(job.warning.split("at most ")[1].split()[0])
    assert 256 < fit < 6400
    mem = job.memory_gb_per_gpu
    assert mem["total"] <= mem["usable"]
    at_fit = estimate(**big, mode="offline", max_num_seqs=fit, configs_dir=configs_dir)
    assert job.throughput_tokens_per_s == pytest.approx(at_fit.throughput_tokens_per_s, rel=1e-6)
    row = estimate_frame(pd.DataFrame([dict(big, mode="offline")]), configs_dir=configs_dir)
    assert row.loc[0, "error"] == ""
    assert row.loc[0, "warning"] == job.warning
    assert row.loc[0, "throughput_tokens_per_s"] == pytest.approx(
        job.throughput_tokens_per_s, rel=1e-6
    )


def test_batch_rows_queue_offline_jobs_only(configs_dir):
    rows = pd.DataFrame(
        [
            dict(KW, batch_size=1024, max_num_seqs=128, mode="offline"),
            dict(KW, batch_size=1024, max_num_seqs=128, mode=""),
        ]
    )
    out = estimate_frame(rows, configs_dir=configs_dir)
    single = estimate(
        **{**KW, "batch_size": 1024}, mode="offline", max_num_seqs=128, configs_dir=configs_dir
    )
    assert out.loc[0, "error"] == ""
    assert out.loc[0, "throughput_tokens_per_s"] == pytest.approx(
        single.throughput_tokens_per_s, rel=1e-6
    )
    assert out.loc[0, "avg_power_w"] == pytest.approx(single.avg_power_w, rel=1e-6)
    assert "exceeds max_num_seqs" in out.loc[1, "error"]


@pytest.mark.parametrize("cap", [0, 2.5, -3])
def test_a_bad_concurrency_cap_of_an_offline_job_names_the_field(configs_dir, cap):
    with pytest.raises(UserError, match="max_num_seqs"):
        estimate(**KW, mode="offline", max_num_seqs=cap, configs_dir=configs_dir)


def test_equal_lengths_must_fit_at_their_full_context(configs_dir):
    big = {**KW, "batch_size": 6400}
    equal = estimate(**big, mode="offline", configs_dir=configs_dir)
    varied = estimate(**big, mode="offline", max_output_tokens=1024, configs_dir=configs_dir)
    assert "each reaching 768 tokens" in equal.warning  # 512 in + 256 out
    assert "at a mean context of 640 tokens" in varied.warning

    def fit(warning: str) -> int:
        return int(warning.split("at most ")[1].split()[0])

    assert fit(varied.warning) / fit(equal.warning) == pytest.approx(768 / 640, rel=0.01)


def test_an_offline_step_is_an_explicit_mode_not_a_feature_key(configs_dir):
    """``JobStep`` sets an offline step's context and prompt chunk; features have no such field."""
    setup = ServingSetup(batch_size=64, input_tokens=512, output_tokens=256)
    f = stack([prepare(LLAMA, "H100", setup, configs_dir=configs_dir)[3]])
    c = default_coefficients()
    serving = predict(f, c)
    with pytest.raises(TypeError):
        f.replace(context=np.array([8192.0]))
    with pytest.raises(TypeError):
        f.replace(prefill_chunk=np.array([4096.0]))
    # The steady state's mean context is I + O/2 = 640 tokens: the same step, given explicitly.
    same = predict(f, c, JobStep(context=np.array([640.0])))
    assert same.decode_step_s[0] == pytest.approx(serving.decode_step_s[0], rel=1e-12)
    longer = predict(f, c, JobStep(context=np.array([8192.0])))
    assert longer.decode_step_s[0] > serving.decode_step_s[0]
    chunked = predict(f, c, JobStep(context=np.array([640.0]), prefill_chunk=np.array([4096.0])))
    assert chunked.step_s[0] > serving.step_s[0]  # every step carries prompt tokens
