"""Training-step mode with pipeline parallelism: stage split, 1F1B bubble, memory, energy."""

from __future__ import annotations

import json

import pytest

from mlenergy.cli import main
from mlenergy.errors import UserError
from mlenergy.estimate.coefficients import Coefficients, default_coefficients
from mlenergy.estimate.training import estimate_pipeline_stages, estimate_training
from mlenergy.estimate.training_memory import usable_gb
from mlenergy.reference.gpus import resolve_gpu

GPT3_175B = {
    "model_type": "gpt2",
    "hidden_size": 12288,
    "num_hidden_layers": 96,
    "num_attention_heads": 96,
    "intermediate_size": 49152,
    "vocab_size": 50257,
    "tie_word_embeddings": True,
}
LLAMA_405B = {
    "model_type": "llama",
    "hidden_size": 16384,
    "num_hidden_layers": 126,
    "num_attention_heads": 128,
    "num_key_value_heads": 8,
    "intermediate_size": 53248,
    "vocab_size": 128256,
}


@pytest.fixture
def write_config(tmp_path):
    def write(cfg: dict, name: str) -> str:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(cfg))
        return str(path)

    return write


@pytest.mark.parametrize(
    ("kw", "figures"),
    [
        (
            dict(batch_size=8, seq_len=1024),
            (0.01975180770620786, 13.340657810437145, 5.27671296, 0.4094434813863549),
        ),
        (
            dict(batch_size=16, seq_len=1024, num_gpus=2),
            (0.022243671255535367, 28.903324357713355, 3.779207168, 0.3635752757715773),
        ),
        (
            # A locked low clock: the one voltage-frequency relation (flat below the knee)
            # gives less dynamic power than the former linear one (energy was 17.663 J).
            dict(batch_size=16, seq_len=512, num_gpus=4, tensor_parallel=2, sm_clock_mhz=1200),
            (0.011331596688185267, 14.792649756314901, 1.31917824, 0.17382549886858367),
        ),
    ],
)
def test_one_stage_figures_are_unchanged(tiny_config, kw, figures):
    """pp=1 keeps the single-pass step (code-default coefficients pin the figures)."""
    c = Coefficients()
    est = estimate_training(str(tiny_config), "H100", coefficients=c, **kw)
    got = (est.step_duration_s, est.energy_per_step_j, est.memory_gb_per_gpu, est.mfu)
    assert got == pytest.approx(figures, rel=1e-12)
    assert est.pipeline_parallel == 1 and est.stages == () and est.bubble_fraction == 0.0
    explicit = estimate_training(
        str(tiny_config), "H100", coefficients=c, pipeline_parallel=1, **kw
    )
    assert explicit == est


def test_175b_and_405b_fit_at_tp8_pp8(write_config):
    gpt3 = write_config(GPT3_175B, "gpt3")
    with pytest.raises(UserError, match="does not fit"):
        estimate_training(gpt3, "A100-SXM4-80GB", 8, 2048, tensor_parallel=8, num_gpus=8)
    est = estimate_training(gpt3, "A100-SXM4-80GB", 8, 2048, tensor_parallel=8, pipeline_parallel=8)
    assert est.num_gpus == 64 and est.memory_gb_per_gpu < usable_gb(80)
    assert [s.layers for s in est.stages] == [12] * 8
    llama = write_config(LLAMA_405B, "llama405b")
    # 405B x 16 bytes of weights, grads and Adam over 64 GPUs is > 100 GB: only with the Adam
    # states sharded over data parallelism (or a bigger GPU) does TP8 x PP8 fit
    with pytest.raises(UserError, match="pipeline stage 0 needs"):
        estimate_training(llama, "A100-SXM4-80GB", 8, 2048, tensor_parallel=8, pipeline_parallel=8)
    big = estimate_training(
        llama, "A100-SXM4-80GB", 64, 2048, tensor_parallel=8, pipeline_parallel=8, data_parallel=4
    )
    assert big.num_gpus == 256 and big.memory_gb_per_gpu < usable_gb(80)
    assert [s.layers for s in big.stages] == [16] * 6 + [15] * 2
    h200 = estimate_training(llama, "H200", 8, 2048, tensor_parallel=8, pipeline_parallel=8)
    assert h200.memory_gb_per_gpu < usable_gb(resolve_gpu("H200").memory_gb)


def test_memory_falls_with_pipeline_stages(write_config):
    gpt3 = write_config(GPT3_175B, "gpt3")
    mem = [
        estimate_training(
            gpt3, "H200", 16, 2048, tensor_parallel=8, pipeline_parallel=pp, microbatches=16
        ).memory_gb_per_gpu
        for pp in (4, 8, 16)
    ]
    assert mem[0] > mem[1] > mem[2]
    est = estimate_training(gpt3, "H200", 16, 2048, tensor_parallel=8, pipeline_parallel=8)
    first, *_, last = est.stages
    # 1F1B: stage i holds pp - i microbatches, so the first stage holds the most activations
    assert [s.microbatches_in_flight for s in est.stages] == list(range(8, 0, -1))
    assert est.memory_gb_per_gpu == first.memory_gb_per_gpu > last.memory_gb_per_gpu


