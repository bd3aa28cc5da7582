"""benchmarks/gpu_pace.py (``gpu_check.py --pace``): its arithmetic, its report, its refusal."""

from __future__ import annotations

import importlib.util
import re
import sys
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
def test_a_dry_run_goes_through_fresh_processes(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    code = pace.main(
        ["--dry-run", "--processes", "2", "--generations", "eager", "--moe-generation", "eager",
         "--moe-backends", "grouped_mm", "--batch-sizes", "1,2", "--input-tokens", "8",
         "--output-tokens", "4", "--repeats", "1"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "modelled:cpu-tdp (dry run on the CPU: not a GPU figure)" in out
    assert "dense eager" in out and "moe eager grouped_mm" in out
    assert "process failed" not in out
    assert "moe eager grouped_mm / dense eager, batch 2:" in out
    assert sys.executable  # children ran with this interpreter
