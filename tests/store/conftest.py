"""Fixture factory for store tests: valid records with realistic, self-consistent numbers.

``make_run()`` builds a measured 1 x H100 inference run of an 8B dense model (about 450 W in
decode); ``make_cpu_run()`` a CPU run whose energy is modelled from the CPU TDP;
``make_quality()`` a perplexity result. Every physical figure is consistent (energy = power x
duration, energy per token = energy / tokens), so the submission validation accepts them.
Pass keyword overrides to change top-level fields; ``seed`` varies the figures a little.

Tests reach the functions through the ``factory`` fixture (``factory.make_run(seed=3)``), so
no test imports this module by name.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mlenergy.records import (
    Hardware,
    IdleBaseline,
    MeasuredScope,
    ModelInfo,
    Phase,
    PhaseResult,
    QualityResult,
    RepeatStats,
    RunRecord,
    Software,
    Workload,
)

BASE_TIME = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def make_model(
    model_id: str = "meta-llama/Llama-3.1-8B-Instruct", *, moe: bool = False
) -> ModelInfo:
    """A dense 8B model, or (``moe=True``) a Mixtral-like 8-expert, top-2 MoE."""
    if moe:
        return ModelInfo(
            model_id=model_id,
            config_fingerprint="a1b2c3d4e5f60718",
            architecture="mixtral",
            is_moe=True,
            num_experts=8,
            experts_per_token=2,
            total_params=46_702_792_704,
            active_params=12_879_925_248,
            dtype="bfloat16",
            weights="pretrained",
        )
    return ModelInfo(
        model_id=model_id,
        config_fingerprint="0f1e2d3c4b5a6978",
        architecture="llama",
        is_moe=False,
        total_params=8_030_261_248,
        active_params=8_030_261_248,
        dtype="bfloat16",
        weights="pretrained",
    )


def make_software() -> Software:
    return Software(
        python="3.12.3",
        torch="2.13.0",
        transformers="5.0.0",
        zeus="0.16.0",
        mlenergy="0.1.0",
        git_commit="0123456789abcdef0123456789abcdef01234567",
    )


def make_phase(
    phase: str, duration_s: float, avg_power_w: float, tokens: int, repeats: int = 3
) -> PhaseResult:
    """A phase whose energy is ``avg_power_w x duration_s`` with a small spread over repeats."""
    energy = avg_power_w * duration_s
    values = [energy * (1 + d) for d in (-0.01, 0.0, 0.01)[:repeats]] if repeats > 1 else [energy]
    stats = RepeatStats.from_values(values)
    energy = stats.mean
    return PhaseResult(
        phase=Phase(phase),
        duration_s=duration_s,
        energy_j=energy,
        avg_power_w=energy / duration_s,
        tokens=tokens,
        energy_per_token_j=energy / tokens if tokens else None,
        throughput_tokens_per_s=tokens / duration_s,
        ttft_s=0.12 if phase == "request" else None,
        itl_p50_s=duration_s / 256 if phase in ("decode", "request") else None,
        itl_p90_s=duration_s / 230 if phase in ("decode", "request") else None,
        itl_p99_s=duration_s / 200 if phase in ("decode", "request") else None,
        energy_j_repeats=stats,
    )


def make_run(
    *,
    seed: int = 0,
    model: ModelInfo | None = None,
    energy_source: str = "measured:zeus-nvml",
    accelerator_model: str = "NVIDIA H100 80GB HBM3",
    accelerator_count: int = 1,
    accelerator_tdp_w: float | None = 700.0,
    batch_size: int = 8,
    input_tokens: int = 512,
    output_tokens: int = 256,
    decode_power_w: float = 450.0,
    **overrides: Any,
) -> RunRecord:
    """A measured GPU inference run with prefill, decode and request phases."""
    jitter = 1 + 0.003 * (seed % 97)  # seeds 0.2% apart or more: never near duplicates
    prefill_s, decode_s = 0.35 * jitter, 9.0 * jitter
    prefill_w = decode_power_w * 1.3
    prefill = make_phase("prefill", prefill_s, prefill_w, batch_size * input_tokens)
    decode = make_phase("decode", decode_s, decode_power_w, batch_size * output_tokens)
    req_energy = prefill.energy_j + decode.energy_j
    request = make_phase(
        "request",
        prefill_s + decode_s,
        req_energy / (prefill_s + decode_s),
        batch_size * output_tokens,
    )
    fields: dict[str, Any] = {
        "created_at": BASE_TIME + timedelta(seconds=seed),
        "model": model or make_model(),
        "workload": Workload(
            kind="inference",
            task="lm-arena-chat",
            batch_size=batch_size,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            num_requests=batch_size * 4,
            device="cuda" if accelerator_count else "cpu",
        ),
        "hardware": Hardware(
            accelerator_model=accelerator_model if accelerator_count else None,
            accelerator_count=accelerator_count,
            accelerator_memory_gb=80.0 if accelerator_count else None,
            accelerator_tdp_w=accelerator_tdp_w if accelerator_count else None,
            driver_version="570.86.15" if accelerator_count else None,
            cpu_model="Intel(R) Xeon(R) Platinum 8480+",
            cpu_cores=32,
            cpu_tdp_w=350.0,
            memory_gb=512.0,
        ),
        "software": make_software(),
        "energy_source": energy_source,
        "scope": MeasuredScope(gpu_indices=tuple(range(accelerator_count))),
        "repeats": 3,
        "warmup_runs": 1,
        "phases": (prefill, decode, request),
        "idle": IdleBaseline(
            avg_power_w=70.0 * max(accelerator_count, 1),
            duration_s=5.0,
            energy_source=energy_source,
        ),
        "tags": {"seed": str(seed)},
    }
    fields.update(overrides)
    return RunRecord(**fields)


def make_cpu_run(*, seed: int = 0, cpu_power_w: float = 28.0, **overrides: Any) -> RunRecord:
    """A CPU-only run of a tiny random model, energy modelled from the CPU TDP (65 W)."""
    jitter = 1 + 0.003 * (seed % 97)  # seeds 0.2% apart or more: never near duplicates
    prefill = make_phase("prefill", 0.8 * jitter, cpu_power_w, 4 * 64)
    decode = make_phase("decode", 3.2 * jitter, cpu_power_w, 4 * 32)
    fields: dict[str, Any] = {
        "created_at": BASE_TIME + timedelta(seconds=seed),
        "model": ModelInfo(
            model_id="preset:tiny-llama",
            config_fingerprint="00aa11bb22cc33dd",
            architecture="llama",
            is_moe=False,
            total_params=4_200_000,
            active_params=4_200_000,
            dtype="float32",
            weights="random",
        ),
        "workload": Workload(
            kind="inference", batch_size=4, input_tokens=64, output_tokens=32, num_requests=8
        ),
        "hardware": Hardware(cpu_model="AMD EPYC 7B13", cpu_cores=2, cpu_tdp_w=65.0, memory_gb=8.0),
        "software": make_software().model_copy(update={"zeus": None}),
        "energy_source": "modelled:cpu-tdp",
        "scope": MeasuredScope(cpu_indices=(0,), description="CPU package modelled from TDP"),
        "repeats": 3,
        "phases": (prefill, decode),
        "tags": {"seed": str(seed)},
    }
    fields.update(overrides)
    return RunRecord(**fields)


def make_quality(
    *, model: ModelInfo | None = None, linked_run_ids: tuple[str, ...] = (), seed: int = 0
) -> QualityResult:
    """A perplexity result of ``model`` (default: the dense 8B model)."""
    return QualityResult(
        created_at=BASE_TIME + timedelta(seconds=seed),
        model=model or make_model(),
        software=make_software(),
        task="perplexity:wikitext-2",
        metric="perplexity",
        value=6.24 + 0.01 * seed,
        stderr=0.03,
        higher_is_better=False,
        num_tokens=65_536,
        dataset="wikitext-2-raw-v1[test]",
        linked_run_ids=linked_run_ids,
    )


@pytest.fixture
def data_dir(tmp_path):
    """An empty data folder for one test."""
    return tmp_path / "data"


@pytest.fixture
def factory():
    """The record factory functions of this module (``factory.make_run(seed=1)``, ...)."""
    import types

    return types.SimpleNamespace(
        make_model=make_model,
        make_phase=make_phase,
        make_run=make_run,
        make_cpu_run=make_cpu_run,
        make_quality=make_quality,
        make_software=make_software,
    )
