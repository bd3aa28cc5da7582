"""Import optimum-benchmark reports (``benchmark.json`` = ``{"config", "report"}``).

The inference scenario of a text-generation model reports, per target (``prefill``,
``decode``, ``generate``...), ``latency`` (seconds, mean over calls), ``throughput`` and, with
``energy: true``, ``energy`` in kWh per call (``cpu``, ``ram``, ``gpu``, ``total``: CodeCarbon's
machine-level figures) and ``efficiency`` (tokens or samples per kWh of ``total``). A prefill
call processes ``batch_size x sequence_length`` prompt tokens; a decode call generates
``batch_size x num_beams x (max_new_tokens - 1)`` tokens (the first comes from prefill), which
is ``efficiency x total`` (checked within 1%).

The records keep the GPU energy (``energy_j``; kWh x 3.6e6 J), comparable with Zeus's GPU
figures, and the CPU and RAM energy beside it (``energy_by_device_j``). The source is
``measured:codecarbon``. CodeCarbon reads 0 on a GPU without an energy counter (and on CPU-only
runs): a zero GPU energy is refused, not stored. Energy and latency come from separate loops
of the same configuration, so average power is energy per call / mean latency per call.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mlenergy.importers.common import (
    describe_model,
    fail,
    file_sha256,
    imported_software,
    load_json_object,
    lookup,
    normalise_dtype,
    normalise_model_id,
    number,
    resolve_accelerator,
    stable_id,
    text,
)
from mlenergy.importers.deliver import ImportBatch
from mlenergy.records import (
    Hardware,
    MeasuredScope,
    Phase,
    PhaseResult,
    RunRecord,
    Software,
    Workload,
)

FORMAT = "optimum-benchmark"
ENERGY_SOURCE = "measured:codecarbon"
KWH_TO_J = 3.6e6
"""Joules in one kilowatt-hour."""
ENGINE_BACKENDS = {"vllm", "tensorrt-llm", "py-txi", "llama_cpp", "onnxruntime", "openvino"}
"""Backends whose ``version`` is an engine's, not torch's."""


@dataclass(frozen=True)
class OptimumOptions:
    """What the user can add to a report.

    Attributes:
        configs_dir: Folder of model ``config.json`` files (``<org>__<name>.json``).
        gpu: GPU name, overriding ``config.environment.gpu``.
        task: Workload label (default ``optimum-benchmark:<config.name>``).
    """

    configs_dir: Path | None = None
    gpu: str | None = None
    task: str | None = None


def _energy_j(report: dict[str, Any], target: str, path: Path) -> dict[str, float]:
    """The target's energy per call in joules by domain; the GPU figure must be positive."""
    energy = lookup(report, f"{target}.energy", None)
    key = f"report.{target}.energy"
    if not isinstance(energy, dict):
        raise fail(path, key, "missing", "run optimum-benchmark with scenario.energy=true")
    if energy.get("unit") != "kWh":
        raise fail(path, f"{key}.unit", f"expected 'kWh', got {energy.get('unit')!r}")
    out = {}
    for domain in ("cpu", "ram", "gpu", "total"):
        value = number(energy, domain, f"{path} {key}")
        assert value is not None
        if value < 0:
            raise fail(path, f"{key}.{domain}", f"negative energy {value!r}")
        out[domain] = value * KWH_TO_J
    if out["gpu"] <= 0:
        raise fail(
            path,
            f"{key}.gpu",
            "GPU energy is 0: CodeCarbon reads 0 on GPUs without an energy counter (and on "
            "CPU-only runs), so this is no measurement",
            "measure on a GPU with an NVML energy counter, or import a Zeus log instead",
        )
    return out


def _latency_s(report: dict[str, Any], target: str, path: Path) -> float:
    key = f"report.{target}.latency"
    latency = lookup(report, f"{target}.latency", None)
    if not isinstance(latency, dict):
        raise fail(path, key, "missing", "run optimum-benchmark with scenario.latency=true")
    if latency.get("unit") != "s":
        raise fail(path, f"{key}.unit", f"expected 's', got {latency.get('unit')!r}")
    return number(latency, "mean", f"{path} {key}", positive=True)


