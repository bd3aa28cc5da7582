"""Physical behaviour of single estimates (reference configs where needed)."""

from __future__ import annotations

import json
import math

import pytest

from mlenergy.errors import UserError
from mlenergy.estimate import estimate
from mlenergy.estimate.coefficients import default_coefficients
from mlenergy.models.architecture import ArchitectureSpec
from mlenergy.reference.gpus import catalog_names, resolve_gpu

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"
V2 = "leaderboard-v2-server"
V3 = "leaderboard-v3-server"


def test_tiny_config_without_reference(tiny_config):
    e = estimate(str(tiny_config), "H100", batch_size=16, input_tokens=128, output_tokens=64)
    assert e.energy_per_token_j > 0 and e.throughput_tokens_per_s > 0
    assert e.energy_per_token_j == pytest.approx(e.avg_power_w / e.throughput_tokens_per_s)
    assert e.energy_per_token_j_lo < e.energy_per_token_j < e.energy_per_token_j_hi
    assert e.energy_per_request_j == pytest.approx(e.energy_per_token_j * 64)
    assert e.energy_source.startswith("estimated:mlenergy-")
    parts = e.breakdown_j_per_token
    assert parts["prefill"] + parts["decode"] == pytest.approx(e.energy_per_token_j)
    total = parts["compute"] + parts["memory"] + parts["static_idle"] + parts["overhead"]
    assert total == pytest.approx(e.energy_per_token_j, rel=1e-6)


def test_batching_amortises_weights(configs_dir):
    e1 = estimate(LLAMA8, "H100", batch_size=1, input_tokens=512, output_tokens=256)
    e64 = estimate(LLAMA8, "H100", batch_size=64, input_tokens=512, output_tokens=256)
    assert e64.energy_per_token_j < e1.energy_per_token_j / 5
    assert e64.throughput_tokens_per_s > 10 * e1.throughput_tokens_per_s
    assert e64.avg_power_w <= resolve_gpu("H100").tdp_w


def test_kv_cache_growth_costs_energy(configs_dir):
    short = estimate(LLAMA8, "H100", batch_size=64, input_tokens=256, output_tokens=128)
    long = estimate(LLAMA8, "H100", batch_size=64, input_tokens=256, output_tokens=4096)
    assert long.itl_s > short.itl_s
    assert long.memory_gb_per_gpu["kv_cache"] > 5 * short.memory_gb_per_gpu["kv_cache"]


def test_fp8_and_fp4_cut_decode_energy(configs_dir):
    kw = dict(batch_size=8, input_tokens=512, output_tokens=256)
    bf16 = estimate(LLAMA8, "B200", precision="bfloat16", **kw)
    fp8 = estimate(LLAMA8, "B200", precision="fp8", **kw)
    fp4 = estimate(LLAMA8, "B200", precision="nvfp4", **kw)
    assert fp4.energy_per_token_j < fp8.energy_per_token_j < bf16.energy_per_token_j
    assert fp8.memory_gb_per_gpu["weights"] < 0.6 * bf16.memory_gb_per_gpu["weights"]
    fp8_id = estimate(LLAMA8 + "-FP8", "B200", **kw)
    assert fp8_id.precision == "fp8"


def test_moe_reads_only_hit_experts(configs_dir):
    moe = "Qwen/Qwen3-30B-A3B-Instruct-2507"
    small = estimate(moe, "H100", batch_size=1, input_tokens=256, output_tokens=256)
    dense = estimate("Qwen/Qwen3-32B", "H100", batch_size=1, input_tokens=256, output_tokens=256)
    assert small.is_moe and small.active_params < small.total_params / 5
    assert small.itl_s < dense.itl_s