@pytest.mark.parametrize(("pp", "m"), [(2, 1), (2, 8), (4, 4), (4, 16), (8, 3)])
def test_bubble_share_is_that_of_1f1b(tiny_config, pp, m):
    est = estimate_training(
        str(tiny_config), "H100", 2 * m, 512, pipeline_parallel=pp, microbatches=m
    )
    assert est.microbatches == m and est.microbatch_size == 2
    assert est.bubble_fraction == pytest.approx((pp - 1) / (m + pp - 1))
    slot = max(s.forward_s + s.backward_s for s in est.stages)
    assert est.pipeline_duration_s == pytest.approx((m + pp - 1) * slot)
    c = default_coefficients()
    assert est.step_duration_s == pytest.approx(
        c.step_s + est.pipeline_duration_s + est.gradient_sync_s + est.optimizer_update_s
    )
    slowest = max(est.stages, key=lambda s: s.forward_s + s.backward_s)
    assert slowest.busy_fraction == pytest.approx(m / (m + pp - 1))


@pytest.mark.parametrize("clock", [None, 1200])
def test_stage_figures_match_the_pipeline_profile(write_config, clock):
    gpt3 = write_config(GPT3_175B, "gpt3")
    g = resolve_gpu("A100-SXM4-80GB")
    mhz = int(clock or g.max_sm_clock_mhz)
    est = estimate_training(
        gpt3, g, 8, 2048, tensor_parallel=8, pipeline_parallel=8, sm_clock_mhz=clock
    )
    rows = estimate_pipeline_stages(gpt3, g, 8, 8, seq_len=2048, clocks_mhz=[mhz])
    for s in est.stages:
        fwd, bwd = (
            next(r for r in rows if r.stage == s.stage and r.instruction == inst)
            for inst in ("forward", "backward")
        )
        assert (s.forward_s, s.forward_j) == pytest.approx((fwd.time_s, fwd.energy_j), rel=1e-12)
        assert (s.backward_s, s.backward_j) == pytest.approx((bwd.time_s, bwd.energy_j), rel=1e-12)


def test_energy_counts_every_gpu_and_the_bubble(write_config):
    gpt3 = write_config(GPT3_175B, "gpt3")
    est = estimate_training(
        gpt3, "A100-SXM4-80GB", 32, 2048, tensor_parallel=8, pipeline_parallel=8, data_parallel=2
    )
    per_stage = est.tensor_parallel * est.data_parallel
    m, t = est.microbatches, est.step_duration_s
    busy_j = per_stage * sum(m * (s.forward_j + s.backward_j) for s in est.stages)
    busy_s = per_stage * sum(m * (s.forward_s + s.backward_s) for s in est.stages)
    bubble_s = per_stage * sum(
        est.pipeline_duration_s - m * (s.forward_s + s.backward_s) for s in est.stages
    )
    waiting_s = est.blocking_energy_j / est.blocking_power_w
    assert bubble_s <= waiting_s <= est.num_gpus * t - busy_s
    assert est.energy_per_step_j > busy_j + est.blocking_energy_j
    assert est.energy_per_step_j == pytest.approx(est.avg_power_w * t)
    assert est.gradient_sync_s > 0  # two replicas synchronise their gradients
    fewer = estimate_training(
        gpt3, "A100-SXM4-80GB", 32, 2048, tensor_parallel=8, pipeline_parallel=8,
        data_parallel=2, microbatches=4,
    )  # fmt: skip
    assert fewer.bubble_fraction > est.bubble_fraction


def test_uneven_split_and_bad_input(tiny_config):
    est = estimate_training(str(tiny_config), "H100", 6, 256, pipeline_parallel=3)
    assert [s.layers for s in est.stages] == [3, 3, 2]
    cases = [
        (dict(pipeline_parallel=9), "--pipeline-parallel 9 is more than the model's 8 layers"),
        (dict(pipeline_parallel=0), "--pipeline-parallel is 0"),
        (dict(pipeline_parallel=2, microbatches=4), "--microbatches 4 does not divide"),
        (dict(pipeline_parallel=2, microbatches=0), "--microbatches is 0"),
        (dict(microbatches=2), "--microbatches applies to a pipeline"),
        (dict(pipeline_parallel=2, num_gpus=3), "!= num_gpus"),
        (dict(pipeline_parallel=2, data_parallel=4), "does not split over 4"),
    ]
    for kw, message in cases:
        with pytest.raises(UserError, match=message):
            estimate_training(str(tiny_config), "H100", 6, 256, **kw)


def test_cli_prints_stage_split_and_bubble(capsys, tiny_config):
    args = ["estimate", "--model", str(tiny_config), "--gpu", "H100", "--batch-size", "12"]
    args += ["--train-seq-len", "512", "--pipeline-parallel", "4", "--microbatches", "6"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "layers per stage 2,2,2,2" in text and "bubble           : 33.3%" in text
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["pipeline_parallel"] == 4 and data["bubble_fraction"] == pytest.approx(3 / 9)
    assert [s["layers"] for s in data["stages"]] == [2, 2, 2, 2]
    assert main([*args[:-4], "--pipeline-parallel", "9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--pipeline-parallel 9" in err
