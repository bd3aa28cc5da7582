"""Import run folders of ML.ENERGY's benchmark harness (``mlenergy.benchmark``, v3).

The harness writes one folder per configuration::

    {base}/{task}/results/{org}/{model}/{gpu_model}/num_gpus+N+max_num_seqs+M+.../
        results.json       model_id, gpu_model, num_gpus, max_num_seqs, steady_state_* figures,
                           latency percentiles (*_ms), Zeus measurements, power timeline,
                           per-request results
        prometheus.json    steady_state_stats (vllm:num_requests_running, ...), optional
        driver.log         the harness's arguments (server image), optional

Energy is the GPU energy Zeus read from NVML counters, summed over the configuration's GPUs,
over the steady-state window only (``steady_state_energy`` J over ``steady_state_duration`` s).
As ``mlenergy-data`` computes it, output tokens in that window are energy / energy per token,
and the steady-state throughput is those tokens / duration (``output_throughput`` in the file
covers the whole run and is not used). Parallelism and the weight dtype are not in
``results.json``: they come from the harness's ``monolithic.config.yaml`` and
``model_info.json`` (found beside the run or under ``--harness-configs``), with the rule of
``mlenergy-data``; without them tensor parallelism over all GPUs is assumed, and the notes say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mlenergy.errors import UserError
from mlenergy.importers.common import (
    describe_model,
    fail,
    file_sha256,
    imported_software,
    is_number,
    load_json_object,
    lookup,
    normalise_dtype,
    normalise_model_id,
    number,
    resolve_accelerator,
    stable_id,
    text,
    utc_from_unix,
)
from mlenergy.importers.deliver import ImportBatch
from mlenergy.importers.harness_layout import (
    HarnessOptions,
    engine_of,
    find_runs,
    harness_file,
    parallelism,
    plus_params,
    read_yaml,
    task_from_path,
)
from mlenergy.records import (
    Hardware,
    MeasuredScope,
    ModelInfo,
    Phase,
    PhaseResult,
    PowerTimeline,
    RunRecord,
    Workload,
)

__all__ = ["HarnessOptions", "find_runs", "parallelism", "power_timeline", "read_run"]

FORMAT = "mlenergy-benchmark"
ENERGY_SOURCE = "measured:zeus-nvml"
HARNESS = "mlenergy.benchmark"
MAX_TIMELINE_POINTS = 300
"""Power timelines are downsampled to at most this many points."""


def power_timeline(results: dict[str, Any], path: Path) -> PowerTimeline | None:
    """The summed GPU power over the run, from ``timeline.power`` (Zeus ``PowerMonitor``).

    Each GPU's samples ``[unix_time, watts]`` are held until the next sample and summed on the
    first GPU's sample times; times are seconds since ``timeline.benchmark_start_time``.
    """
    power = lookup(results, "timeline.power", None)
    start = lookup(results, "timeline.benchmark_start_time", None)
    if not isinstance(power, dict) or not isinstance(start, int | float):
        return None
    domain = power.get("device_instant") or power.get("device_average")
    if not isinstance(domain, dict) or not domain:
        return None
    series: list[list[tuple[float, float]]] = []
    for gpu in sorted(domain, key=str):
        samples = domain[gpu]
        try:
            pairs = sorted((float(t), float(w)) for t, w in samples)
        except (TypeError, ValueError):
            raise fail(
                path, f"timeline.power.device_instant.{gpu}", "samples must be [t, W]"
            ) from None
        if pairs:
            series.append(pairs)
    if not series:
        return None
    grid = [t for t, _ in series[0]]
    total = [0.0] * len(grid)
    for pairs in series:
        j = 0
        for i, t in enumerate(grid):
            while j + 1 < len(pairs) and pairs[j + 1][0] <= t:
                j += 1
            total[i] += max(0.0, pairs[j][1])
    stride = max(1, -(-len(grid) // MAX_TIMELINE_POINTS))
    idx = range(0, len(grid), stride)
    return PowerTimeline(
        t_s=tuple(round(grid[i] - float(start), 3) for i in idx),
        power_w=tuple(round(total[i], 2) for i in idx),
        energy_source=ENERGY_SOURCE,
    )


def _by_device(results: dict[str, Any], energy: float, path: Path) -> dict[str, float]:
    gpu_energy = lookup(results, "steady_state_measurement.gpu_energy", None)
    if not isinstance(gpu_energy, dict) or not gpu_energy:
        return {}
    out: dict[str, float] = {}
    for gpu in gpu_energy:
        out[f"gpu:{gpu}"] = number(
            gpu_energy, str(gpu), f"{path} steady_state_measurement.gpu_energy", positive=True
        )
    summed = sum(out.values())
    if abs(summed - energy) > 0.01 * energy:
        raise fail(
            path,
            "steady_state_energy",
            f"{energy:.6g} J differs from the sum of steady_state_measurement.gpu_energy "
            f"({summed:.6g} J)",
        )
    return out


def _check_path_params(run_dir: Path, results: dict[str, Any], path: Path) -> None:
    params = plus_params(run_dir.name)
    for key in ("num_gpus", "max_num_seqs"):
        if key in params and str(params[key]) != str(results.get(key)):
            raise fail(
                path,
                key,
                f"{results.get(key)!r} differs from the folder name's {key}+{params[key]}",
                "the files of another run were copied here; re-run or fix the folder",
            )


@dataclass(frozen=True)
class _Setup:
    """What the harness's configuration files (or the assumptions) say about a run."""

    tensor_parallel: int
    expert_parallel: int
    data_parallel: int
    model: ModelInfo
    dtype_from: str
    facts_source: str