def test_routed_experts_stream_under_their_own_ceiling(configs_dir):
    """``moe_ceiling`` sets how fast the routed experts stream; dense weights keep theirs."""
    c = default_coefficients()
    slow = c.replace(moe_ceiling=c.moe_ceiling / 10)
    kw = dict(batch_size=16, input_tokens=256, output_tokens=256)
    moe = "Qwen/Qwen3-30B-A3B-Instruct-2507"
    base, capped = (estimate(moe, "H100", coefficients=x, **kw) for x in (c, slow))
    assert capped.itl_s > 1.3 * base.itl_s
    dense = [estimate("Qwen/Qwen3-32B", "H100", coefficients=x, **kw) for x in (c, slow)]
    assert dense[1].itl_s == pytest.approx(dense[0].itl_s, rel=1e-12)
    assert dense[1].avg_power_w == pytest.approx(dense[0].avg_power_w, rel=1e-12)


def test_untuned_expert_shards_switch_tile_past_one_token_per_local_expert(configs_dir):
    """``moe_tile_s`` costs a BF16 expert-parallel step only past ``M > E / ep`` tokens."""
    c = default_coefficients()
    off = c.replace(moe_tile_s=1e-7)
    moe = "Qwen/Qwen3-235B-A22B-Instruct-2507"  # 128 experts: 16 per GPU at EP8
    kw = dict(input_tokens=256, output_tokens=1000, expert_parallel=8)

    def extra(batch: int, **more) -> float:
        on_, off_ = (
            estimate(moe, "B200", batch_size=batch, coefficients=x, **kw, **more).itl_s
            for x in (c, off)
        )
        return on_ - off_

    n_moe = 94
    assert extra(8) < 0.05 * c.moe_tile_s * n_moe  # 0.5 tokens per local expert: small tile
    assert extra(64) == pytest.approx(c.moe_tile_s * n_moe, rel=0.05)  # 4 per expert: large
    # Without expert parallelism (tuned tensor-parallel shapes) and for fp8 experts (the
    # block-scaled path, its own cost) the term is absent.
    tp = dict(input_tokens=256, output_tokens=1000, tensor_parallel=8)
    a, b = (estimate(moe, "B200", batch_size=64, coefficients=x, **tp).itl_s for x in (c, off))
    assert a == pytest.approx(b, rel=1e-12)
    fp8 = "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"
    a, b = (estimate(fp8, "B200", batch_size=64, coefficients=x, **kw).itl_s for x in (c, off))
    assert a == pytest.approx(b, rel=1e-12)


def test_every_reference_config_estimates(configs_dir):
    for path in sorted(configs_dir.glob("*.json")):
        cfg = json.loads(path.read_text())
        spec = ArchitectureSpec.from_config(cfg)
        n = 8 if spec.is_moe or "405B" in path.name or "Large" in path.name else 1
        kw = dict(expert_parallel=n) if spec.is_moe else dict(tensor_parallel=n)
        e = estimate(str(path), "B200", batch_size=8, input_tokens=512, output_tokens=256, **kw)
        assert math.isfinite(e.energy_per_token_j) and e.energy_per_token_j > 0, path.name


def test_frequency_sweep_is_u_shaped_when_compute_bound(configs_dir):
    gpu = resolve_gpu("H100")
    clocks = [400, 700, 1000, 1300, 1600, 1980]
    e = [
        estimate(
            LLAMA8, "H100", batch_size=128, input_tokens=2048, output_tokens=128, sm_clock_mhz=c
        ).energy_per_token_j
        for c in clocks
    ]
    best = min(range(len(e)), key=e.__getitem__)
    assert 0 < best < len(e) - 1, e
    assert gpu.min_sm_clock_mhz < clocks[0]


def test_power_limit_caps_power(configs_dir):
    free = estimate(LLAMA8, "H100", batch_size=128, input_tokens=2048, output_tokens=128)
    capped = estimate(
        LLAMA8, "H100", batch_size=128, input_tokens=2048, output_tokens=128, power_limit_w=300
    )
    assert capped.avg_power_w <= 300 + 1e-6
    assert capped.sm_clock_mhz < free.sm_clock_mhz
    assert capped.throughput_tokens_per_s <= free.throughput_tokens_per_s


