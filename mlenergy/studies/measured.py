"""The measured dense-versus-MoE study: real GPU measurements against published quality.

Energy comes from measured inference runs: ML.ENERGY's H100/B200 measurements, read directly
from the shipped reference (a read-only layer beside the store, never imported into it), and
the measured runs of the user's store. Quality comes from quality records in the store (measured
or imported for the model: they win) or else from published scores
(:mod:`mlenergy.quality.published`), labelled ``published:<benchmark>``.

For each model x GPU x task the study keeps the lowest-energy configuration whose median
inter-token latency meets the deadline; energy per response is energy per output token times
the exact mean output length. Configurations the estimator's host-bound rule flags
(:mod:`mlenergy.estimate.host_bound`: runs of that kind stalled on the host) carry
``host_bound=True``; the study gives its headlines with and without them. Where the quality
is an accuracy in % on a benchmark whose questions the task's runs answer (``gpqa`` runs and a
GPQA benchmark, :func:`~mlenergy.records.metrics.task_answers_benchmark`), energy per correct
answer is ``energy_per_response_j / (quality_score / 100)``. The comparisons are in
:mod:`mlenergy.studies.measured_analysis`, the report in :mod:`mlenergy.studies.measured_report`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mlenergy.analysis.quality_attach import (
    QualityFigure,
    matches_benchmark,
    normalise,
    pick_quality,
    published_quality,
    store_quality,
)
from mlenergy.analysis.stalls import host_bound_flags
from mlenergy.quality.published import PublishedScore, run_mode
from mlenergy.records import Phase, QualityResult, RunRecord
from mlenergy.records.metrics import (
    REASONING_BENCHMARK,
    energy_per_correct_j,
    energy_per_response_j,
    headline_phase,
    lowest_energy_positions,
    mean_output_tokens,
    meets_deadline,
    task_answers_benchmark,
)
from mlenergy.reference.gpus import catalog_name
from mlenergy.reference.runs import read_reference
from mlenergy.store import RunStore

__all__ = [
    "QualityFigure",
    "attach_quality",
    "best_configurations",
    "measured_frame",
    "pick_quality",
    "published_quality",
    "store_quality",
]

DEFAULT_BENCHMARK = REASONING_BENCHMARK
"""Quality figure of the reasoning task (``gpqa``) unless ``--benchmark`` says otherwise."""

SUMMARY_COLUMNS: tuple[str, ...] = (
    "model_id",
    "arch",
    "gpu",
    "task",
    "energy_per_response_j",
    "energy_per_token_j",
    "median_itl_ms",
    "quality_benchmark",
    "quality_score",
    "energy_per_correct_j",
    "energy_source",
    "quality_source",
)
"""Columns of ``summary.csv``, in order (kept exactly)."""


def _measured_by(run: RunRecord) -> str:
    """Who measured a run: its submitter, the tool it was imported from, or this project."""
    tool = run.tags.get("origin") or run.tags.get("imported_from")
    if run.submission is not None:
        if run.tags.get("imported_from"):
            return f"{tool}, submitted by {run.submission.submitter}"
        return run.submission.submitter
    if run.tags.get("imported_from"):
        return f"{tool}, imported"
    return "this project"


def _config_text(run: RunRecord) -> str:
    w = run.workload
    return (
        f"{run.hardware.accelerator_count} GPU TP{w.tensor_parallel} EP{w.expert_parallel} "
        f"DP{w.data_parallel} batch<={w.max_num_seqs or w.batch_size} {run.model.dtype}"
    )


def _config_row(run: RunRecord) -> dict[str, Any] | None:
    if run.workload.kind != "inference" or run.status != "ok":
        return None
    if not run.energy_source.startswith("measured:") or not run.hardware.accelerator_model:
        return None
    req = headline_phase(run)
    if req is None:
        return None
    itl = req.itl_p50_s
    if itl is None and (dec := run.phase(Phase.DECODE)) is not None:
        itl = dec.itl_p50_s
    out = mean_output_tokens(run)
    itl_is_mean_tpot = "mean time per output token" in run.tags.get("itl", "")
    return {
        "run_id": run.run_id,
        "model_id": run.model.model_id,
        "arch": run.model.kind,
        "gpu": catalog_name(run.hardware.accelerator_model),  # every spelling of a GPU is one
        "task": run.workload.task or "unlabelled",
        "num_gpus": run.hardware.accelerator_count,
        "configuration": _config_text(run),
        "total_params": run.model.total_params,
        "active_params": run.model.active_params,
        "mean_output_tokens": out,
        "energy_per_token_j": req.energy_per_token_j,
        "energy_per_response_j": float(energy_per_response_j(req.energy_per_token_j, out)),
        "median_itl_ms": itl * 1000.0 if itl is not None else math.nan,
        "latency_kind": "mean time per output token" if itl_is_mean_tpot else "median ITL",
        "avg_power_w": req.avg_power_w if req.avg_power_w is not None else math.nan,
        "energy_source": run.energy_source,
        "measured_by": _measured_by(run),
    }


LEGACY_SOURCES = frozenset({"ML.ENERGY Leaderboard v2"})
"""Measurements left out by default: ML.ENERGY's 2024 runs (vLLM 0.5.4, mean time per token
instead of a median inter-token latency) are not comparable with the 2026 ones."""


def measured_frame(
    runs: Iterable[RunRecord], gpu: str | None = None, *, include_legacy: bool = False
) -> pd.DataFrame:
    """One row per measured inference configuration (GPU runs with a ``measured:`` source).

    Args:
        runs: Run records (the store's).
        gpu: Keep only this accelerator (case-insensitive prefix, e.g. ``B200``, ``H100``).
        include_legacy: Keep the runs of :data:`LEGACY_SOURCES` too.

    Returns:
        Columns: ``run_id``, ``model_id``, ``arch``, ``gpu`` (the GPU catalog's name where the
        record's matches one), ``task``, ``num_gpus``,
        ``configuration``, ``total_params``, ``active_params``, ``mean_output_tokens`` (exact
        mean), ``energy_per_token_j`` (J per output token), ``energy_per_response_j`` (J),
        ``median_itl_ms`` (ms; for v2 rows the mean time per output token, see
        ``latency_kind``), ``latency_kind``, ``avg_power_w`` (W, all GPUs), ``energy_source``,
        ``measured_by``, ``host_bound`` (the estimator's host-bound rule flags it).
    """
    rows = [row for r in runs if (row := _config_row(r)) is not None]
    frame = pd.DataFrame(rows)
    if not include_legacy and not frame.empty:
        frame = frame[~frame["measured_by"].isin(LEGACY_SOURCES)]
    if gpu is not None and not frame.empty:
        frame = frame[frame["gpu"].str.lower().str.startswith(gpu.lower())]
    frame = frame.reset_index(drop=True)
    if not frame.empty:
        frame["host_bound"] = host_bound_flags(frame)
    return frame


def best_configurations(configs: pd.DataFrame, itl_limit_ms: float) -> pd.DataFrame:
    """The lowest-energy configuration within the deadline, per model x GPU x task.

    The rules are :mod:`mlenergy.records.metrics`'s (the leaderboard's and the planner's):
    a configuration meets the deadline when its median ITL is recorded and at most the limit;
    the best has the lowest energy per output token. A model with no configuration within the
    deadline keeps a row with no energy and a ``note`` naming its fastest median ITL.

    Args:
        configs: :func:`measured_frame`.
        itl_limit_ms: Deadline on the median inter-token latency, milliseconds.

    Returns:
        One row per model x GPU x task: the chosen configuration's columns plus
        ``configs_within`` (configurations meeting the deadline) and ``note``.
    """
    out = []
    for _, group in configs.groupby(["model_id", "gpu", "task"], sort=True):
        within = group[meets_deadline(group["median_itl_ms"], itl_limit_ms)]
        if within.empty:
            row = group.sort_values("median_itl_ms").iloc[0].copy()
            fastest = row["median_itl_ms"]
            for col in ("energy_per_response_j", "energy_per_token_j", "median_itl_ms"):
                row[col] = math.nan
            row["configuration"] = ""
            row["configs_within"] = 0
            row["note"] = (
                f"no configuration within {itl_limit_ms:g} ms (fastest {fastest:.1f} ms)"
                if math.isfinite(fastest)
                else "no median inter-token latency recorded, so no configuration can be "
                "judged against the deadline"
            )
        else:
            pos, _ = lowest_energy_positions(
                np.zeros(len(within), dtype=int), within["energy_per_token_j"].to_numpy(float)
            )
            row = within.iloc[int(pos[0])].copy()
            row["configs_within"] = len(within)
            row["note"] = ""
        out.append(row)
    return pd.DataFrame(out).reset_index(drop=True)


def unused_store_quality(
    records: Iterable[QualityResult], measured: set[str], benchmarks: list[str]
) -> list[str]:
    """Warnings for the store's quality records the study cannot use, one per model.

    Args:
        records: The store's quality records.
        measured: Model ids with measured runs in the study.
        benchmarks: The study's benchmarks (any case).

    Returns:
        ``"<model>: quality records of the store (<tasks>) ..."`` for records on no study
        benchmark or of a model with no measured run.
    """
    by_model: dict[str, set[str]] = {}
    for q in records:
        if not any(matches_benchmark(q, b) for b in benchmarks) or (
            q.model.model_id not in measured
        ):
            by_model.setdefault(q.model.model_id, set()).add(q.task)
    out = []
    for model_id, tasks in sorted(by_model.items()):
        why = (
            "no measured run of this model"
            if model_id not in measured
            else "on no benchmark of the study"
        )
        out.append(
            f"{model_id}: quality records of the store ({', '.join(sorted(tasks))}) not used: "
            f"{why} (the study compares {', '.join(benchmarks)}; --benchmark sets the gpqa "
            "task's)"
        )
    return out


def attach_quality(
    best: pd.DataFrame,
    scores: list[PublishedScore],
    quality_records: list[QualityResult],
    benchmarks: dict[str, str],
) -> pd.DataFrame:
    """Add the quality columns and energy per correct answer to :func:`best_configurations`.

    Adds ``quality_benchmark``, ``quality_score``, ``quality_is_accuracy``,
    ``quality_source``, ``quality_reference``, ``quality_how``, ``quality_alternatives``,
    ``quality_reason`` (why a row has no quality), ``run_mode`` and ``energy_per_correct_j``
    (J; only for accuracies in % of a benchmark whose questions the task answers,
    :func:`~mlenergy.records.metrics.task_answers_benchmark`).
    """
    rows = []
    for _, row in best.iterrows():
        row = row.copy()
        bench = benchmarks.get(row["task"])
        fig: QualityFigure | None = None
        reason = ""
        if bench is None:
            reason = f"no quality benchmark is mapped to task {row['task']!r}"
        else:
            fig = pick_quality(
                quality_records, scores, row["model_id"], bench, row["mean_output_tokens"]
            )
            if fig is None:
                reason = f"no {bench} figure published or stored for this model"
        row["run_mode"] = run_mode(row["mean_output_tokens"]) or ""
        row["quality_benchmark"] = bench or ""
        row["quality_score"] = fig.score if fig else math.nan
        row["quality_is_accuracy"] = bool(fig and fig.is_accuracy)
        row["quality_source"] = fig.source_label if fig else ""
        row["quality_reference"] = fig.reference if fig else ""
        row["quality_how"] = fig.how if fig else ""
        row["quality_alternatives"] = ", ".join(f"{a:g}" for a in fig.alternatives) if fig else ""
        row["quality_reason"] = reason
        row["energy_per_correct_j"] = energy_per_correct(
            row["energy_per_response_j"],
            row["quality_score"],
            row["quality_is_accuracy"] and task_answers_benchmark(row["task"], bench),
        )
        rows.append(row)
    return pd.DataFrame(rows).reset_index(drop=True)


def energy_per_correct(energy_per_response_j: float, score: float, is_accuracy: bool) -> float:
    """Energy per correct answer in joules: ``energy_per_response_j / (score / 100)``.

    Args:
        energy_per_response_j: Energy of one response, joules.
        score: Accuracy in % (0-100).
        is_accuracy: Whether ``score`` is an accuracy in % (otherwise NaN is returned).

    Returns:
        Joules per correct answer; NaN without an accuracy or energy, or at 0 % accuracy.
    """
    return float(energy_per_correct_j(energy_per_response_j, score, is_accuracy))


BENCHMARK_QUESTIONS = {"gpqadiamond": 198}
"""Questions per benchmark (normalised name), for the sampling interval of an accuracy."""


def accuracy_interval(score: float, benchmark: str) -> tuple[float, float] | None:
    """95% normal-approximation interval of an accuracy in %, from the benchmark's size.

    Returns:
        ``(low, high)`` in %, or ``None`` when the benchmark's size is not known.
    """
    n = BENCHMARK_QUESTIONS.get(normalise(benchmark))
    if n is None or not math.isfinite(score):
        return None
    p = score / 100.0
    half = 1.96 * math.sqrt(max(p * (1 - p), 0.0) / n)
    return max(p - half, 1e-9) * 100.0, min(p + half, 1.0) * 100.0


def energy_per_correct_interval(row: pd.Series) -> tuple[float, float] | None:
    """Energy per correct answer (J) at the ends of the accuracy's sampling interval."""
    ci = accuracy_interval(row["quality_score"], row["quality_benchmark"])
    if ci is None or not math.isfinite(row["energy_per_correct_j"]):
        return None
    energy = row["energy_per_response_j"]
    return energy / (ci[1] / 100.0), energy / (ci[0] / 100.0)


def summary_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The ``summary.csv`` table: exactly :data:`SUMMARY_COLUMNS`, sorted by task, GPU, model."""
    table = rows.sort_values(["task", "gpu", "model_id"], kind="stable")
    return table.loc[:, list(SUMMARY_COLUMNS)].reset_index(drop=True)


def load_measured_runs(
    data_dir: Path, reference: Path | None, include_reference: bool = True
) -> tuple[list[RunRecord], int]:
    """The store's runs and, beside them, the shipped reference's (read, not imported).

    Args:
        data_dir: The store folder (read only; a missing folder holds no run).
        reference: The reference folder (``None``: the shipped one).
        include_reference: Read the reference beside the store.

    Returns:
        ``(runs, from_reference)``: the runs (a store run with the same run id as a reference
        run, copied by an older mlenergy's ``import-reference``, now a no-op, is kept once)
        and how many came from the reference.

    Raises:
        UserError: The reference folder is missing or holds no table.
    """
    store = RunStore(data_dir)
    runs = store.runs() if store.results_dir.is_dir() else []
    if not include_reference:
        return runs, 0
    stored = {r.run_id for r in runs}
    layer = [r for r in read_reference(reference) if r.run_id not in stored]
    return [*runs, *layer], len(layer)
