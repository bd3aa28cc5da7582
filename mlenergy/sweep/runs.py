"""Execute one run of a sweep in the current process and return its records (nothing stored).

Both executors call :func:`execute_run`: the in-process one directly, the Ray one inside a
fresh worker process. The records come back to the driver, which is the only writer of the
store. Every record carries the run's key in ``tags["sweep_key"]``.
"""

from __future__ import annotations

import math
import os

from mlenergy.errors import UserError
from mlenergy.measure.provenance import collect_hardware, collect_software
from mlenergy.models import load_model, model_info_from_config
from mlenergy.models.loading import canonical_dtype, resolve_source
from mlenergy.records import Hardware, QualityResult, RunRecord, Workload, utc_now
from mlenergy.records.provenance import Weights
from mlenergy.sweep.placement import run_meter, split_layers
from mlenergy.sweep.quality_step import run_quality
from mlenergy.sweep.spec import KEY_TAG, PLAN_TAG, RunSpec
from mlenergy.workloads.inference import InferenceSpec, run_inference_sweep

Record = RunRecord | QualityResult


def sweep_tags(spec: RunSpec) -> dict[str, str]:
    """Tags every record of ``spec`` carries: its key and the plan that ran it."""
    return {KEY_TAG: spec.key, PLAN_TAG: spec.plan}