def _setup(
    run_dir: Path, path: Path, opts: HarnessOptions, run: dict[str, Any], notes: list[str]
) -> _Setup:
    """Parallelism, dtype and model facts from the harness files beside the run or options."""
    task, model_id, gpu_name, num_gpus = run["task"], run["model_id"], run["gpu"], run["num_gpus"]
    yaml_path = harness_file(run_dir, opts, task, model_id, gpu_name, "monolithic.config.yaml")
    vllm_config = read_yaml(yaml_path) if yaml_path is not None else {}
    if yaml_path is not None:
        tp, ep, dp = parallelism(vllm_config, num_gpus, yaml_path)
    else:
        tp, ep, dp = num_gpus, 1, 1
        notes.append(
            f"parallelism assumed: tensor_parallel={num_gpus} (no monolithic.config.yaml beside "
            "the run; pass --harness-configs DIR, the harness's configs/vllm folder)"
        )
    info_path = harness_file(run_dir, opts, task, model_id, gpu_name, "model_info.json")
    info = load_json_object(info_path) if info_path is not None else {}
    total_b = number(info, "total_parameters_billion", info_path or path, required=False)
    active_b = number(info, "active_parameters_billion", info_path or path, required=False)
    dtype, dtype_from = normalise_dtype(opts.dtype), "--dtype"
    if dtype is None:
        dtype, dtype_from = (
            normalise_dtype(info.get("weight_precision")),
            "model_info.json weight_precision",
        )
    if dtype is None and model_id.upper().endswith("-FP8"):
        dtype, dtype_from = "fp8", "the -FP8 model id"
    if dtype is None:
        dtype, dtype_from = normalise_dtype(vllm_config.get("dtype")), "monolithic.config.yaml"
    model, facts_source = describe_model(
        model_id,
        dtype,
        configs_dir=opts.configs_dir,
        path=path,
        key="model_id",
        notes=notes,
        why_no_dtype="no harness file names it",
        total_b=total_b,
        active_b=active_b,
    )
    if dtype is None:
        dtype_from = "the model config's torch_dtype"
    return _Setup(tp, ep, dp, model, dtype_from, facts_source)


def _seconds(results: dict[str, Any], key: str, path: Path) -> float | None:
    """A ``*_ms`` latency of the file in seconds (``None`` when absent)."""
    value = number(results, key, path, required=False)
    return value / 1000.0 if value is not None else None


