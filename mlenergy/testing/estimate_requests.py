"""Random tables of estimate requests over the shipped catalogs, for agreement checks.

The single and the batch paths must agree to the last bit; tests and
``benchmarks/estimator_agreement.py`` draw requests here: every shipped model config (dense,
MoE, Mamba hybrids), every catalog GPU and precision, serving and offline jobs, parallel
layouts, clocks, power limits, tasks and engines, some of them invalid on purpose.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlenergy.errors import UserError
from mlenergy.estimate.training import estimate_training
from mlenergy.reference import default_configs_dir
from mlenergy.reference.gpus import catalog_names

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


TRAINING_COLUMNS = ("train_seq_len", "microbatches")
"""Cells of a training row beyond the batch contract's: tokens per sequence, microbatches."""


def random_training_requests(rows: int, seed: int = 0) -> pd.DataFrame:
    """A batch frame (all cells text) of ``rows`` random training steps, ``mode`` ``training``.

    Each row is one optimizer step of ``batch_size`` sequences of ``train_seq_len`` tokens
    (:func:`~mlenergy.estimate.training.estimate_training`): every shipped model config,
    catalog GPU and training precision, tensor, pipeline and data parallel layouts, some
    microbatch counts and clocks, some of them invalid on purpose.

    Args:
        rows: Number of requests.
        seed: Seed of the generator (the same seed gives the same frame).
    """
    rng = np.random.default_rng(seed)
    models = shipped_model_ids()
    gpus = catalog_names()
    tp = rng.choice([1, 1, 2, 4, 8], rows)
    pp = rng.choice([1, 1, 1, 2, 4], rows)
    dp = rng.choice([1, 2, 4, 8], rows)
    batch = dp * rng.choice([1, 2, 4, 8, 16], rows)
    micro = np.where((pp > 1) & (rng.random(rows) < 0.5), rng.choice([2, 4, 8], rows), 0)
    clock = np.where(rng.random(rows) < 0.2, rng.uniform(600, 2000, rows).round(), 0)
    return pd.DataFrame(
        {
            "model": rng.choice(np.array(models, dtype=object), rows),
            "gpu": rng.choice(np.array(gpus, dtype=object), rows),
            "tensor_parallel": [f"{v:g}" for v in tp],
            "pipeline_parallel": [f"{v:g}" for v in pp],
            "data_parallel": [f"{v:g}" for v in dp],
            "precision": rng.choice(np.array(["bfloat16", "bfloat16", "fp8"], dtype=object), rows),
            "batch_size": [f"{v:g}" for v in batch],
            "output_tokens": "1",
            "train_seq_len": [f"{v:g}" for v in rng.choice([512, 1024, 2048, 4096], rows)],
            "microbatches": [f"{v:g}" if v else "" for v in micro],
            "sm_clock_mhz": [f"{v:g}" if v else "" for v in clock],
            "mode": "training",
        }
    )


def single_training(row: dict[str, str]):
    """The single training estimate of one :func:`random_training_requests` row.

    Returns:
        The :class:`~mlenergy.estimate.training.TrainingEstimate`, or the message of the
        ``UserError`` that refused the row.
    """
    try:
        return estimate_training(
            row["model"],
            row["gpu"],
            int(row["batch_size"]),
            int(row["train_seq_len"]),
            tensor_parallel=int(row["tensor_parallel"]),
            data_parallel=int(row["data_parallel"]),
            pipeline_parallel=int(row["pipeline_parallel"]),
            microbatches=int(row["microbatches"]) if row["microbatches"] else None,
            precision=row["precision"],
            sm_clock_mhz=float(row["sm_clock_mhz"]) if row["sm_clock_mhz"] else None,
        )
    except UserError as exc:
        return exc.message