def test_hypothetical_gpu_from_yaml(tmp_path, tiny_config):
    spec = tmp_path / "my-chip.yaml"
    spec.write_text(
        "name: my-chip\nmemory_gb: 96\nmemory_bandwidth_tb_s: 6\ntdp_w: 600\nbf16_tflops: 1500\n"
        "max_sm_clock_mhz: 1800\n"
    )
    e = estimate(str(tiny_config), str(spec), batch_size=8, input_tokens=64, output_tokens=64)
    h = estimate(str(tiny_config), "H100", batch_size=8, input_tokens=64, output_tokens=64)
    assert e.gpu == "my-chip"
    # uncalibrated hardware gets a wider interval
    assert (
        e.energy_per_token_j_hi / e.energy_per_token_j
        > h.energy_per_token_j_hi / h.energy_per_token_j
    )


def test_catalog_aliases():
    assert "H100-SXM5-80GB" in catalog_names() and len(catalog_names()) == 10
    assert resolve_gpu("NVIDIA H100 80GB HBM3").name == "H100-SXM5-80GB"
    assert resolve_gpu("h200").name == "H200-SXM-141GB"
    assert resolve_gpu("AMD Instinct MI300X").name == "MI300X"


@pytest.mark.parametrize(
    ("spelling", "name"),
    [
        ("Tesla A100-SXM4-40GB", "A100-SXM4-40GB"),
        ("A100 SXM 80GB", "A100-SXM4-80GB"),
        ("NVIDIA A100", "A100-SXM4-80GB"),  # a bare family name: its catalog default
        ("H200-SXM5-141GB", "H200-SXM-141GB"),
        ("NVIDIA B200 192GB", "B200"),  # datasheets quote 180 or 192 GB
        ("H100 SXM5 80GB HBM3", "H100-SXM5-80GB"),
        ("NVIDIA GeForce RTX 4090 24GB", "RTX-4090"),
    ],
)
def test_catalog_spellings(spelling, name):
    assert resolve_gpu(spelling).name == name


@pytest.mark.parametrize(
    "other", ["NVIDIA A100 80GB PCIe", "H100 NVL", "H100 94GB", "NVIDIA GH200", "GB200", "L40"]
)
def test_other_form_factors_are_unknown(other):
    with pytest.raises(UserError, match="unknown gpu"):
        resolve_gpu(other)


def test_missing_idle_comes_from_same_architecture(tmp_path):
    h100, h200 = resolve_gpu("H100"), resolve_gpu("H200")
    # The H200 has no measured idle figure; it shares the H100's die (Hopper, same TDP).
    assert h200.idle_power_w == pytest.approx(h100.idle_power_w / h100.tdp_w * h200.tdp_w)
    # No Blackwell GPU has a measured idle figure: the estimator's fitted fraction applies.
    assert resolve_gpu("B200").idle_power_w is None
    chip = tmp_path / "half-hopper.json"
    spec = {"memory_gb": 40, "memory_bandwidth_tb_s": 2, "tdp_w": 350, "bf16_tflops": 500}
    spec["spec_clock_mhz"] = 1755  # the rated clock stands in for the maximum
    chip.write_text(json.dumps({**spec, "vendor": "NVIDIA", "architecture": "Hopper"}))
    assert resolve_gpu(str(chip)).idle_power_w == pytest.approx(h100.idle_power_w / 2)
    chip.write_text(json.dumps({**spec, "vendor": "NVIDIA", "architecture": "Unknown-X"}))
    assert resolve_gpu(str(chip)).idle_power_w is None


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        (dict(gpu="H999"), "unknown gpu 'H999'"),
        (dict(tensor_parallel=3), "tensor_parallel (3) does not divide num_attention_heads"),
        (dict(output_tokens=-5), "output_tokens"),
        (dict(input_tokens=-1), "input_tokens"),
        (dict(batch_size=0), "batch_size"),
        (dict(precision="int3"), "unknown precision"),
        (dict(batch_size=100000, input_tokens=4000), "does not fit"),
    ],
)
def test_bad_input_names_the_field(tiny_config, kwargs, needle):
    base = dict(model=str(tiny_config), gpu="L4", batch_size=8, input_tokens=64, output_tokens=64)
    base.update(kwargs)
    with pytest.raises(UserError) as info:
        estimate(**base)
    assert needle in info.value.message