def _decode_tokens(data: dict[str, Any], path: Path, energy_total_j: float) -> int:
    """Generated tokens per decode call, from the scenario, checked against the efficiency."""
    batch = number(data, "config.scenario.input_shapes.batch_size", path, positive=True)
    beams = number(data, "config.scenario.generate_kwargs.num_beams", path, required=False) or 1
    new = number(data, "config.scenario.generate_kwargs.max_new_tokens", path, required=False)
    if new is None:
        new = number(data, "config.scenario.new_tokens", path, required=False) or 100
    tokens = round(batch * beams * (new - 1))
    if tokens < 1:
        raise fail(path, "config.scenario.generate_kwargs.max_new_tokens", "decode makes no token")
    eff = lookup(data, "report.decode.efficiency", None)
    if isinstance(eff, dict) and eff.get("unit") == "tokens/kWh":
        value = number(eff, "value", f"{path} report.decode.efficiency", positive=True)
        implied = value * energy_total_j / KWH_TO_J
        if abs(implied - tokens) > 0.01 * tokens:
            raise fail(
                path,
                "report.decode.efficiency.value",
                f"implies {implied:.1f} tokens per call, the scenario {tokens}",
                "the report was edited or comes from another configuration",
            )
    return tokens


def _phase(phase: Phase, energy: dict[str, float], duration: float, tokens: int) -> PhaseResult:
    return PhaseResult.from_totals(
        phase,
        duration,
        energy["gpu"],
        tokens,
        energy_by_device_j={"gpu": energy["gpu"], "cpu": energy["cpu"], "ram": energy["ram"]},
    )


def _hardware(env: dict[str, Any], backend: dict[str, Any], path: Path, opts: OptimumOptions):
    gpus = env.get("gpu")
    name = opts.gpu or (gpus[0] if isinstance(gpus, list) and gpus else None)
    if not isinstance(name, str) or not name:
        raise fail(path, "config.environment.gpu", "missing: no GPU named", "pass --gpu NAME")
    gpu = resolve_accelerator(name, path, "--gpu" if opts.gpu else "config.environment.gpu")
    ids = backend.get("device_ids")
    count = len(str(ids).split(",")) if ids not in (None, "") else int(env.get("gpu_count") or 1)
    cores = env.get("cpu_count")
    ram = env.get("cpu_ram_mb")
    hw = Hardware(
        accelerator_model=gpu.name,
        accelerator_count=count,
        accelerator_memory_gb=gpu.memory_gb,
        accelerator_tdp_w=gpu.tdp_w,
        cpu_model=str(env["cpu"]).strip() if env.get("cpu") else None,
        cpu_cores=cores if isinstance(cores, int) and cores > 0 else None,
        memory_gb=ram / 1000 if isinstance(ram, int | float) and ram > 0 else None,
    )
    return hw, name


def _software(backend: dict[str, Any], env: dict[str, Any]) -> Software:
    """The pytorch backend's version is torch's; an engine backend's version is the engine's."""
    name, version = str(backend.get("name") or "pytorch"), backend.get("version")
    python = env.get("python_version")
    return imported_software(
        python=python if isinstance(python, str) else None,
        torch=str(version) if name == "pytorch" and version else None,
        transformers=env.get("transformers_version") or None,
        engine=f"{name} {version}" if name in ENGINE_BACKENDS and version else None,
    )


