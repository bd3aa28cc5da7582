"""Public entry points: one estimate, a what-if sweep.

>>> from mlenergy.estimate import estimate
>>> e = estimate("meta-llama/Llama-3.1-8B-Instruct", "H100", batch_size=64,
...              input_tokens=512, output_tokens=256)            # doctest: +SKIP
>>> e.energy_per_token_j, e.throughput_tokens_per_s               # doctest: +SKIP
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from mlenergy.errors import UserError
from mlenergy.estimate.coefficients import Coefficients
from mlenergy.estimate.requests import EstimateRequests
from mlenergy.estimate.table import estimate_table
from mlenergy.estimate.table_rows import Estimate, energy_source, estimator_version
from mlenergy.reference.gpus import GpuSpec

__all__ = [
    "Estimate",
    "energy_source",
    "estimate",
    "estimator_version",
    "sweep",
]


def estimate(
    model: str,
    gpu: str | GpuSpec,
    batch_size: float,
    output_tokens: float,
    input_tokens: float | None = None,
    task: str | None = None,
    precision: str | None = None,
    num_gpus: int | None = None,
    tensor_parallel: int = 1,
    expert_parallel: int = 1,
    data_parallel: int = 1,
    pipeline_parallel: int = 1,
    sm_clock_mhz: float | None = None,
    power_limit_w: float | None = None,
    max_num_seqs: int | None = None,
    engine: str | None = None,
    configs_dir: str | Path | None = None,
    coefficients: Coefficients | None = None,
    mode: str | None = None,
    max_output_tokens: float | None = None,
) -> Estimate:
    """Estimate energy, throughput and power of serving ``model`` on ``gpu``.

    Args:
        model: ``config.json`` path or model id (see
            :func:`~mlenergy.estimate.configs.resolve_model`).
        gpu: Catalog name/alias, a YAML/JSON spec file of a hypothetical GPU, or a
            :class:`~mlenergy.reference.gpus.GpuSpec`.
        batch_size: Average number of sequences decoding together (all replicas).
        output_tokens: Mean output length (tokens).
        input_tokens: Mean prompt length (tokens); default: the task's.
        task: Workload label: it gives the default prompt length, and a multimodal task
            (``image-chat``, ``video-chat``) makes the prompt visual tokens, each costing
            the engine host time before its prefill.
        precision: Weight precision (bfloat16, float16, fp8, mxfp4, nvfp4); default bfloat16.
        num_gpus: GPUs used; default and required value: ``tp * pp * dp``, or ``ep`` when
            experts span more GPUs (see :func:`~mlenergy.estimate.checks.expected_num_gpus`).
        tensor_parallel: Tensor-parallel degree.
        expert_parallel: Expert-parallel degree.
        data_parallel: Data-parallel replicas.
        pipeline_parallel: Pipeline stages.
        sm_clock_mhz: Locked SM clock in MHz (default: maximum), within the GPU's
            ``min_sm_clock_mhz``..``max_sm_clock_mhz``; excludes ``power_limit_w``.
        power_limit_w: Power limit per GPU in watts (default: TDP), with
            ``0 < power_limit_w <= tdp_w`` of one GPU; the clock is lowered until power fits.
            A limit below the draw at the lowest SM clock is an error.
        max_num_seqs: The engine's concurrency cap (all replicas): in serving mode
            ``batch_size`` may not exceed it; an offline job of more requests runs this many
            at a time, the rest queued; it sizes the sampler workspace (default:
            ``batch_size``).
        engine: Engine profile (``leaderboard-v3-server``, ``leaderboard-v2-server`` or an
            alias such as ``vllm-0.11``); default: the one the task was measured with, else
            the current one (see :mod:`~mlenergy.estimate.engines`).
        configs_dir: Folder of ``<org>__<name>.json`` configs.
        coefficients: Model coefficients (default: the shipped calibration).
        mode: ``serving`` (steady state, the default) or ``offline``: ``batch_size``
            requests started together (at most ``max_num_seqs`` at a time), the batch
            shrinking as they end
            (:mod:`~mlenergy.estimate.offline`); throughput and power are then job means and
            ``request_duration_s`` is the job's wall time.
        max_output_tokens: Generation cap of an offline job (>= ``output_tokens``; default:
            every sequence generates ``output_tokens``).

    The memory fit follows :mod:`~mlenergy.estimate.memory`: weights and workspace that do not
    fit are an error; a KV cache that does not fit is an error when ``input_tokens`` is given
    and a warning (``Estimate.warning``) when it is the task default.

    Raises:
        UserError: Bad input (naming the field) or a configuration that does not fit in memory.
    """
    request = EstimateRequests.one(
        model=model,
        gpu=gpu,
        batch_size=batch_size,
        output_tokens=output_tokens,
        input_tokens=input_tokens,
        task=task,
        precision=precision,
        num_gpus=num_gpus,
        tensor_parallel=tensor_parallel,
        expert_parallel=expert_parallel,
        data_parallel=data_parallel,
        pipeline_parallel=pipeline_parallel,
        sm_clock_mhz=sm_clock_mhz,
        power_limit_w=power_limit_w,
        max_num_seqs=max_num_seqs,
        engine=engine,
        mode=mode,
        max_output_tokens=max_output_tokens,
    )
    return estimate_table(request, configs_dir, coefficients).estimate(0)


def sweep(base: dict[str, Any], axes: dict[str, list[Any]]) -> list[Estimate | str]:
    """Estimate every combination of ``axes`` over ``base`` arguments of :func:`estimate`.

    The combinations are one table of requests (the path of every estimate), so a sweep of
    thousands of points takes about as long as one estimate.

    Returns:
        One :class:`Estimate` per combination, or the error message where it cannot be made
        (e.g. a batch that does not fit), in :func:`itertools.product` order.
    """
    names = list(axes)
    kw = {k: v for k, v in base.items() if k not in ("configs_dir", "coefficients")}
    combos = [
        {**kw, **dict(zip(names, combo, strict=True))}
        for combo in itertools.product(*(axes[n] for n in names))
    ]
    if not combos:
        return []
    requests = EstimateRequests.concat([EstimateRequests.one(**c) for c in combos])
    table = estimate_table(requests, base.get("configs_dir"), base.get("coefficients"))
    results: list[Estimate | str] = []
    for i in range(len(combos)):
        try:
            results.append(table.estimate(i))
        except UserError as exc:
            results.append(exc.message)
    return results
