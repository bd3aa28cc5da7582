"""Estimator speed: one estimate after import, and a vectorised batch of 100,000 configurations.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/estimator_speed.py [--rows 100000]``.
Targets: one estimate under 1 ms; the batch above 100,000 estimates per second on one core.
Prints both figures (median of repeats). Uses a config from the reference folder if present,
else a small built-in Llama-style config.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pandas as pd

from mlenergy.estimate import estimate
from mlenergy.estimate.batch import estimate_frame
from mlenergy.reference import default_configs_dir

FALLBACK = {
    "model_type": "llama",
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
}


def _models() -> list[str]:
    folder = default_configs_dir()
    if folder is not None:
        names = [
            "meta-llama__Llama-3.1-8B-Instruct",
            "Qwen__Qwen3-30B-A3B-Instruct-2507",
            "openai__gpt-oss-120b",
            "nvidia__NVIDIA-Nemotron-Nano-9B-v2",
        ]
        paths = [folder / f"{n}.json" for n in names]
        if all(p.is_file() for p in paths):
            return [str(p) for p in paths]
    tmp = Path(tempfile.mkdtemp()) / "config.json"
    tmp.write_text(json.dumps(FALLBACK))
    return [str(tmp)]


def bench_single(model: str, repeats: int = 2000) -> float:
    """Median seconds of one estimate (warm: config already parsed)."""
    estimate(model, "H100", batch_size=64, input_tokens=512, output_tokens=256)
    times = []
    for i in range(repeats):
        t0 = time.perf_counter()
        estimate(model, "H100", batch_size=1 + i % 256, input_tokens=512, output_tokens=256)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_batch(models: list[str], rows: int, repeats: int = 3) -> float:
    """Estimates per second of :func:`estimate_frame` on ``rows`` configurations."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "model": rng.choice(models, rows),
            "gpu": rng.choice(["H100", "B200", "H200", "A100-SXM4-80GB", "MI300X"], rows),
            "num_gpus": 1,
            "tensor_parallel": 1,
            "expert_parallel": 1,
            "data_parallel": 1,
            "precision": rng.choice(["bfloat16", "fp8"], rows),
            "task": "",
            "batch_size": rng.integers(1, 64, rows),
            "max_num_seqs": 64,
            "input_tokens": rng.integers(16, 1024, rows),
            "output_tokens": rng.integers(16, 1024, rows),
        }
    )
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = estimate_frame(df)
        dt = time.perf_counter() - t0
        best = max(best, rows / dt)
    assert len(res) == rows
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    models = _models()
    single = bench_single(models[0])
    rate = bench_batch(models, args.rows)
    print(f"single estimate: {single * 1e3:.3f} ms (target < 1 ms)")
    print(f"batch of {args.rows:,}: {rate:,.0f} estimates/s (target > 100,000/s)")


if __name__ == "__main__":
    main()