def _steady_phase(results: dict[str, Any], path: Path) -> PhaseResult:
    """The steady-state window: GPU energy, output tokens = energy / energy per token."""
    energy = number(results, "steady_state_energy", path, positive=True)
    duration = number(results, "steady_state_duration", path, positive=True)
    per_token = number(results, "steady_state_energy_per_token", path, positive=True)
    assert energy is not None and duration is not None and per_token is not None
    tokens = max(1, round(energy / per_token))
    return PhaseResult(
        phase=Phase.REQUEST,
        duration_s=duration,
        energy_j=energy,
        avg_power_w=energy / duration,
        tokens=tokens,
        energy_per_token_j=per_token,
        throughput_tokens_per_s=tokens / duration,
        ttft_s=_seconds(results, "median_ttft_ms", path),
        itl_p50_s=_seconds(results, "median_itl_ms", path),
        itl_p90_s=_seconds(results, "p90_itl_ms", path),
        itl_p99_s=_seconds(results, "p99_itl_ms", path),
        energy_by_device_j=_by_device(results, energy, path),
    )


def _run_facts(run_dir: Path, path: Path, results: dict[str, Any], opts: HarnessOptions):
    """The identity of the run: model id, GPU, counts and task (all required)."""
    run = {
        "model_id": normalise_model_id(text(results, "model_id", path) or ""),
        "gpu": text(results, "gpu_model", path) or "",
        "num_gpus": int(number(results, "num_gpus", path, positive=True) or 0),
        "max_num_seqs": int(number(results, "max_num_seqs", path, positive=True) or 0),
    }
    _check_path_params(run_dir, results, path)
    completed = number(results, "completed", path, positive=True)
    prompts = number(results, "num_prompts", path, required=False)
    if prompts is not None and completed is not None and completed < prompts:
        raise fail(
            path,
            "completed",
            f"{completed:g} of {prompts:g} requests completed: the harness counts this run as "
            "failed",
            "re-run the configuration",
        )
    return run


def _workload(
    results: dict[str, Any],
    prometheus: dict[str, Any],
    path: Path,
    run: dict[str, Any],
    setup: _Setup,
) -> Workload:
    """The served workload; the achieved batch is Prometheus's steady-state running requests."""
    completed = number(results, "completed", path, positive=True)
    out_total = number(results, "total_output_tokens", path, positive=True)
    in_total = number(results, "total_input_tokens", path, required=False)
    num_prompts = number(results, "num_prompts", path, required=False)
    assert completed is not None and out_total is not None
    stats = lookup(prometheus, "steady_state_stats", {})
    running = stats.get("vllm:num_requests_running") if isinstance(stats, dict) else None
    return Workload(
        kind="inference",
        task=run["task"],
        batch_size=run["max_num_seqs"],
        avg_batch_size=float(running) if is_number(running) and running > 0 else None,
        max_num_seqs=run["max_num_seqs"],
        input_tokens=round(in_total / completed) if in_total is not None else 0,
        output_tokens=max(1, round(out_total / completed)),
        num_requests=int(num_prompts) if num_prompts and num_prompts >= 1 else int(completed),
        prompt_source=f"{run['task']} ({HARNESS})",
        device="cuda",
        tensor_parallel=setup.tensor_parallel,
        expert_parallel=setup.expert_parallel,
        data_parallel=setup.data_parallel,
    )


def _when(results: dict[str, Any], path: Path) -> tuple[datetime | None, datetime | None]:
    """Start and end of the run: the timeline's Unix times, else the file's ``date``.

    ``date`` (``%Y%m%d-%H%M%S``) is the harness machine's local time, zone not recorded; it is
    read as UTC and only used when the timeline has no times.
    """
    start = number(results, "timeline.benchmark_start_time", path, required=False)
    end = number(results, "timeline.benchmark_end_time", path, required=False)
    if start or end:
        return (utc_from_unix(start) if start else None, utc_from_unix(end) if end else None)
    raw = results.get("date")
    try:
        when = datetime.strptime(str(raw), "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        raise fail(
            path, "timeline.benchmark_end_time", "missing, and no readable date either"
        ) from None
    return None, when


