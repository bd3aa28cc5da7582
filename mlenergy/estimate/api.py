"""Public entry points: one estimate, a what-if sweep.

>>> from mlenergy.estimate import estimate
>>> e = estimate("meta-llama/Llama-3.1-8B-Instruct", "H100", batch_size=64,
...              input_tokens=512, output_tokens=256)            # doctest: +SKIP
>>> e.energy_per_token_j, e.throughput_tokens_per_s               # doctest: +SKIP
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mlenergy.errors import UserError
from mlenergy.estimate.catalog import GpuSpec
from mlenergy.estimate.checks import check_mode, expected_num_gpus
from mlenergy.estimate.coefficients import Coefficients, default_coefficients, interval_class
from mlenergy.estimate.engines import CURRENT_ENGINE, engine_note, is_legacy, resolve_engine
from mlenergy.estimate.features import stack
from mlenergy.estimate.host_bound import host_bound_note, is_host_bound
from mlenergy.estimate.offline import predict_offline
from mlenergy.estimate.physics import predict
from mlenergy.estimate.prepare import offline_setup, prepare_config
from mlenergy.estimate.serving import ServingSetup
from mlenergy.estimate.task_defaults import has_value, input_tokens_for, visual_tokens_for


@functools.cache
def estimator_version() -> str:
    """Version of the installed ``mlenergy-lab`` distribution (``0+unknown`` if not installed).

    Read once per process: the package metadata lookup costs more than an estimate.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mlenergy-lab")
    except PackageNotFoundError:
        return "0+unknown"


def energy_source() -> str:
    """The ``energy_source`` label of estimates: ``estimated:mlenergy-<version>``."""
    return f"estimated:mlenergy-{estimator_version()}"


def interval_factors(
    coef: Coefficients, gpu_name: str, host_bound: bool = False, family: str | None = None
) -> tuple[float, float]:
    """Multiplicative (low, high) factors of the 90% prediction interval of energy per token.

    Args:
        coef: Coefficients (their cross-validated quantiles).
        gpu_name: Catalog GPU name; a GPU absent from calibration widens the interval.
        host_bound: The configuration matches the host-bound rule
            (:mod:`~mlenergy.estimate.host_bound`).
        family: ``dense``, ``moe`` or ``hybrid``: the interval of its class on this GPU
            when calibrated (``Coefficients.interval_by_class``).
    """
    widen = 1.0 if gpu_name in coef.calibrated_gpus else coef.unseen_gpu_widen
    klass = interval_class(gpu_name, family) if family else None
    q05, q95 = coef.interval_logs(host_bound, klass)
    return math.exp(q05 * widen), math.exp(q95 * widen)


@dataclass(frozen=True)
class Estimate:
    """An estimate of steady-state serving (units in names).

    Energy figures are GPU energy summed over all GPUs of the configuration.
    """

    model: str
    gpu: str
    precision: str
    num_gpus: int
    tensor_parallel: int
    expert_parallel: int
    data_parallel: int
    pipeline_parallel: int
    batch_size: float
    input_tokens: float
    output_tokens: float
    task: str | None
    sm_clock_mhz: float
    power_limit_w: float | None
    energy_per_token_j: float
    energy_per_token_j_lo: float
    energy_per_token_j_hi: float
    energy_per_request_j: float
    throughput_tokens_per_s: float
    avg_power_w: float
    itl_s: float
    request_duration_s: float  # output_tokens x itl (prefill chunks interleaved)
    prefill_duration_s: float  # part of request_duration_s spent prefilling
    breakdown_j_per_token: dict[str, float]
    memory_gb_per_gpu: dict[str, float]
    total_params: int
    active_params: int
    architecture: str
    is_moe: bool
    energy_source: str
    extra: dict[str, Any] = field(default_factory=dict)
    warning: str = ""  # caveats ("; "-joined), as the batch CSV's ``warning`` column
    engine: str = CURRENT_ENGINE  # serving engine (see mlenergy.estimate.engines)
    mode: str = "serving"  # or "offline": a fixed set of requests (see estimate.offline)
    max_output_tokens: float | None = None  # generation cap of an offline job (tokens)
    max_num_seqs: float | None = None  # the engine's concurrency cap (all replicas)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-compatible)."""
        return asdict(self)


