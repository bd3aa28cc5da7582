"""The Power budget view: the best configuration of every model under a site power budget.

Given a site budget (W), a deadline on the median inter-token latency (ms), the site's PUE
and host power per GPU, each model's measured configurations of one task in the store (the
figures the leaderboard's table shows) are handed to the planner's best configuration per
model (:func:`mlenergy.optimize.power_cap.best_per_model`, the library's one rule), which
counts the replicas that fit the budget and their site throughput; this module only gathers
the candidates and lays the answer out. Models with no configuration within the deadline and
the budget are listed with the planner's reason. The site defaults (PUE, host power per GPU)
are the planner's (:mod:`mlenergy.optimize.site`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mlenergy.errors import UserError
from mlenergy.leaderboard.context import AppContext
from mlenergy.optimize.candidates import CANDIDATE_COLUMNS
from mlenergy.optimize.power_cap import OBJECTIVES
from mlenergy.optimize.power_cap import best_per_model as plan_best_per_model
from mlenergy.optimize.site import SITE_HOST_W_PER_GPU, SITE_PUE
from mlenergy.records.metrics import DEFAULT_ITL_LIMIT_MS

DEFAULT_BUDGET_W = 100_000.0
"""Site power budget the view opens on (W)."""

DEFAULT_ITL_MS = DEFAULT_ITL_LIMIT_MS
"""Median inter-token latency deadline the view opens on (ms)."""

COLUMNS = (
    "model_id",
    "gpu",
    "num_gpus",
    "tensor_parallel",
    "expert_parallel",
    "data_parallel",
    "max_num_seqs",
    "precision",
    "replicas",
    "site_tokens_per_s",
    "site_power_w",
    "energy_per_token_j",
    "gpu_energy_per_token_j",
    "median_itl_ms",
    "source",
)
"""Columns of the view's table, in order."""

LABELS = {
    "model_id": "Model",
    "gpu": "GPU",
    "num_gpus": "GPUs / replica",
    "tensor_parallel": "TP",
    "expert_parallel": "EP",
    "data_parallel": "DP",
    "max_num_seqs": "max_num_seqs",
    "precision": "Precision",
    "replicas": "Replicas",
    "site_tokens_per_s": "Site tokens/s",
    "site_power_w": "Site power (W)",
    "energy_per_token_j": "Site J/token",
    "gpu_energy_per_token_j": "GPU J/token",
    "median_itl_ms": "ITL p50 (ms)",
    "source": "Source",
}
"""Header of each column (units in the header)."""


@dataclass(frozen=True)
class BudgetQuery:
    """One Power budget request.

    Attributes:
        budget_w: Site power budget (W).
        itl_limit_ms: Deadline on the median inter-token latency (ms).
        task: Task whose measured configurations compete.
        pue: Power usage effectiveness of the site (>= 1).
        host_w_per_gpu: Host power (CPU, memory, network) per GPU (W).
        objective: ``throughput`` (most site tokens/s) or ``energy-per-token``.
    """

    budget_w: float = DEFAULT_BUDGET_W
    itl_limit_ms: float = DEFAULT_ITL_MS
    task: str = "lm-arena-chat"
    pue: float = SITE_PUE
    host_w_per_gpu: float = SITE_HOST_W_PER_GPU
    objective: str = "throughput"


@dataclass(frozen=True)
class BudgetAnswer:
    """The best configuration per model, and the models left out with the reason.

    Attributes:
        table: One row per model (:data:`COLUMNS`), most site tokens per second first.
        left_out: ``(model_id, reason)`` for models without a configuration that fits.
    """

    table: pd.DataFrame
    left_out: tuple[tuple[str, str], ...]


def _int(rows: pd.DataFrame, name: str, default: int) -> pd.Series:
    if name not in rows.columns:
        return pd.Series(default, index=rows.index, dtype=int)
    return pd.to_numeric(rows[name], errors="coerce").fillna(default).astype(int)