def _tags(
    run_dir: Path, digest: str, harness: str, run: dict[str, Any], setup: _Setup
) -> dict[str, str]:
    """Provenance of the import: harness, source file and hash, what was assumed."""
    return {
        "origin": harness,
        "imported_from": FORMAT,
        "source_file": f"{run_dir.name}/results.json",
        "source_sha256": digest,
        "gpu_model_as_recorded": run["gpu"],
        "dtype_from": setup.dtype_from,
        "model_facts": setup.facts_source,
        "tokens": "steady-state output tokens = steady_state_energy / energy per token",
        "latency": "harness client-side percentiles over the whole run",
    }


def read_run(run_dir: Path, opts: HarnessOptions | None = None) -> ImportBatch:
    """Read one harness run folder into a :class:`RunRecord`.

    Args:
        run_dir: The folder holding ``results.json`` (or the ``results.json`` itself).
        opts: Additions the files lack (see :class:`HarnessOptions`).

    Raises:
        UserError: Not a run folder, a key the record needs is missing or invalid, an energy is
            zero or negative, or the GPU name is unknown (names the file and key).
    """
    opts = opts or HarnessOptions()
    if run_dir.is_file() and run_dir.name == "results.json":
        run_dir = run_dir.parent
    path = run_dir / "results.json"
    if not run_dir.is_dir() or not path.is_file():
        below = run_dir.is_dir() and next(run_dir.rglob("results.json"), None) is not None
        raise UserError(
            f"{run_dir} is not a run folder of the ML.ENERGY benchmark (no results.json)",
            "pass --recursive to import every run folder below it"
            if below
            else "pass a folder .../results/{org}/{model}/{gpu}/num_gpus+N+... holding "
            "results.json",
        )
    results = load_json_object(path)
    prom_path = run_dir / "prometheus.json"
    prometheus = load_json_object(prom_path) if prom_path.is_file() else {}
    notes: list[str] = []
    run = _run_facts(run_dir, path, results, opts)
    phase = _steady_phase(results, path)
    task = opts.task or task_from_path(run_dir)
    if not task:
        raise fail(
            run_dir,
            "task",
            "the folder is not under {task}/results/{org}/{model}/{gpu}/, so the task is unknown",
            "pass --task NAME (e.g. lm-arena-chat)",
        )
    run["task"] = task
    gpu = resolve_accelerator(opts.gpu or run["gpu"], path, "--gpu" if opts.gpu else "gpu_model")
    setup = _setup(run_dir, path, opts, run, notes)
    workload = _workload(results, prometheus, path, run, setup)
    if number(results, "total_input_tokens", path, required=False) is None:
        notes.append("total_input_tokens missing: input_tokens set to 0")
    engine, engine_note = engine_of(run_dir, opts)
    if engine_note:
        notes.append(engine_note)
    started, ended = _when(results, path)
    digest = file_sha256(path, *([prom_path] if prom_path.is_file() else []))
    harness = f"{HARNESS} {opts.harness_version}" if opts.harness_version else HARNESS
    if not opts.harness_version:
        notes.append("harness version not recorded in results.json: pass --harness-version")
    record = RunRecord(
        run_id=stable_id("mleb", digest, task),
        created_at=ended or started or datetime.now(UTC),  # _when gives at least one
        started_at=started,
        ended_at=ended,
        model=setup.model,
        workload=workload,
        hardware=Hardware(
            accelerator_model=gpu.name,
            accelerator_count=run["num_gpus"],
            accelerator_memory_gb=gpu.memory_gb,
            accelerator_tdp_w=gpu.tdp_w,
        ),
        software=imported_software(zeus=opts.zeus_version, engine=engine),
        energy_source=ENERGY_SOURCE,
        scope=MeasuredScope(
            gpu_indices=tuple(range(run["num_gpus"])),
            description=(
                "GPU energy from NVML counters via Zeus, summed over the configuration's GPUs, "
                f"steady-state window only (measured by {harness})"
            ),
        ),
        phases=(phase,),
        power_timeline=power_timeline(results, path),
        tags=_tags(run_dir, digest, harness, run, setup),
    )
    return ImportBatch(FORMAT, run_dir, (record,), tuple(notes))
