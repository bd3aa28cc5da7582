"""benchmarks/gpu_pace.py (``gpu_check.py --pace``): its arithmetic, its report, its refusal."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pace = _load("gpu_pace")

CONFIG = {
    "vocab_size": 100, "hidden_size": 8, "num_attention_heads": 2, "num_key_value_heads": 1,
    "num_hidden_layers": 2, "tie_word_embeddings": False,
}  # fmt: skip


def test_experts_a_batch_touches():
    assert pace.experts_touched(8, 2, 1) == pytest.approx(0.25)
    assert pace.experts_touched(8, 2, 32) == pytest.approx(1 - 0.75**32)


def test_bytes_one_step_reads():
    kv_per_token = 2 * 2 * 1 * 4  # K and V, layers, kv heads, head dim
    dense = {"total_params": 10_000, "active_params": 10_000}
    assert pace.bytes_read(dense, CONFIG, 1, 10, 2) == (10_000 - 800 + kv_per_token * 10) * 2
    # an MoE whose experts hold 8,000 of 10,000 parameters, 2 of 8 experts per token
    moe = {"total_params": 10_000, "active_params": 4_000, "num_experts": 8,
           "experts_per_token": 2}  # fmt: skip
    one = pace.bytes_read(moe, {**CONFIG, "tie_word_embeddings": True}, 1, 0, 1)
    assert one == pytest.approx(4_000)  # batch 1 reads the active weights
    many = pace.bytes_read(moe, {**CONFIG, "tie_word_embeddings": True}, 64, 0, 1)
    assert 9_999 < many <= 10_000  # a large batch touches nearly every expert


def test_spread_between_processes():
    assert pace.spread([1.0, 1.1, 0.9]) == pytest.approx(0.2)
    assert pace.spread([1.0]) is None


def test_the_plan_and_the_report():
    plan = pace.arms(["eager", "compiled-static-cache"], "compiled-static-cache",
                     ["grouped_mm", "batched_mm"])  # fmt: skip
    assert [a.label for a in plan] == [
        "dense eager", "dense compiled-static-cache",
        "moe compiled-static-cache grouped_mm", "moe compiled-static-cache batched_mm",
    ]  # fmt: skip

    def proc(step: float, energy: float) -> dict:
        point = {"batch": 1, "step_s": step, "decode_j_per_token": energy, "bytes_read": 2e9}
        return {"bandwidth_bps": 4e12, "energy_source": "x", "points": [point]}

    results = {
        "dense compiled-static-cache": [proc(1.0e-3, 0.10), proc(1.02e-3, 0.11)],
        "moe compiled-static-cache grouped_mm": [proc(2e-3, 0.2), proc(2e-3, 0.2)],
        "moe compiled-static-cache batched_mm": [{"error": "exit 1: boom"}],
    }
    lines = pace.report(results, goals=True)
    text = "\n".join(lines)
    assert "1 1.02" in text and "0.5" in text  # per-process steps, the 0.5 ms bound
    assert re.search(r"moe compiled-static-cache batched_mm +process failed: exit 1: boom", text)
    assert "moe compiled-static-cache grouped_mm / dense compiled-static-cache, batch 1: 1.9" in (
        text
    )
    assert "within 3x of the memory bound: 2.02x (met)" in text
    assert "under 5%: worst 2.0% (met)" in text


def test_without_a_gpu_it_refuses_in_one_line(capsys):
    check = _load("gpu_check")
    if check.no_gpu_reason() is None:
        pytest.skip("a GPU is here")
    assert check.main(["--pace", "--processes", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --pace needs an NVIDIA GPU (or --dry-run)")


@pytest.mark.slow
def test_a_dry_run_process_benches_every_arm():
    """What one fresh process does (run in this one: no subprocess start-up), dry run."""
    dense = pace.dense_config(dry_run=True)
    plan = pace.arms(["eager"], "eager", ["grouped_mm", "batched_mm"])
    spec = {
        "device": "cpu", "dtype": "float32", "dry_run": True, "batch_sizes": [1, 2],
        "input_tokens": 4, "output_tokens": 3, "repeats": 1, "idle_s": 0.0, "bandwidth_mib": 4,
        "configs": {"dense": dense, "moe": pace.moe_config(dense)},
        "arms": [a._asdict() for a in plan],
    }  # fmt: skip
    out = pace.child(spec)
    assert out["energy_source"] == "modelled:cpu-tdp" and out["bandwidth_bps"] > 0
    assert set(out["arms"]) == {"dense eager", "moe eager grouped_mm", "moe eager batched_mm"}
    for label, arm in out["arms"].items():
        assert [p["batch"] for p in arm["points"]] == [1, 2], label
        for p in arm["points"]:
            assert p["status"] == "ok" and p["step_s"] > 0 and p["decode_j_per_token"] > 0
    moe = out["arms"]["moe eager batched_mm"]["points"][0]
    assert moe["generation"] == "eager, experts batched_mm"
    # batch 1 reads the active weights: the dense model's of the same active size, plus routers
    dense_bytes = out["arms"]["dense eager"]["points"][0]["bytes_read"]
    assert moe["bytes_read"] == pytest.approx(dense_bytes, rel=0.01)
    results = {label: [{**arm, "bandwidth_bps": out["bandwidth_bps"]}] for label, arm in
               out["arms"].items()}  # fmt: skip
    assert "moe eager grouped_mm / dense eager, batch 2:" in "\n".join(pace.report(results, False))
