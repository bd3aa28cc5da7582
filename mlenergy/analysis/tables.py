"""Tidy tables of study records for notebooks, reports and the leaderboard.

Each function takes a :class:`~mlenergy.store.RunStore` or plain records and returns a
``pandas.DataFrame`` with one row per observation and units in column names. Records of a
study are joined through their tags (``study``, ``study_id``, ``variant``, ``seed``...).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from mlenergy.records import Phase, QualityResult, RunRecord
from mlenergy.store.tables import model_columns

_TAG_COLUMNS = ("study", "study_id", "variant", "family", "role", "seed", "size")


def _runs(source: Any) -> list[RunRecord]:
    if hasattr(source, "runs") and callable(source.runs):
        return list(source.runs())
    return [r for r in source if isinstance(r, RunRecord)]


def _quality(source: Any) -> list[QualityResult]:
    if hasattr(source, "quality") and callable(source.quality):
        return list(source.quality())
    return [r for r in source if isinstance(r, QualityResult)]


def _select(records: Iterable[Any], study_id: str | None, study: str | None) -> list[Any]:
    out = []
    for r in records:
        if study_id is not None and r.tags.get("study_id") != study_id:
            continue
        if study is not None and r.tags.get("study") != study:
            continue
        out.append(r)
    return out


def _tag_cols(tags: dict[str, str]) -> dict[str, Any]:
    row: dict[str, Any] = {k: tags.get(k) for k in _TAG_COLUMNS}
    row["seed"] = int(tags["seed"]) if tags.get("seed", "").isdigit() else None
    return row


def _model_cols(r: RunRecord | QualityResult) -> dict[str, Any]:
    """The store's model columns, plus ``num_shared_experts`` (dense-vs-MoE studies vary it)."""
    return {**model_columns(r.model), "num_shared_experts": r.model.num_shared_experts}


def _utilisation_cv(util: tuple[float, ...] | None) -> float | None:
    if not util:
        return None
    arr = np.asarray(util, dtype=float)
    return float(arr.std() / arr.mean()) if arr.mean() > 0 else None


def training_frame(
    source: Any, *, study_id: str | None = None, study: str | None = None
) -> pd.DataFrame:
    """One row per successful training run.

    Args:
        source: A ``RunStore`` or an iterable of records.
        study_id: Keep only records tagged with this study id.
        study: Keep only records tagged with this study name (e.g. ``dense-vs-moe``).

    Returns:
        Columns: ``run_id``, the tag columns, model columns, ``energy_source``,
        ``train_energy_j``, ``train_duration_s``, ``train_tokens``, ``train_avg_power_w``,
        ``train_tokens_per_s``, ``final_val_perplexity``, ``final_train_loss``,
        ``final_load_balancing_loss``, ``expert_utilisation`` (tuple) and
        ``expert_utilisation_cv`` (coefficient of variation across experts; 0 = balanced).
    """
    rows = []
    for r in _select(_runs(source), study_id, study):
        if r.workload.kind != "training" or r.status != "ok":
            continue
        ph = r.phase(Phase.TRAIN)
        last = r.checkpoints[-1] if r.checkpoints else None
        rows.append(
            {
                "run_id": r.run_id,
                **_tag_cols(r.tags),
                **_model_cols(r),
                "energy_source": r.energy_source,
                "steps": r.workload.steps,
                "seq_len": r.workload.seq_len,
                "train_energy_j": ph.energy_j if ph else None,
                "train_duration_s": ph.duration_s if ph else None,
                "train_tokens": ph.tokens if ph else None,
                "train_avg_power_w": ph.avg_power_w if ph else None,
                "train_tokens_per_s": ph.throughput_tokens_per_s if ph else None,
                "final_val_perplexity": last.val_perplexity if last else None,
                "final_train_loss": last.train_loss if last else None,
                "final_load_balancing_loss": last.load_balancing_loss if last else None,
                "expert_utilisation": r.expert_utilisation,
                "expert_utilisation_cv": _utilisation_cv(r.expert_utilisation),
            }
        )
    return pd.DataFrame(rows)