def test_memory_error_shows_arithmetic(tiny_config):
    with pytest.raises(UserError) as info:
        estimate(str(tiny_config), "L4", batch_size=100000, input_tokens=4000, output_tokens=64)
    msg = info.value.message
    assert "GB weights" in msg and "GB KV cache" in msg and "usable" in msg


def test_missing_config_key(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "vocab_size": 10}))
    with pytest.raises(UserError, match="num_hidden_layers"):
        estimate(str(path), "H100", batch_size=1, input_tokens=1, output_tokens=1)


def _stall_s(e) -> float:
    """Mean step time minus the decode-only step (s): what new prompts add per step."""
    assert e.itl_s == pytest.approx(e.batch_size / e.throughput_tokens_per_s)  # mean step
    return e.prefill_duration_s / e.output_tokens


def test_prompts_stall_decode_more_when_longer(configs_dir):
    kw = dict(batch_size=16, output_tokens=256)
    short = estimate(LLAMA8, "H100", input_tokens=128, **kw)
    long = estimate(LLAMA8, "H100", input_tokens=4096, **kw)
    assert 0 < _stall_s(short) < _stall_s(long)
    # Longer outputs: fewer new prompts per step, so less stall per step.
    rare = estimate(LLAMA8, "H100", input_tokens=128, batch_size=16, output_tokens=4096)
    assert _stall_s(rare) < _stall_s(short) / 4


def test_data_parallel_attention_with_experts_runs_in_lockstep(configs_dir):
    """With dp > 1 and ep > 1 a prompt on any replica stalls all of them."""
    moe = "Qwen/Qwen3-30B-A3B-Instruct-2507"
    kw = dict(batch_size=256, input_tokens=2000, output_tokens=256, num_gpus=8, data_parallel=8)
    alone = estimate(moe, "H100", expert_parallel=1, **kw)  # 8 independent replicas
    lockstep = estimate(moe, "H100", expert_parallel=8, **kw)
    # Independent replicas each stall only for their own eighth of the prompts; in lockstep
    # every replica waits for all of them (expert work is shared over 8 GPUs, the rest not).
    assert _stall_s(lockstep) > 3 * _stall_s(alone)


def test_lockstep_prompts_cost_more_per_prompt_with_more_replicas(configs_dir):
    """vLLM pads replicas in lockstep to the busiest one's step and all-gathers every padded
    step into each MoE layer: a prompt's tokens pass through the experts and over the links
    once per replica, so its stall grows with the replicas (without the padding, its expert
    work would be shared over more GPUs and its stall would shrink)."""
    moe = "Qwen/Qwen3-30B-A3B-Instruct-2507"
    per_prompt_ms = []
    for dp in (2, 4, 8):
        e = estimate(
            moe,
            "H100",
            batch_size=32 * dp,  # the same 32 sequences per replica
            input_tokens=2000,
            output_tokens=256,
            num_gpus=dp,
            data_parallel=dp,
            expert_parallel=dp,
        )
        prompts_per_step = e.batch_size / e.output_tokens
        per_prompt_ms.append(1e3 * _stall_s(e) / prompts_per_step)
    assert per_prompt_ms[0] < per_prompt_ms[1] < per_prompt_ms[2]
    assert per_prompt_ms[2] > 2 * per_prompt_ms[0]


