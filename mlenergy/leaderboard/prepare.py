"""The leaderboard's run table: the store's flat runs plus the columns the leaderboard shows.

:func:`prepare_runs` keeps the successful inference runs and derives energy per output token,
tokens per joule, the hardware label, the architecture kind, the energy-source class and the
marks; :mod:`mlenergy.leaderboard.query` filters, ranks and pages the result.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlenergy.leaderboard.arch import architecture_kinds
from mlenergy.leaderboard.marks import attach_marks
from mlenergy.records.generation import method_label
from mlenergy.records.metrics import (
    energy_per_response_j,
    headline_column,
    mean_output_tokens_column,
)
from mlenergy.reference.gpus import catalog_name
from mlenergy.store.record_extras import interval_labels

SOURCE_KINDS = ("measured", "modelled", "estimated", "emulated", "reference")
"""The ``source_kind`` values, i.e. the prefix of ``energy_source``."""

MEASURED_GPU = "measured-gpu"
"""``source_class`` of energy measured by a counter on GPUs (``measured:*``, accelerators > 0)."""

SOURCE_CLASSES: dict[str, str] = {
    MEASURED_GPU: "Measured on GPUs",
    "measured-cpu": "Measured on CPUs",
    "modelled": "Modelled (no counter)",
    "estimated": "Estimated",
    "emulated": "Emulated (tests and demos)",
    "reference": "Reference",
}
"""``source_class`` values and their labels in the Energy source filter."""

METHODS = ("serving-steady-state", "static-batch")
"""``Workload.method`` values: an engine serving requests (its steady-state window) or fixed
static batches (the runner)."""


def _col(df: pd.DataFrame, name: str) -> pd.Series:
    """Return ``df[name]`` as float, or an all-NaN series when the column is missing."""
    if name in df.columns:
        return pd.to_numeric(df[name], errors="coerce").astype(float)
    return pd.Series(np.nan, index=df.index, dtype=float)


def _text(df: pd.DataFrame, name: str) -> pd.Series:
    """Return ``df[name]`` as strings with missing values as ``""``."""
    if name in df.columns:
        return df[name].astype(object).where(df[name].notna(), "").astype(str)
    return pd.Series("", index=df.index, dtype=object)


def _first(*series: pd.Series) -> pd.Series:
    """Element-wise first non-NaN value of several aligned series."""
    out = series[0].copy()
    for s in series[1:]:
        out = out.fillna(s)
    return out


def prepare_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Add the leaderboard's derived columns to a flat runs frame.

    Only successful inference runs are kept (``status == "ok"``, ``workload_kind`` not
    ``training``). Derived columns:
    ``energy_per_token_j`` (J per output token: the request phase, else decode),
    ``energy_per_response_j`` (J: energy per token x output tokens per request),
    ``throughput_tokens_per_s`` and ``avg_power_w`` (same phase choice), ``itl_ms``
    (median inter-token latency, ms), ``tokens_per_j`` (tokens per joule, i.e. tokens per
    second per watt), ``hardware`` (accelerator model by the GPU catalog's name where it
    matches one, so every spelling of a GPU is one hardware; else CPU model), ``arch_kind``
    (``dense``/``MoE``/``hybrid``, see
    :func:`mlenergy.leaderboard.arch.architecture_kind`), ``source_kind`` (prefix of
    ``energy_source`` when missing), ``source_class`` (see :data:`SOURCE_CLASSES`: measured
    splits into GPU and CPU rows), ``apart`` (``True`` for every row that is not measured on
    GPUs: such rows are shown below the measured ones), ``method_kind`` (``Workload.method``,
    ``""`` when not recorded; what the Method filter matches), ``method`` (shown: the kind and,
    where recorded, the generation backend, ``static-batch · compiled-static-cache``),
    ``host_bound``, ``unverified``, ``unverified_reasons``, ``marks`` and ``marks_why`` (see
    :mod:`mlenergy.leaderboard.marks`), ``interval`` (what the run's 95% intervals come from,
    :func:`mlenergy.store.record_extras.interval_labels`), ``active_params_b`` /
    ``total_params_b`` (billions), ``quality`` (NaN until
    :func:`mlenergy.leaderboard.views.attach_quality`) and ``_search`` (lower-case
    text searched by :func:`filter_runs`).

    Args:
        runs: One row per run with the store's flat columns (missing columns are tolerated).

    Returns:
        A new frame with a fresh 0..n-1 index.
    """
    df = runs
    if "status" in df.columns:
        df = df[df["status"].fillna("ok") == "ok"]
    if "workload_kind" in df.columns:  # a serving leaderboard: training runs have no J/token
        df = df[df["workload_kind"].fillna("inference") != "training"]
    df = df.reset_index(drop=True)
    ept = headline_column(df, "energy_per_token_j")
    thr = headline_column(df, "throughput_tokens_per_s")
    power = headline_column(df, "avg_power_w")
    df["energy_per_token_j"] = ept
    df["energy_per_response_j"] = energy_per_response_j(ept, mean_output_tokens_column(df))
    df["throughput_tokens_per_s"] = thr
    df["avg_power_w"] = power
    df["itl_ms"] = _col(df, "itl_p50_s") * 1000.0
    with np.errstate(divide="ignore", invalid="ignore"):
        tpj = np.where(ept > 0, 1.0 / ept, np.nan)
    df["tokens_per_j"] = tpj
    accel = _text(df, "accelerator_model")
    names = {n: catalog_name(n) for n in accel.unique() if n}  # the one GPU name matcher
    gpus = accel.replace({n: c for n, c in names.items() if n != c})
    df["hardware"] = gpus.where(accel != "", _text(df, "cpu_model").replace("", "CPU"))
    count = _col(df, "accelerator_count").fillna(0)
    df["accelerator_count"] = count.astype(int)
    df["arch_kind"] = architecture_kinds(df)
    source = _text(df, "energy_source")
    kind = _text(df, "source_kind")
    blank = (kind == "").to_numpy()
    if blank.any():  # derive the missing kinds from the energy_source prefix
        kind = kind.copy()
        kind[blank] = source[blank].str.split(":", n=1).str[0]
    df["source_kind"] = kind
    gpu = (df["accelerator_count"] > 0).to_numpy() & (accel != "").to_numpy()
    klass = kind.copy()
    klass[(kind == "measured").to_numpy() & gpu] = MEASURED_GPU
    klass[(kind == "measured").to_numpy() & ~gpu] = "measured-cpu"
    df["source_class"] = klass
    df["apart"] = (klass != MEASURED_GPU).to_numpy()
    df["method_kind"] = _text(df, "method")
    backend = _text(df, "generation_backend")
    df["method"] = [method_label(m, b) for m, b in zip(df["method_kind"], backend, strict=True)]
    df["active_params_b"] = _col(df, "active_params") / 1e9
    df["total_params_b"] = _col(df, "total_params") / 1e9
    df["batch_size"] = _first(_col(df, "max_num_seqs"), _col(df, "batch_size"))
    for name in ("model_id", "task", "dtype", "submitter", "energy_source", "run_id"):
        df[name] = _text(df, name)
    df["task"] = df["task"].replace("", "(none)")
    attach_marks(df)
    df["interval"] = interval_labels(df)
    if "quality" not in df.columns:
        df["quality"] = np.nan
    df["_group"] = pd.MultiIndex.from_arrays(
        [df["model_id"], df["hardware"], df["task"]]
    ).factorize()[0]
    df["_search"] = (
        df["model_id"]
        + " "
        + _text(df, "architecture")
        + " "
        + df["hardware"]
        + " "
        + df["submitter"]
        + " "
        + df["task"]
    ).str.lower()
    return df