def candidate_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The measured GPU configurations of prepared runs as the planner's candidate table.

    One row per run with a ``measured:`` energy source, an accelerator, a throughput, an
    average power and a median ITL (the figures the table shows: the request phase, else
    decode), in the columns of :data:`~mlenergy.optimize.candidates.CANDIDATE_COLUMNS`. The
    power limit is the GPU's default (``None``): the runs do not record another. ``source``
    names the energy source and the run.

    Args:
        runs: A frame from :func:`mlenergy.leaderboard.prepare.prepare_runs`.
    """
    rows = runs[
        runs["energy_source"].str.startswith("measured:") & (runs["accelerator_count"] > 0)
    ].dropna(subset=["throughput_tokens_per_s", "avg_power_w", "itl_ms"])
    gpus = rows["accelerator_count"].astype(int)
    out = pd.DataFrame(
        {
            "model_id": rows["model_id"],
            "task": rows["task"],
            "gpu": rows["hardware"],
            "num_gpus": gpus,
            "tensor_parallel": _int(rows, "tensor_parallel", 1),
            "expert_parallel": _int(rows, "expert_parallel", 1),
            "data_parallel": _int(rows, "data_parallel", 1),
            "max_num_seqs": _int(rows, "batch_size", 0),
            "precision": rows["dtype"],
            "power_limit_w": None,
            "throughput_tokens_per_s": rows["throughput_tokens_per_s"],
            "avg_power_w": rows["avg_power_w"],
            "energy_per_token_j": rows["energy_per_token_j"],
            "median_itl_ms": rows["itl_ms"],
            "output_tokens": _int(rows, "output_tokens", 0),
            "source": rows["energy_source"] + " (run " + rows["run_id"] + ")",
        }
    )
    return out[list(CANDIDATE_COLUMNS)].reset_index(drop=True)


def task_candidates(ctx: AppContext, task: str) -> dict[str, pd.DataFrame]:
    """Candidate tables of every model with a measured configuration of ``task`` (memoised)."""

    def _split() -> dict[str, pd.DataFrame]:
        runs = ctx.data.runs
        table = candidate_table(runs[runs["task"] == task]) if len(runs) else None
        if table is None or table.empty:
            return {}
        return {str(m): g.reset_index(drop=True) for m, g in table.groupby("model_id", sort=True)}

    return ctx.data.memo(("power-candidates", task), _split)


def best_per_model(ctx: AppContext, q: BudgetQuery) -> BudgetAnswer:
    """The planner's best configuration of every model of ``q.task`` (memoised).

    Raises:
        UserError: A bad parameter (budget, PUE, host power, deadline, objective), named.
    """
    _check(q)
    return ctx.data.memo(("power-budget", q), lambda: _compute(ctx, q))


def _check(q: BudgetQuery) -> None:
    if not q.task:
        raise UserError("task is not set", "pick one task: the planner compares one workload")
    if q.objective not in OBJECTIVES:
        raise UserError(f"objective {q.objective!r} is unknown", f"use {' or '.join(OBJECTIVES)}")
    for name, value in (("budget_w", q.budget_w), ("itl_limit_ms", q.itl_limit_ms)):
        if not value > 0:
            raise UserError(f"{name} is {value:g}; it must be positive", f"give {name} > 0")
    if not q.host_w_per_gpu >= 0:
        raise UserError(
            f"host_w_per_gpu is {q.host_w_per_gpu:g}; it must be 0 or more",
            f"give e.g. {SITE_HOST_W_PER_GPU:g}",
        )
    if not q.pue >= 1.0:
        raise UserError(f"pue is {q.pue:g}; it must be at least 1", f"give e.g. {SITE_PUE:g}")


def _compute(ctx: AppContext, q: BudgetQuery) -> BudgetAnswer:
    best = plan_best_per_model(
        q.budget_w,
        q.task,
        q.itl_limit_ms,
        candidates=task_candidates(ctx, q.task),
        objective=q.objective,
        pue=q.pue,
        host_w_per_gpu=q.host_w_per_gpu,
    )
    return BudgetAnswer(best.table[list(COLUMNS)].reset_index(drop=True), best.left_out)


def labelled(table: pd.DataFrame) -> pd.DataFrame:
    """The table with its display headers (:data:`LABELS`)."""
    return table.rename(columns=LABELS)


def empty_table() -> pd.DataFrame:
    """A table with the view's columns and no rows."""
    return pd.DataFrame(columns=list(COLUMNS))