def test_fp8_experts_pay_their_own_moe_path(configs_dir):
    """fp8 experts add a per-MoE-layer cost; fp8 dense weights and bf16 experts do not."""
    from mlenergy.estimate.coefficients import default_coefficients

    moe = "Qwen/Qwen3-235B-A22B-Instruct-2507"
    kw = dict(batch_size=8, input_tokens=256, output_tokens=256, num_gpus=8, expert_parallel=8)
    shipped = default_coefficients()
    free = shipped.replace(fp8_moe_layer_s=0.0)
    fp8 = estimate(moe, "H100", precision="fp8", **kw)
    fp8_free = estimate(moe, "H100", precision="fp8", coefficients=free, **kw)
    extra_s = fp8.itl_s - fp8_free.itl_s  # the decode step carries 94 MoE layers of the path
    assert extra_s == pytest.approx(94 * shipped.fp8_moe_layer_s, rel=0.02)
    assert fp8.avg_power_w > fp8_free.avg_power_w  # kernels run: busy time, not idle
    bf16, bf16_free = (
        estimate(moe, "H100", precision="bfloat16", coefficients=c, **kw) for c in (shipped, free)
    )
    assert bf16.itl_s == pytest.approx(bf16_free.itl_s)
    dense, dense_free = (
        estimate(LLAMA8, "H100", precision="fp8", batch_size=8, output_tokens=256, coefficients=c)
        for c in (shipped, free)
    )
    assert dense.itl_s == pytest.approx(dense_free.itl_s)


def test_legacy_moe_cost_only_on_the_old_engine():
    """The 2024 engine's MoE layer cost does not leak into estimates for today's engine."""
    import numpy as np

    from mlenergy.estimate.coefficients import default_coefficients
    from mlenergy.estimate.engines import ENGINE_INDEX
    from mlenergy.estimate.features import FEATURES, Features
    from mlenergy.estimate.physics import predict

    ones = {name: np.array([1.0, 1.0]) for name in FEATURES}
    f = Features.from_columns(ones).replace(
        common_bytes=np.full(2, 2e9),
        expert_bytes=np.full(2, 1e7),
        n_moe_layers=np.full(2, 48.0),
        num_experts=np.full(2, 128.0),
        experts_per_token=np.full(2, 8.0),
        num_layers=np.full(2, 48.0),
        hidden_size=np.full(2, 2048.0),
        bandwidth=np.full(2, 3.35e12),
        peak_dense=np.full(2, 989e12),
        peak_bf16=np.full(2, 989e12),
        bf16_flops=np.zeros(2),
        peak_expert=np.full(2, 989e12),
        spec_clock=np.full(2, 1830.0),
        max_clock=np.full(2, 1980.0),
        min_clock=np.full(2, 345.0),
        tdp=np.full(2, 700.0),
        idle=np.full(2, 72.0),
        link=np.full(2, 450e9),
        batch=np.full(2, 8.0),
        input_tokens=np.full(2, 256.0),
        output_tokens=np.full(2, 256.0),
        window=np.zeros(2),
        latent_kv=np.zeros(2),
        fp8_experts=np.zeros(2),
        engine=np.array([ENGINE_INDEX[V3], ENGINE_INDEX[V2]], dtype=float),
        clock=np.full(2, np.nan),
        power_limit=np.full(2, np.nan),
    )
    c = default_coefficients()
    extra = c.overhead(V2, "moe_layer_s")
    base = predict(f, c).decode_step_s
    more = predict(f, c.replace(**{f"{V2}.moe_layer_s": 2 * extra})).decode_step_s
    assert more[0] == pytest.approx(base[0])  # today's engine: unchanged
    slow = c.overhead(V2, "host_slowdown")
    assert more[1] - base[1] == pytest.approx(48 * extra * slow, rel=1e-6)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_old_engine_pays_per_step_for_each_other_worker(configs_dir, tp):
    """The 2024 engine's driver hands every step's inputs to the replica's other workers."""
    c = default_coefficients()
    worker_s = c.overhead(V2, "worker_s")
    more = c.replace(**{f"{V2}.worker_s": 2 * worker_s})
    kw = dict(batch_size=8, input_tokens=256, output_tokens=512, tensor_parallel=tp)
    for engine, workers in (("leaderboard-v2-server", tp - 1), ("leaderboard-v3-server", 0)):
        base, slower = (
            estimate(LLAMA8, "H100", engine=engine, coefficients=x, **kw) for x in (c, more)
        )
        assert slower.itl_s - base.itl_s == pytest.approx(workers * worker_s, abs=1e-9)
    assert worker_s > 1e-3


