"""Leaderboard views beyond the main table: quality join, model detail, side-by-side compare.

Quality results link to energy runs, best first, by: the run ids a result lists
(``linked_run_ids``: energy and quality measured in the same run), then the same model id and
config fingerprint, then the same config fingerprint, then the same model id. The link used is
shown in ``quality_link`` so that a reader can tell how close the pairing is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd

from mlenergy.leaderboard.query import best_configs, within_limits
from mlenergy.records import RunRecord

QUALITY_COLUMNS = (
    "quality_id",
    "model_id",
    "config_fingerprint",
    "task",
    "metric",
    "key",
    "value",
    "stderr",
    "higher_is_better",
    "linked_run_ids",
)

DETAIL_COLUMNS = (
    "run_id",
    "marks",
    "task",
    "hardware",
    "accelerator_count",
    "dtype",
    "batch_size",
    "energy_per_token_j",
    "itl_ms",
    "throughput_tokens_per_s",
    "avg_power_w",
    "quality",
    "quality_source",
    "energy_per_response_j",
    "energy_per_correct_j",
    "quality_link",
    "energy_source",
    "submitter",
    "avg_batch_size",
    "tensor_parallel",
    "expert_parallel",
    "data_parallel",
    "pipeline_parallel",
    "input_tokens",
    "output_tokens",
    "request_energy_j_ci95_low",
    "request_energy_j_ci95_high",
    "interval",
    "itl_p90_s",
    "itl_p99_s",
    "ttft_s",
    "idle_power_w",
    "repeats",
    "created_at",
    "marks_why",
    "host_bound",
    "unverified",
    "unverified_reasons",
)

COMPARE_METRICS = (
    ("hardware", "Hardware"),
    ("accelerator_count", "GPUs"),
    ("task", "Task"),
    ("arch_kind", "Architecture"),
    ("dtype", "Precision"),
    ("active_params_b", "Active params (B)"),
    ("total_params_b", "Total params (B)"),
    ("batch_size", "Batch / max_num_seqs"),
    ("energy_per_token_j", "Energy per output token (J)"),
    ("itl_ms", "Median ITL (ms)"),
    ("throughput_tokens_per_s", "Throughput (tokens/s)"),
    ("avg_power_w", "Average power (W)"),
    ("tokens_per_j", "Tokens per joule"),
    ("quality", "Quality"),
    ("quality_source", "Quality source"),
    ("energy_per_correct_j", "Energy per correct answer (J)"),
    ("energy_source", "Energy source"),
    ("submitter", "Submitter"),
    ("run_id", "Run id"),
)


def quality_key(task: str, metric: str) -> str:
    """Return the picker label of a quality figure, e.g. ``"perplexity:wikitext / perplexity"``."""
    return f"{task} / {metric}"


def quality_frame(flat: pd.DataFrame) -> pd.DataFrame:
    """Normalise the store's flat quality frame for :func:`attach_quality`.

    Args:
        flat: ``RunStore.quality_frame()`` (or rows of
            :func:`mlenergy.store.tables.flatten_quality`).

    Returns:
        One row per result with :data:`QUALITY_COLUMNS` (``linked_run_ids`` as tuples).
    """
    if flat.empty:
        return pd.DataFrame(columns=list(QUALITY_COLUMNS))
    out = pd.DataFrame(
        {
            "quality_id": flat["quality_id"].astype(str),
            "model_id": flat["model_id"].astype(str),
            "config_fingerprint": flat["config_fingerprint"].astype(str),
            "task": flat["task"].astype(str),
            "metric": flat["metric"].astype(str),
            "value": pd.to_numeric(flat["value"], errors="coerce").astype(float),
            "stderr": pd.to_numeric(
                flat["stderr"] if "stderr" in flat.columns else pd.Series(np.nan, index=flat.index),
                errors="coerce",
            ),
            "higher_is_better": flat["higher_is_better"].astype(bool),
        }
    )
    out["key"] = [quality_key(t, m) for t, m in zip(out["task"], out["metric"], strict=True)]
    links = flat.get("linked_run_ids_json")
    out["linked_run_ids"] = [
        tuple(json.loads(v)) if isinstance(v, str) and v else ()
        for v in (links if links is not None else [None] * len(out))
    ]
    return out[list(QUALITY_COLUMNS)]


def quality_keys(quality: pd.DataFrame) -> list[str]:
    """Return the distinct quality figures available, sorted."""
    return sorted(quality["key"].unique().tolist()) if len(quality) else []


def higher_is_better(quality: pd.DataFrame, key: str) -> bool:
    """Return the direction of quality figure ``key`` (True when missing)."""
    sel = quality.loc[quality["key"] == key, "higher_is_better"]
    return bool(sel.iloc[0]) if len(sel) else True


def attach_quality(runs: pd.DataFrame, quality: pd.DataFrame, key: str | None) -> pd.DataFrame:
    """Set ``quality`` and ``quality_link`` on every run for quality figure ``key``.

    Several results at the same link level are averaged.

    Args:
        runs: A frame from :func:`mlenergy.leaderboard.prepare.prepare_runs`.
        quality: A frame from :func:`quality_frame`.
        key: The figure to attach (see :func:`quality_keys`); ``None`` clears quality.

    Returns:
        A copy of ``runs`` with ``quality`` (float, NaN when unlinked), ``quality_link``,
        ``quality_source`` (``measured:<key>`` where linked) and ``energy_per_correct_j``
        (NaN: a stored figure is not a published accuracy in %).
    """
    out = runs.copy()
    out["quality"] = np.nan
    out["quality_link"] = ""
    out["quality_source"] = ""
    out["energy_per_correct_j"] = np.nan  # only published accuracies in % give it
    if key is None or quality.empty or out.empty:
        return out
    q = quality[quality["key"] == key]
    if q.empty:
        return out

    def _fill(values: pd.Series, label: str) -> None:
        todo = out["quality"].isna() & values.notna()
        out.loc[todo, "quality"] = values[todo]
        out.loc[todo, "quality_link"] = label

    linked = q[["linked_run_ids", "value"]].explode("linked_run_ids").dropna()
    if not linked.empty:
        by_run = linked.groupby("linked_run_ids")["value"].mean()
        _fill(out["run_id"].map(by_run), "same run")
    fp = out["config_fingerprint"] if "config_fingerprint" in out.columns else None
    if fp is not None:
        by_both = q.groupby(["model_id", "config_fingerprint"])["value"].mean()
        pairs = pd.MultiIndex.from_arrays([out["model_id"], fp])
        _fill(pd.Series(by_both.reindex(pairs).to_numpy(), index=out.index), "same model")
        _fill(fp.map(q.groupby("config_fingerprint")["value"].mean()), "same config")
    _fill(out["model_id"].map(q.groupby("model_id")["value"].mean()), "same model id")
    out.loc[out["quality"].notna(), "quality_source"] = f"measured:{key}"
    return out


def model_configs(df: pd.DataFrame, model_id: str) -> pd.DataFrame:
    """Every configuration of one model, by task, hardware and energy per token.

    Args:
        df: A prepared frame (quality attached or not).
        model_id: The model to show.

    Returns:
        The model's runs with :data:`DETAIL_COLUMNS` (those present), best first per task.
    """
    rows = df[df["model_id"] == model_id]
    cols = [c for c in DETAIL_COLUMNS if c in rows.columns]
    return rows.sort_values(
        ["task", "hardware", "energy_per_token_j"], kind="stable", na_position="last"
    )[cols]


SERVER_LOCAL_TAGS = frozenset({"server_log", "endpoint"})
"""Run tags that only mean something on the machine that measured the run (the serving log's
path, the engine's internal URL): kept in the store, never in what the board shows or exports."""


def run_provenance(record: RunRecord) -> dict:
    """Return a run's provenance as plain JSON data (everything but the bulky timeline).

    Args:
        record: The run.

    Returns:
        Model, workload, hardware, software, energy source and scope, repeats, idle
        baseline, submission and tags (less :data:`SERVER_LOCAL_TAGS`), plus each phase's
        figures.
    """
    data = record.model_dump(mode="json", exclude={"power_timeline", "checkpoints"})
    if isinstance(data.get("tags"), dict):
        data["tags"] = {k: v for k, v in data["tags"].items() if k not in SERVER_LOCAL_TAGS}
    first = (
        "run_id",
        "energy_source",
        "model",
        "submission",
        "hardware",
        "software",
        "workload",
        "scope",
    )
    ordered = {k: data[k] for k in first if k in data}
    ordered.update((k, v) for k, v in data.items() if k not in ordered)
    return ordered


def compare_models(
    df: pd.DataFrame,
    model_ids: Sequence[str],
    max_itl_ms: float | None = None,
    max_energy_per_token_j: float | None = None,
) -> pd.DataFrame:
    """Put 2 to 4 models side by side: each model's best configuration in ``df``.

    Args:
        df: A prepared frame, already filtered (task, hardware...) as the user chose.
        model_ids: The models to compare, in column order.
        max_itl_ms: Latency deadline in ms, or ``None``.
        max_energy_per_token_j: Energy budget in J per output token, or ``None``.

    Returns:
        One row per metric (``Metric`` column first), one column per model; ``"-"`` where a
        model has no configuration meeting the limits.
    """
    limited = within_limits(
        df[df["model_id"].isin(list(model_ids))], max_itl_ms, max_energy_per_token_j
    )
    best = best_configs(limited, keys=("model_id",)).set_index("model_id")
    table: dict[str, list] = {"Metric": [label for _, label in COMPARE_METRICS]}
    for model in model_ids:
        if model in best.index:
            row = best.loc[model]
            table[model] = [row.get(name, None) for name, _ in COMPARE_METRICS]
        else:
            table[model] = ["-"] * len(COMPARE_METRICS)
    return pd.DataFrame(table)
