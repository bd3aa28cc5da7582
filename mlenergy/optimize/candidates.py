"""Serving configurations to choose from: measured (store, reference runs) and estimated.

One row per configuration with the columns of :data:`CANDIDATE_COLUMNS`; ``avg_power_w`` is the
average GPU power of the whole configuration (all its GPUs), ``throughput_tokens_per_s`` its
output tokens per second, ``median_itl_ms`` its median inter-token latency. Every row keeps its
``source`` label (``measured:...`` or ``estimated:mlenergy-<version>``).

The two adapters :func:`reference_candidates` and :func:`estimated_candidates` are the only
places that call the reference reader and the estimator.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from mlenergy.errors import UserError
from mlenergy.records.metrics import headline_sql

CANDIDATE_COLUMNS = (
    "model_id",
    "task",
    "gpu",
    "num_gpus",
    "tensor_parallel",
    "expert_parallel",
    "data_parallel",
    "max_num_seqs",
    "precision",
    "power_limit_w",
    "throughput_tokens_per_s",
    "avg_power_w",
    "energy_per_token_j",
    "median_itl_ms",
    "output_tokens",
    "source",
)
CONFIG_KEY = (
    "gpu",
    "num_gpus",
    "tensor_parallel",
    "expert_parallel",
    "data_parallel",
    "max_num_seqs",
    "precision",
    "power_limit_w",
)


def _tdp_w(gpu: str) -> float | None:
    from mlenergy.reference.gpus import resolve_gpu

    try:
        return float(resolve_gpu(gpu).tdp_w)
    except UserError:
        return None


def reference_candidates(model: str, task: str, reference: str | Path | None) -> pd.DataFrame:
    """Measured configurations of ``model`` on ``task`` from the reference runs.

    Power limit: the GPU's default (its TDP), as the runs were measured.
    """
    from mlenergy.reference.measurements import load_reference

    ref = load_reference(reference, include_v2=True)
    rows = ref[(ref["model_id"] == model) & (ref["task"] == task)]
    if rows.empty:
        return pd.DataFrame(columns=CANDIDATE_COLUMNS)
    out = pd.DataFrame(
        {
            "model_id": rows["model_id"],
            "task": rows["task"],
            "gpu": rows["gpu"],
            "num_gpus": rows["num_gpus"].astype(int),
            "tensor_parallel": rows["tensor_parallel"].astype(int),
            "expert_parallel": rows["expert_parallel"].astype(int),
            "data_parallel": rows["data_parallel"].astype(int),
            "max_num_seqs": rows["max_num_seqs"].astype(int),
            "precision": rows["precision"],
            "power_limit_w": rows["gpu"].map(_tdp_w),
            "throughput_tokens_per_s": rows["throughput_tokens_per_s"],
            "avg_power_w": rows["avg_power_w"],
            "energy_per_token_j": rows["energy_per_token_j"],
            "median_itl_ms": rows["itl_s"] * 1e3,
            "output_tokens": rows["output_tokens"],
            "source": "measured:ml.energy-leaderboard-" + rows["source"].astype(str),
        }
    )
    return out.reset_index(drop=True)


STORE_SQL = f"""
select model_id, task, accelerator_model as gpu, accelerator_count as num_gpus,
       tensor_parallel, expert_parallel, data_parallel, max_num_seqs, dtype as precision,
       {headline_sql("throughput_tokens_per_s")} as throughput_tokens_per_s,
       {headline_sql("avg_power_w")} as avg_power_w,
       {headline_sql("energy_per_token_j")} as energy_per_token_j,
       itl_p50_s * 1000 as median_itl_ms, output_tokens, energy_source, run_id
from runs
where model_id = ? and task = ? and status = 'ok' and energy_source like 'measured:%'
  and accelerator_model is not null