def test_expert_parallel_layer_waits_for_the_busiest_shard():
    """Few experts hit: the busiest GPU reads more than the mean; all hit: no imbalance."""
    import numpy as np

    from mlenergy.estimate.expert_shards import max_shard_hits

    e, shards, on = np.array([16.0, 16.0, 16.0]), np.array([8.0, 8.0, 8.0]), np.array([1, 1, 0])
    hit = np.array([6.5, 16.0, 6.5])  # experts hit per layer, over all GPUs
    top = max_shard_hits(hit, e, shards, on.astype(bool))
    assert hit[0] / 8 < top[0] <= 2.0  # above the mean, never more than a GPU holds
    assert top[1] == pytest.approx(2.0)  # every expert hit: every GPU reads all of its own
    assert top[2] == pytest.approx(hit[2] / 8)  # no expert parallelism: the mean share


def test_per_sequence_work_keeps_the_gpu_busy(configs_dir):
    """The GPU share of the per-sequence cost draws power; its energy is reported as overhead."""
    from mlenergy.estimate.coefficients import default_coefficients

    shipped = default_coefficients()
    host_only = shipped.replace(seq_busy=0.0)
    kw = dict(batch_size=512, input_tokens=256, output_tokens=512)
    busy = estimate(LLAMA8, "H100", coefficients=shipped, **kw)
    idle = estimate(LLAMA8, "H100", coefficients=host_only, **kw)
    assert busy.itl_s == pytest.approx(idle.itl_s)  # same time, more power
    assert busy.avg_power_w > idle.avg_power_w
    extra = busy.energy_per_token_j - idle.energy_per_token_j
    gained = busy.breakdown_j_per_token["overhead"] - idle.breakdown_j_per_token["overhead"]
    assert gained == pytest.approx(extra, rel=0.05)


def test_fp8_moe_path_needs_fp8_tensor_cores(configs_dir):
    """On an A100 (no fp8 units) fp8 experts run weight-only kernels, not the fp8 MoE path."""
    from mlenergy.estimate.coefficients import default_coefficients

    assert resolve_gpu("H100").native("fp8") and not resolve_gpu("A100-SXM4-80GB").native("fp8")
    assert resolve_gpu("B200").native("mxfp4") and not resolve_gpu("H100").native("mxfp4")
    free = default_coefficients().replace(fp8_moe_layer_s=0.0)
    moe = "Qwen/Qwen3-30B-A3B-Instruct-2507"
    kw = dict(batch_size=8, input_tokens=256, output_tokens=256, precision="fp8")
    a100, a100_free = (
        estimate(moe, "A100-SXM4-80GB", coefficients=c, **kw)
        for c in (default_coefficients(), free)
    )
    assert a100.itl_s == pytest.approx(a100_free.itl_s)
    h100 = estimate(moe, "H100", **kw)
    assert h100.itl_s > estimate(moe, "H100", coefficients=free, **kw).itl_s


def test_median_itl_is_the_mixed_step_once_most_steps_carry_prompts():
    import numpy as np

    from mlenergy.estimate.prediction import median_step

    dec, mix = np.array([0.01, 0.01, 0.01]), np.array([0.03, 0.03, 0.03])
    med = median_step(dec, mix, np.array([0.1, 0.5, 0.9]))
    assert med[0] == pytest.approx(0.01, rel=1e-3)  # most steps decode only
    assert med[1] == pytest.approx(0.02)  # half and half: the switch is centred
    assert med[2] == pytest.approx(0.03, rel=1e-3)  # most steps carry prompts


