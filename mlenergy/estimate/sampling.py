"""Random tables of estimate requests over the shipped catalogs, for agreement checks.

The single and the batch paths must agree to the last bit; tests and
``benchmarks/estimator_agreement.py`` draw requests here: every shipped model config (dense,
MoE, Mamba hybrids), every catalog GPU and precision, serving and offline jobs, parallel
layouts, clocks, power limits, tasks and engines, some of them invalid on purpose.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlenergy.estimate.catalog import catalog_names
from mlenergy.reference import default_configs_dir

PRECISIONS = ("", "bfloat16", "float16", "fp8", "mxfp4", "nvfp4")
TASKS = ("", "lm-arena-chat", "gpqa", "image-chat", "video-chat", "sourcegraph-fim", "code")
ENGINES = ("", "", "", "leaderboard-v2-server", "vllm-0.11")


def shipped_model_ids() -> list[str]:
    """Model ids of every shipped config (``<org>/<name>``)."""
    folder = default_configs_dir()
    return sorted(p.stem.replace("__", "/") for p in folder.glob("*.json"))


def random_requests(rows: int, seed: int = 0) -> pd.DataFrame:
    """A batch frame (the CSV contract, all cells text) of ``rows`` random requests.

    Args:
        rows: Number of requests.
        seed: Seed of the generator (the same seed gives the same frame).
    """
    rng = np.random.default_rng(seed)
    models = shipped_model_ids()
    gpus = catalog_names()

    def pick(options, p_blank: float = 0.0) -> np.ndarray:
        out = rng.choice(np.array(options, dtype=object), rows)
        return np.where(rng.random(rows) < p_blank, "", out)

    tp = rng.choice([1, 1, 2, 4, 8], rows)
    dp = rng.choice([1, 1, 1, 2], rows)
    pp = rng.choice([1, 1, 1, 2], rows)
    dense = tp * dp * pp
    ep = np.where(rng.random(rows) < 0.3, dense, 1)
    batch = np.round(np.exp(rng.uniform(0, np.log(1024), rows)))
    offline = rng.random(rows) < 0.35
    out_tok = rng.integers(8, 2048, rows).astype(float)
    cap_out = np.where(rng.random(rows) < 0.5, out_tok * rng.uniform(1, 4, rows), np.nan)
    max_seqs = np.where(rng.random(rows) < 0.3, np.ceil(batch * rng.uniform(0.5, 2, rows)), np.nan)
    clock = np.where(rng.random(rows) < 0.15, rng.uniform(500, 2100, rows).round(), np.nan)
    limit = np.where(
        np.isnan(clock) & (rng.random(rows) < 0.15), rng.uniform(150, 1100, rows).round(), np.nan
    )
    given_in = rng.random(rows) < 0.7

    def text(values: np.ndarray) -> list[str]:
        return ["" if isinstance(v, float) and np.isnan(v) else f"{v:g}" for v in values]

    return pd.DataFrame(
        {
            "model": pick(models),
            "gpu": pick(gpus),
            "num_gpus": text(np.where(rng.random(rows) < 0.8, np.nan, np.maximum(dense, ep))),
            "tensor_parallel": text(tp),
            "expert_parallel": text(ep),
            "data_parallel": text(dp),
            "pipeline_parallel": text(pp),
            "precision": pick(PRECISIONS),
            "task": pick(TASKS),
            "batch_size": text(batch),
            "max_num_seqs": text(max_seqs),
            "input_tokens": text(np.where(given_in, rng.integers(1, 8192, rows), np.nan)),
            "output_tokens": text(out_tok),
            "sm_clock_mhz": text(clock),
            "power_limit_w": text(limit),
            "engine": pick(ENGINES),
            "mode": np.where(offline, "offline", ""),
            "max_output_tokens": text(np.where(offline, cap_out, np.nan)),
        }
    )