"""


def store_candidates(model: str, task: str, data_dir: str | Path | None) -> pd.DataFrame:
    """Measured GPU runs of ``model`` on ``task`` in the store (none if the store is empty).

    A run's figures come from its headline phase (:mod:`mlenergy.records.metrics`: the whole
    request, as ML.ENERGY reports it, else the decode phase), the same as every other view.
    """
    if data_dir is None or not (Path(data_dir) / "results").is_dir():
        return pd.DataFrame(columns=CANDIDATE_COLUMNS)
    from mlenergy.store import RunStore

    rows = RunStore(data_dir).query(STORE_SQL, [model, task])
    rows = rows.dropna(subset=["throughput_tokens_per_s", "avg_power_w", "median_itl_ms"])
    if rows.empty:
        return pd.DataFrame(columns=CANDIDATE_COLUMNS)
    rows = rows.assign(
        power_limit_w=rows["gpu"].map(_tdp_w),
        source=rows["energy_source"] + " (run " + rows["run_id"].astype(str) + ")",
    )
    return rows[list(CANDIDATE_COLUMNS)].reset_index(drop=True)


def parse_power_limits(text: str | None) -> list[float | None]:
    """``400:700:50`` -> [400, 450, ..., 700]; ``500,600`` -> [500, 600]; None -> [None].

    Raises:
        UserError: Not a range or list of positive numbers.
    """
    if not text:
        return [None]
    try:
        if ":" in text:
            lo, hi, step = (float(x) for x in text.split(":"))
            if step <= 0 or hi < lo or lo <= 0:
                raise ValueError
            return [float(v) for v in np.arange(lo, hi + step / 2, step)]
        values = [float(x) for x in text.split(",")]
        if any(v <= 0 or not math.isfinite(v) for v in values):
            raise ValueError
        limits: list[float | None] = list(values)
        return limits
    except ValueError:
        raise UserError(
            f"--power-limits {text!r} is not LOW:HIGH:STEP or a list of positive watts",
            "Pass e.g. 400:700:50",
        ) from None


def _output_tokens(measured: pd.DataFrame, task: str, reference: str | Path | None) -> float | None:
    if not measured.empty:
        return float(measured["output_tokens"].median())
    from mlenergy.reference.measurements import load_reference

    try:
        ref = load_reference(reference, include_v2=False)
    except UserError:
        return None
    rows = ref[ref["task"] == task]
    return float(rows["output_tokens"].median()) if not rows.empty else None


def _layouts(num_gpus_options: tuple[int, ...]) -> list[tuple[int, int, int, int]]:
    out = []
    for n in num_gpus_options:
        out.append((n, n, 1, 1))  # tensor parallel
        if n > 1:
            out.append((n, 1, n, n))  # experts over GPUs, attention data parallel
    return out


def _no_estimate(model: str, errors: list[str]) -> None:
    reason = errors[0] if errors else "no configuration fits"
    raise UserError(
        f"no measurement and no estimate possible for model {model!r}: {reason}",
        "Check the model id (or pass a config path) and the task",
    )


def estimated_candidates(
    model: str,
    task: str,
    gpus: list[str],
    precisions: list[str],
    power_limits: list[float | None],
    measured: pd.DataFrame,
    reference: str | Path | None = None,
    batch_caps: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512, 1024),
    num_gpus_options: tuple[int, ...] = (1, 2, 4, 8),
) -> pd.DataFrame:
    """What the estimator predicts for configurations nobody measured.

    A grid of GPU x precision x power limit x batch cap x layout (tensor parallel over 1-8 GPUs;
    for MoE also experts over the GPUs with data-parallel attention); configurations that do
    not fit in memory or that the estimator refuses are left out. Rows whose configuration was
    measured are dropped (the measurement is kept instead).

    Raises:
        UserError: The estimator does not know ``model`` or no output length is known for
            ``task``.
    """
    from mlenergy.estimate import estimate

    out_tokens = _output_tokens(measured, task, reference)
    if out_tokens is None:
        raise UserError(
            f"no measured output length for task {task!r}",
            "Measure the task once or pick a task of the reference runs",
        )
    rows: list[dict] = []
    errors: list[str] = []
    is_moe = None
    for gpu in gpus:
        for prec in precisions:
            for limit in power_limits:
                for n, tp, ep, dp in _layouts(num_gpus_options):
                    for cap in batch_caps:
                        if is_moe is False and ep > 1:
                            continue
                        try:
                            e = estimate(
                                model,
                                gpu,
                                batch_size=float(cap),
                                output_tokens=out_tokens,
                                task=task,
                                precision=prec,
                                num_gpus=n,
                                tensor_parallel=tp,
                                expert_parallel=ep,
                                data_parallel=dp,
                                power_limit_w=limit,
                                max_num_seqs=cap,
                            )
                        except UserError as exc:
                            errors.append(exc.message)
                            if exc.message.startswith(f"model {model!r}"):
                                if measured.empty:
                                    _no_estimate(model, errors)
                                return pd.DataFrame(columns=CANDIDATE_COLUMNS)
                            continue
                        is_moe = e.is_moe
                        rows.append(
                            {
                                "model_id": model,
                                "task": task,
                                "gpu": e.gpu,
                                "num_gpus": n,
                                "tensor_parallel": tp,
                                "expert_parallel": ep,
                                "data_parallel": dp,
                                "max_num_seqs": cap,
                                "precision": e.precision,
                                "power_limit_w": limit if limit is not None else _tdp_w(e.gpu),
                                "throughput_tokens_per_s": e.throughput_tokens_per_s,
                                "avg_power_w": e.avg_power_w,
                                "energy_per_token_j": e.energy_per_token_j,
                                "median_itl_ms": e.itl_s * 1e3,
                                "output_tokens": out_tokens,
                                "source": e.energy_source,
                            }
                        )
    est = pd.DataFrame(rows, columns=CANDIDATE_COLUMNS)
    if est.empty and measured.empty:
        _no_estimate(model, errors)
    if est.empty or measured.empty:
        return est
    seen = set(measured[list(CONFIG_KEY)].itertuples(index=False, name=None))
    keep = [k not in seen for k in est[list(CONFIG_KEY)].itertuples(index=False, name=None)]
    return est[keep].reset_index(drop=True)