def test_empty_precision_means_the_checkpoint_format(configs_dir):
    """DeepSeek-R1 ships fp8 weights (quantization_config): empty precision serves them so."""
    kw = dict(num_gpus=8, expert_parallel=8, batch_size=64, input_tokens=512, output_tokens=256)
    stored = estimate("deepseek-ai/DeepSeek-R1-0528", "H200", **kw)
    assert stored.precision == "fp8"
    with pytest.raises(UserError, match="do not fit"):  # bf16 copies need 1.3 TB
        estimate("deepseek-ai/DeepSeek-R1-0528", "H200", precision="bfloat16", **kw)
    assert estimate(LLAMA8, "H100", batch_size=8, output_tokens=64).precision == "bfloat16"
    auto = estimate("deepseek-ai/DeepSeek-R1-0528", "H200", precision="auto", **kw)
    assert auto.energy_per_token_j == stored.energy_per_token_j  # vLLM's --dtype auto
    spelt = estimate(LLAMA8, "H100", precision="float8_e4m3fn", batch_size=8, output_tokens=64)
    assert spelt.precision == "fp8"


def test_mamba_prefill_path_costs_hybrid_mixed_steps_only(configs_dir):
    """Hybrids pay GPU work per Mamba layer in steps with prompts; decode steps do not."""
    from mlenergy.estimate.coefficients import default_coefficients

    hybrid = "nvidia/NVIDIA-Nemotron-Nano-9B-v2"
    shipped = default_coefficients()
    free = shipped.replace(mamba_prefill_s=0.0)
    kw = dict(batch_size=64, input_tokens=250, output_tokens=500)
    with_path, without = (estimate(hybrid, "H100", coefficients=c, **kw) for c in (shipped, free))
    assert _stall_s(with_path) > _stall_s(without) + 1e-4
    decode = [e.itl_s - _stall_s(e) for e in (with_path, without)]
    assert decode[0] == pytest.approx(decode[1])  # the decode-only step is unchanged
    assert with_path.avg_power_w > without.avg_power_w  # compute-busy work, not host time
    dense = [estimate(LLAMA8, "H100", coefficients=c, **kw) for c in (shipped, free)]
    assert dense[0].itl_s == pytest.approx(dense[1].itl_s)  # no Mamba layers: no cost


def test_hybrid_profile_counts_mamba_layers_and_bf16_state(configs_dir):
    """Nemotron-Nano-9B-v2: 27 Mamba layers; SSM state in BF16 (vLLM's default cache dtype)."""
    from mlenergy.estimate.configs import resolve_model_config
    from mlenergy.estimate.profile import build_profile

    spec = resolve_model_config("nvidia/NVIDIA-Nemotron-Nano-9B-v2", configs_dir).spec
    prof = build_profile(spec, "bfloat16")
    assert prof.n_mamba_layers == 27
    state = 128 * 80 * 128  # heads x head dim x state size
    conv = (128 * 80 + 2 * 8 * 128) * (4 - 1)  # x, B, C channels over kernel - 1 taps
    assert prof.ssm_state_bytes == pytest.approx(27 * (state + conv) * 2.0)


def test_visual_prompt_tokens_stall_the_engine(configs_dir):
    """An image prompt costs host time per visual token, with the GPU waiting (less power)."""
    vl = "Qwen/Qwen3-VL-8B-Instruct"
    kw = dict(batch_size=64, input_tokens=1200, output_tokens=400)
    text = estimate(vl, "H100", task="lm-arena-chat", **kw)
    image = estimate(vl, "H100", task="image-chat", **kw)
    assert image.throughput_tokens_per_s < text.throughput_tokens_per_s
    assert image.avg_power_w < text.avg_power_w
    # The share of the time the engine stalls, per request served, is the fitted host time
    # of one prompt's 1200 visual tokens.
    stall_share = 1.0 - image.throughput_tokens_per_s / text.throughput_tokens_per_s
    requests_per_s = image.throughput_tokens_per_s / 400
    expected_s = default_coefficients().visual_token_s * 1200
    assert expected_s > 1e-3
    assert stall_share / requests_per_s == pytest.approx(expected_s, rel=1e-6)