def _sections(data: dict[str, Any], path: Path) -> tuple[dict, dict, dict, dict]:
    """``report``, ``config``, ``config.backend`` and ``config.environment`` of a GPU report.

    Raises:
        UserError: A section is missing, the report has no prefill and decode targets, or the
            backend ran on another device than a GPU.
    """
    for key in ("config", "report"):
        if not isinstance(data.get(key), dict):
            raise fail(path, key, "missing", "pass the benchmark.json that optimum-benchmark wrote")
    report, config = data["report"], data["config"]
    if not isinstance(report.get("decode"), dict) or not isinstance(report.get("prefill"), dict):
        raise fail(
            path,
            "report.decode",
            "missing: only text-generation reports (prefill and decode targets) are imported",
        )
    backend = config.get("backend") if isinstance(config.get("backend"), dict) else {}
    env = config.get("environment") if isinstance(config.get("environment"), dict) else {}
    if backend.get("device") not in ("cuda", None):
        raise fail(path, "config.backend.device", f"{backend.get('device')!r} is not a GPU run")
    return report, config, backend, env


def read_report(path: Path, opts: OptimumOptions | None = None) -> ImportBatch:
    """Read one optimum-benchmark ``benchmark.json`` into a run record (prefill + decode).

    Raises:
        UserError: Not a report, not a text-generation report with energy, a missing key, a
            zero GPU energy or an unknown GPU (names the file and key).
    """
    opts = opts or OptimumOptions()
    data = load_json_object(path)
    report, config, backend, env = _sections(data, path)
    model_id = normalise_model_id(text(data, "config.backend.model", path))
    notes: list[str] = []
    model, _ = describe_model(
        model_id,
        normalise_dtype(backend.get("torch_dtype")),
        configs_dir=opts.configs_dir,
        path=path,
        key="config.backend.model",
        notes=notes,
        why_no_dtype="config.backend.torch_dtype is not set",
        weights="random" if backend.get("no_weights") else "pretrained",
    )
    pre_e, dec_e = _energy_j(report, "prefill", path), _energy_j(report, "decode", path)
    pre_t, dec_t = _latency_s(report, "prefill", path), _latency_s(report, "decode", path)
    batch = int(number(data, "config.scenario.input_shapes.batch_size", path, positive=True))
    seq = int(number(data, "config.scenario.input_shapes.sequence_length", path, positive=True))
    dec_tokens = _decode_tokens(data, path, dec_e["total"])
    hw, gpu_name = _hardware(env, backend, path, opts)
    digest = file_sha256(path)
    record = RunRecord(
        run_id=stable_id("optb", digest),
        created_at=datetime.fromtimestamp(int(path.stat().st_mtime), tz=UTC),
        model=model,
        workload=Workload(
            kind="inference",
            task=opts.task or f"optimum-benchmark:{config.get('name') or 'inference'}",
            batch_size=batch,
            input_tokens=seq,
            output_tokens=max(1, dec_tokens // batch + 1),
            num_requests=batch,
            prompt_source="synthetic (optimum-benchmark input_shapes)",
            device="cuda",
        ),
        hardware=hw,
        software=_software(backend, env),
        energy_source=ENERGY_SOURCE,
        scope=MeasuredScope(
            gpu_indices=tuple(range(hw.accelerator_count)),
            description=(
                "GPU energy per call measured by CodeCarbon (machine level); CPU and RAM "
                "energy in energy_by_device_j"
            ),
        ),
        phases=(
            _phase(Phase.PREFILL, pre_e, pre_t, batch * seq),
            _phase(Phase.DECODE, dec_e, dec_t, dec_tokens),
        ),
        tags={
            "origin": f"optimum-benchmark {env.get('optimum_benchmark_version') or ''}".strip(),
            "imported_from": FORMAT,
            "source_file": path.name,
            "source_sha256": digest,
            "gpu_as_recorded": gpu_name,
            "backend": f"{backend.get('name') or 'pytorch'} {backend.get('version') or ''}".strip(),
            "energy_per_call": "phases are one call: energy per call / mean latency per call",
            "created_at": "the report's file time (the report records no date)",
            "total_energy_j": f"prefill {pre_e['total']:.6g}, decode {dec_e['total']:.6g}",
        },
    )
    return ImportBatch(FORMAT, path, (record,), tuple(notes))