def _num_gpus(num_gpus: int | None, tp: int, ep: int, dp: int, pp: int) -> int:
    if num_gpus is not None:
        return int(num_gpus)
    return expected_num_gpus(tp, ep, dp, pp)


def power_limit_message(limit_w: float | None, draw_w: float, out: dict[str, float]) -> str:
    """The error of a power limit below the draw at the lowest SM clock (one line)."""
    return (
        f"power_limit {limit_w:g} W is below the {draw_w:.0f} W this workload draws per GPU "
        f"at the lowest SM clock {out['clock_mhz']:.0f} MHz; raise --power-limit to at least "
        f"{math.ceil(draw_w):.0f} W or lower the batch size"
    )


def offline_concurrency(mode: str, batch_size: float, max_num_seqs: float | None) -> float:
    """Sequences decoding together: an offline job's requests beyond ``max_num_seqs`` queue.

    In serving mode (or without a valid cap) the batch itself; the input checks judge it.
    """
    if mode != "offline" or max_num_seqs is None:
        return batch_size
    try:
        cap = float(max_num_seqs)
    except (TypeError, ValueError):
        return batch_size
    return min(float(batch_size), cap) if cap >= 1 else batch_size


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
            :class:`~mlenergy.estimate.catalog.GpuSpec`.
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
    coef = coefficients or default_coefficients()
    mode_name, cap = check_mode(mode, max_output_tokens, output_tokens)
    engine_name = resolve_engine(engine, task)
    note = engine_note(engine, task, engine_name, mode_name)
    n = _num_gpus(num_gpus, tensor_parallel, expert_parallel, data_parallel, pipeline_parallel)
    together = offline_concurrency(mode_name, batch_size, max_num_seqs)
    prompt_tokens = input_tokens_for(task, input_tokens)
    w = ServingSetup(
        batch_size=together,
        input_tokens=prompt_tokens,
        visual_tokens=visual_tokens_for(task, prompt_tokens),
        output_tokens=output_tokens,
        num_gpus=n,
        tensor_parallel=tensor_parallel,
        expert_parallel=expert_parallel,
        data_parallel=data_parallel,
        pipeline_parallel=pipeline_parallel,
        sm_clock_mhz=sm_clock_mhz,
        power_limit_w=power_limit_w,
        max_num_seqs=max_num_seqs,
        input_tokens_given=has_value(input_tokens),
        legacy_engine=is_legacy(engine_name),
    )
    queue_notes: list[str] = []
    scheduler = None
    if mode_name == "offline":
        equal = cap is None or cap <= output_tokens
        w, queue_notes, scheduler = offline_setup(model, gpu, w, precision, configs_dir, equal)
    prep = prepare_config(model, gpu, w, precision, configs_dir)
    spec, prof, gpu_spec = prep.spec, prep.prof, prep.gpu
    feats = stack([prep.features])
    if scheduler is not None:
        caps, jobs = np.array([np.nan if cap is None else cap]), np.array([float(batch_size)])
        budget = np.array([scheduler.max_num_batched_tokens])
        chunked = np.array([scheduler.chunked_prefill])
        pred = predict_offline(feats, coef, caps, jobs, budget, chunked)
    else:
        pred = predict(feats, coef)
    out = {k: float(v[0]) for k, v in pred.items()}
    if out["power_limit_infeasible"]:
        raise UserError(power_limit_message(power_limit_w, out["min_clock_power_w"], out))
    host = is_host_bound(gpu_spec.name, n, task, coef.host_bound_rule)
    lo, hi = interval_factors(coef, gpu_spec.name, host, spec.kind)
    warnings = [note] if note else []
    warnings += prep.warnings
    warnings += queue_notes
    if host:
        warnings.append(host_bound_note(coef.host_bound_rule))  # type: ignore[arg-type]
    e = out["energy_per_token_j"]
    itl = out["step_s"]
    # Serving: the prefill share of a request's lifetime; offline: the job's prefill steps.
    prefill_s = out.get("prefill_duration_s", out["t_prefill_s"] * w.output_tokens)
    return Estimate(
        model=str(model),
        gpu=gpu_spec.name,
        precision=prof.precision if not prof.is_moe else prof.expert_precision,
        num_gpus=n,
        tensor_parallel=tensor_parallel,
        expert_parallel=expert_parallel,
        data_parallel=data_parallel,
        pipeline_parallel=pipeline_parallel,
        batch_size=float(batch_size),
        input_tokens=w.input_tokens,
        output_tokens=float(output_tokens),
        task=task,
        sm_clock_mhz=out["clock_mhz"],
        power_limit_w=power_limit_w,
        energy_per_token_j=e,
        energy_per_token_j_lo=e * lo,
        energy_per_token_j_hi=e * hi,
        energy_per_request_j=e * w.output_tokens,
        throughput_tokens_per_s=out["throughput_tokens_per_s"],
        avg_power_w=out["avg_power_w"],
        itl_s=itl,
        request_duration_s=out.get("job_duration_s", itl * w.output_tokens),
        prefill_duration_s=prefill_s,
        breakdown_j_per_token={
            "prefill": out["energy_prefill_j"],
            "decode": out["energy_decode_j"],
            "compute": out["energy_compute_j"],
            "memory": out["energy_memory_j"],
            "static_idle": out["energy_static_j"],
            "overhead": out["energy_overhead_j"],
        },
        memory_gb_per_gpu=prep.memory_gb,
        total_params=prof.total_params,
        active_params=prof.active_params,
        architecture=spec.model_type,
        is_moe=spec.is_moe,
        energy_source=energy_source(),
        warning="; ".join(warnings),
        engine=engine_name,
        mode=mode_name,
        max_output_tokens=cap,
        max_num_seqs=None if max_num_seqs is None else float(max_num_seqs),
    )