def visible_gpu_ids(count: int) -> list[str]:
    """Physical ids of the ``count`` GPUs this process may use (``CUDA_VISIBLE_DEVICES``)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [v.strip() for v in visible.split(",") if v.strip()] if visible else []
    return ids[:count] if len(ids) >= count else [str(i) for i in range(count)]


def execute_run(spec: RunSpec, idle_s: float = 0.0) -> list[Record]:
    """Run ``spec`` here and return its records (tagged with the run's key).

    Args:
        spec: The run.
        idle_s: Seconds of idle power to measure before a bench run (0: skip).

    Raises:
        UserError: A bad model, device or setting found only now.
        Exception: Whatever the run raised (the executor stores it as a failed run).
    """
    if spec.kind == "bench":
        return [_bench(spec, idle_s)]
    if spec.kind == "estimate":
        return [_estimate(spec)]
    if spec.kind == "serve":
        return [_serve(spec, idle_s)]

    return [*run_quality(spec, sweep_tags(spec))]


def _bench(spec: RunSpec, idle_s: float) -> RunRecord:
    inference = InferenceSpec(
        batch_sizes=(spec.batch_size,),
        input_tokens=spec.input_tokens,
        output_tokens=spec.output_tokens,
        repeats=spec.repeats,
        warmup=spec.warmup,
        prompts=spec.prompts,
        seed=spec.seed,
        dtype=spec.precision,
        device=spec.device,
        idle_s=idle_s,
        tags=sweep_tags(spec),
    )
    loaded = load_model(spec.model, spec.precision, spec.device, spec.seed)
    devices = _run_devices(spec)
    if len(devices) > 1:
        split_layers(loaded.model, devices)
    meter = run_meter(devices, spec.gpus)
    try:
        (record,) = run_inference_sweep(loaded, inference, meter, progress=False)
    finally:
        meter.close()
    return with_gpu_split(record, spec, devices)


def _serve(spec: RunSpec, idle_s: float) -> RunRecord:
    """One concurrency level of a serving engine; a failed level comes back as a failed point."""
    # lazy: the serving client and engine (aiohttp, httpx, scipy), only for serving points
    from mlenergy.workloads.serving.runner import run_serving_bench
    from mlenergy.workloads.serving.spec import ServingSpec

    serve = spec.serve
    if serve is None:
        raise UserError("a serve run needs its serve settings", "Add a serve: block to the plan")
    serving = ServingSpec(
        model=spec.model,
        levels=(spec.batch_size,),
        num_requests=serve.num_requests,
        endpoint=serve.endpoint,
        launch=serve.launch,
        request_rate=serve.request_rate or math.inf,
        burstiness=serve.burstiness,
        prompts=spec.prompts,
        input_tokens=spec.input_tokens,
        max_output_tokens=spec.output_tokens,
        ignore_eos=serve.ignore_eos,
        api=serve.api,
        seed=spec.seed,
        engine=serve.engine,
        gpu_indices=list(range(spec.gpus)) if spec.gpus else None,
        model_config=serve.describe_with,
        idle_s=idle_s,
        startup_timeout_s=serve.startup_timeout_s,
    )
    (record,) = run_serving_bench(serving, keep_going=True)
    return record.model_copy(update={"tags": {**record.tags, **sweep_tags(spec)}})


def _run_devices(spec: RunSpec) -> list[str]:
    """Torch devices the model's layers are spread over (one unless several GPUs)."""
    if spec.gpus <= 1:
        return [spec.device]
    if spec.device.startswith("cuda"):
        return [f"cuda:{i}" for i in range(spec.gpus)]
    return [spec.device] * spec.gpus  # GPUs measured while the model runs on the host


def with_gpu_split(record: RunRecord, spec: RunSpec, devices: list[str]) -> RunRecord:
    """Say on the record which GPUs the run held and how the model was split over them."""
    if spec.gpus == 0:
        return record
    distinct = list(dict.fromkeys(devices))
    stages = len(distinct)
    workload = Workload.model_validate(
        {
            **record.workload.model_dump(),
            "tensor_parallel": spec.tensor_parallel,
            "pipeline_parallel": stages,
        }
    )
    ids = visible_gpu_ids(spec.gpus)
    tags = {
        **record.tags,
        "gpu_ids": ",".join(ids),
        "gpu_split": (
            f"{spec.gpus} GPU(s), tensor_parallel={spec.tensor_parallel}, "
            f"layers over {stages} device(s): {','.join(distinct)}"
        ),
    }
    return RunRecord.model_validate({**record.model_dump(), "workload": workload, "tags": tags})


def estimate_record(spec: RunSpec) -> RunRecord:
    """The estimator's prediction of ``spec`` as a record (the one adapter to the estimator).

    Raises:
        UserError: The estimator refuses the configuration.
    """
    # lazy: the estimator's pandas stack, only for estimate points (not for a dry run)
    from mlenergy.estimate import estimate
    from mlenergy.estimate.to_record import to_run_record

    est = estimate(
        spec.model,
        spec.device,
        batch_size=spec.batch_size,
        output_tokens=spec.output_tokens,
        input_tokens=spec.input_tokens,
        precision=spec.precision,
        num_gpus=spec.gpus or None,
        tensor_parallel=spec.tensor_parallel,
    )
    return to_run_record(est)


def _estimate(spec: RunSpec) -> RunRecord:
    record = estimate_record(spec)
    now = utc_now()
    return RunRecord.model_validate(
        {
            **record.model_dump(),
            "started_at": record.started_at or now,
            "ended_at": record.ended_at or now,
            "tags": {**record.tags, **sweep_tags(spec)},
        }
    )


def failed_record(spec: RunSpec, error: str, reason: str, same_host: bool = True) -> RunRecord:
    """A failed point for a bench run that crashed, timed out or kept failing.

    Args:
        spec: The run.
        error: What went wrong (first line kept, up to 1000 characters).
        reason: ``crashed``, ``timed out`` or ``failed``.
        same_host: The run ran on this machine (in-process): its CPU and memory go on the
            record. Otherwise only the GPU count is known (the worker's node is gone).

    Raises:
        UserError: The run is not a bench run (estimates and quality runs are not stored
            as failed points: they are reported and run again on resume).
    """
    if spec.kind != "bench":
        raise UserError(f"no failed record for a {spec.kind} run", "Report the error instead")

    resolved = resolve_source(spec.model)
    weights: Weights = "pretrained" if resolved.pretrained else "random"
    info = model_info_from_config(
        resolved.config, resolved.model_id, canonical_dtype(spec.precision), weights
    )
    workload = Workload(
        kind="inference",
        batch_size=spec.batch_size,
        input_tokens=spec.input_tokens,
        output_tokens=spec.output_tokens,
        num_requests=spec.batch_size,
        prompt_source=spec.prompts,
        device=spec.device,
        tensor_parallel=spec.tensor_parallel,
    )
    source = "measured:zeus-nvml" if spec.gpus else "modelled:cpu-tdp"
    return RunRecord(
        status="failed",
        error=f"{reason}: {error}"[:1000],
        started_at=utc_now(),
        ended_at=utc_now(),
        model=info,
        workload=workload,
        hardware=collect_hardware(None) if same_host else Hardware(accelerator_count=spec.gpus),
        software=collect_software(),
        energy_source=source,
        repeats=spec.repeats,
        warmup_runs=spec.warmup,
        tags={**sweep_tags(spec), "sweep_failure": reason, "runner": "mlenergy.sweep"},
    )