def checkpoints_frame(
    source: Any, *, study_id: str | None = None, study: str | None = None
) -> pd.DataFrame:
    """One row per training checkpoint (the energy-to-quality curves).

    Returns:
        Columns: ``run_id``, tag columns, ``model_id``, ``is_moe``, ``energy_source``,
        ``step``, ``tokens_seen``, ``duration_s``, ``energy_j``, ``train_loss``,
        ``val_perplexity``, ``load_balancing_loss``.
    """
    rows = []
    for r in _select(_runs(source), study_id, study):
        if r.workload.kind != "training" or r.status != "ok":
            continue
        for c in r.checkpoints:
            rows.append(
                {
                    "run_id": r.run_id,
                    **_tag_cols(r.tags),
                    "model_id": r.model.model_id,
                    "is_moe": r.model.is_moe,
                    "energy_source": r.energy_source,
                    "step": c.step,
                    "tokens_seen": c.tokens_seen,
                    "duration_s": c.duration_s,
                    "energy_j": c.energy_j,
                    "train_loss": c.train_loss,
                    "val_perplexity": c.val_perplexity,
                    "load_balancing_loss": c.load_balancing_loss,
                }
            )
    return pd.DataFrame(rows)


def inference_frame(
    source: Any, *, study_id: str | None = None, study: str | None = None
) -> pd.DataFrame:
    """One row per successful inference run (one batch size of one model).

    Returns:
        Columns: ``run_id``, tag columns, model columns, ``energy_source``, ``batch_size``,
        ``input_tokens``, ``output_tokens``, ``request_energy_j``, ``request_duration_s``,
        ``energy_per_token_j`` (whole request per generated token), ``decode_energy_per_token_j``,
        ``throughput_tokens_per_s`` (generated tokens per second), ``avg_power_w``,
        ``tokens_per_s_per_w`` and ``idle_power_w``.
    """
    rows = []
    for r in _select(_runs(source), study_id, study):
        if r.workload.kind != "inference" or r.status != "ok":
            continue
        req = r.phase(Phase.REQUEST)
        dec = r.phase(Phase.DECODE)
        if req is None:
            continue
        tps = req.throughput_tokens_per_s
        power = req.avg_power_w
        rows.append(
            {
                "run_id": r.run_id,
                **_tag_cols(r.tags),
                **_model_cols(r),
                "energy_source": r.energy_source,
                "batch_size": r.workload.batch_size,
                "input_tokens": r.workload.input_tokens,
                "output_tokens": r.workload.output_tokens,
                "request_energy_j": req.energy_j,
                "request_duration_s": req.duration_s,
                "energy_per_token_j": req.energy_per_token_j,
                "decode_energy_per_token_j": dec.energy_per_token_j if dec else None,
                "throughput_tokens_per_s": tps,
                "avg_power_w": power,
                "tokens_per_s_per_w": (tps / power) if tps and power else None,
                "idle_power_w": r.idle.avg_power_w if r.idle else None,
            }
        )
    return pd.DataFrame(rows)


def quality_frame(
    source: Any, *, study_id: str | None = None, study: str | None = None
) -> pd.DataFrame:
    """One row per quality result.

    Returns:
        Columns: ``quality_id``, tag columns, model columns, ``task``, ``metric``, ``value``,
        ``stderr``, ``higher_is_better``, ``num_tokens``, ``dataset``, ``linked_run_ids``.
    """
    rows = []
    for q in _select(_quality(source), study_id, study):
        rows.append(
            {
                "quality_id": q.quality_id,
                **_tag_cols(q.tags),
                **_model_cols(q),
                "task": q.task,
                "metric": q.metric,
                "value": q.value,
                "stderr": q.stderr,
                "higher_is_better": q.higher_is_better,
                "num_tokens": q.num_tokens,
                "dataset": q.dataset,
                "linked_run_ids": q.linked_run_ids,
            }
        )
    return pd.DataFrame(rows)


def latest_study_id(source: Any, study: str) -> str | None:
    """The ``study_id`` of the most recent training run tagged ``study``, if any."""
    best = None
    for r in _runs(source):
        if (
            r.tags.get("study") == study
            and r.tags.get("study_id")
            and (best is None or r.created_at > best.created_at)
        ):
            best = r
    return best.tags["study_id"] if best else None