SWEEPABLE = {
    "batch-size": "batch_size",
    "sm-clock": "sm_clock_mhz",
    "power-limit": "power_limit_w",
    "input-tokens": "input_tokens",
    "output-tokens": "output_tokens",
    "precision": "precision",
    "gpu": "gpu",
    "tensor-parallel": "tensor_parallel",
    "num-gpus": "num_gpus",
}
"""Sweep axis names (CLI spelling) and the :func:`estimate` argument each sets."""


def parse_sweep_axis(text: str) -> tuple[str, list[Any]]:
    """Parse ``name=v1,v2,...`` or ``name=start:stop:step`` (inclusive) into values.

    ``step`` is a positive magnitude; a range with ``start > stop`` counts down
    (``sm-clock=1980:900:90`` gives 1980, 1890, ..., 900).

    Raises:
        UserError: Unknown axis or malformed values.
    """
    if "=" not in text:
        raise UserError(f"sweep axis '{text}' must look like name=v1,v2 or name=a:b:step")
    name, values = text.split("=", 1)
    key = SWEEPABLE.get(name.strip().replace("_", "-"))
    if key is None:
        raise UserError(f"unknown sweep axis '{name}'", f"Use one of {', '.join(SWEEPABLE)}")
    if key in ("precision", "gpu"):
        return key, [v.strip() for v in values.split(",") if v.strip()]
    try:
        if ":" in values:
            start, stop, step = (float(x) for x in values.split(":"))
            if step <= 0:
                raise UserError(
                    f"sweep axis '{name.strip()}' needs a step > 0, got {step:g}",
                    "Write start:stop:step; a start above stop counts down",
                )
            sign = 1.0 if stop >= start else -1.0  # descending when start > stop
            vals = list(np.arange(start, stop + sign * step * 0.5, sign * step))
        else:
            vals = [float(v) for v in values.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"sweep axis '{text}' has malformed values") from None
    if not vals:
        raise UserError(f"sweep axis '{name.strip()}' has no values", "Give v1,v2 or a:b:step")
    if key in ("tensor_parallel", "num_gpus"):
        vals = [int(v) for v in vals]
    return key, vals


def sweep(base: dict[str, Any], axes: dict[str, list[Any]]) -> list[Estimate | str]:
    """Estimate every combination of ``axes`` over ``base`` arguments of :func:`estimate`.

    Returns:
        One :class:`Estimate` per combination, or the error message where it cannot be made
        (e.g. a batch that does not fit), in :func:`itertools.product` order.
    """
    names = list(axes)
    results: list[Estimate | str] = []
    for combo in itertools.product(*(axes[n] for n in names)):
        kw = dict(base)
        kw.update(dict(zip(names, combo, strict=True)))
        try:
            results.append(estimate(**kw))
        except UserError as exc:
            results.append(exc.message)
    return results
