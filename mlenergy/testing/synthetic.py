"""Synthetic run records for the leaderboard's tests, browser tests and load benchmark.

The figures are made up (but self-consistent: energy per token = power / throughput) and the
default label says so: ``energy_source="emulated:synthetic"``. Never publish them as
measurements.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from mlenergy.records import (
    Hardware,
    ModelInfo,
    Phase,
    PhaseResult,
    PowerTimeline,
    QualityResult,
    RunRecord,
    Software,
    SubmissionInfo,
    Workload,
    sha256_hex,
)

GPUS = (("H100-SXM5-80GB", 700.0), ("B200", 1000.0), ("A100-SXM4-80GB", 400.0), ("L40S", 350.0))
TASKS = ("lm-arena-chat", "gpqa", "sourcegraph-fim")
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
_SOFTWARE = Software(
    python="3.11", torch="2.13.0", zeus="0.16.0", mlenergy="0.1.0", engine="synthetic"
)


def synthetic_model(name: str, active_b: float, moe: bool, dtype: str = "bfloat16") -> ModelInfo:
    """A model description with a fingerprint derived from ``name``.

    Args:
        name: Model id.
        active_b: Active parameters in billions (MoE totals are 8x).
        moe: Whether the model is a Mixture-of-Experts.
        dtype: Weight precision.
    """
    active = int(active_b * 1e9)
    return ModelInfo(
        model_id=name,
        config_fingerprint=sha256_hex(name)[:16],
        architecture="synthetic_moe" if moe else "synthetic",
        is_moe=moe,
        num_experts=64 if moe else None,
        experts_per_token=8 if moe else None,
        total_params=active * 8 if moe else active,
        active_params=active,
        dtype=dtype,
        weights="pretrained",
    )


def default_models(count: int = 40) -> list[ModelInfo]:
    """``count`` synthetic models of 1 to 200 B active parameters, a third of them MoE."""
    rng = random.Random(1)
    dtypes = ("bfloat16", "fp8", "mxfp4")
    return [
        synthetic_model(
            f"synthetic/model-{i:03d}",
            round(rng.uniform(1, 200), 1),
            i % 3 == 0,
            dtypes[(i // 3) % len(dtypes)],
        )
        for i in range(count)
    ]


def synthetic_run(
    model: ModelInfo,
    *,
    gpu: str = "H100-SXM5-80GB",
    tdp_w: float = 700.0,
    num_gpus: int = 1,
    batch_size: int = 64,
    task: str = "lm-arena-chat",
    energy_source: str = "emulated:synthetic",
    submitter: str | None = None,
    index: int = 0,
    timeline: bool = False,
    validate: bool = True,
) -> RunRecord:
    """One self-consistent synthetic serving run.

    Throughput grows with batch size and GPUs and shrinks with active parameters; power
    rises with load toward TDP; inter-token latency grows with batch size.

    Args:
        model: The model.
        gpu: Accelerator name.
        tdp_w: Its TDP in watts (scales power).
        num_gpus: Accelerators used.
        batch_size: ``max_num_seqs``.
        task: Workload task label.
        energy_source: Label of the (made-up) energy figures.
        submitter: Shown as submitter when given.
        index: Makes run id and timestamp unique.
        timeline: Attach a short power timeline.
        validate: Build through pydantic validation (``False``: ``model_construct``, ~20x
            faster, for the load benchmark).
    """
    active_b = model.active_params / 1e9
    itl_s = 0.006 * (1 + batch_size / 96) * (active_b / num_gpus) ** 0.35
    throughput = batch_size / itl_s
    power = num_gpus * tdp_w * (0.35 + 0.55 * min(1.0, batch_size / 256))
    output_tokens = 256
    tokens = output_tokens * batch_size
    duration = tokens / throughput
    energy = power * duration
    build = (
        (lambda cls, **kw: cls(**kw)) if validate else (lambda cls, **kw: cls.model_construct(**kw))
    )
    phase = build(
        PhaseResult,
        phase=Phase.REQUEST,
        duration_s=duration,
        energy_j=energy,
        avg_power_w=power,
        tokens=tokens,
        energy_per_token_j=energy / tokens,
        throughput_tokens_per_s=throughput,
        ttft_s=0.05 + 0.001 * batch_size,
        itl_p50_s=itl_s,
        itl_p90_s=itl_s * 1.1,
        itl_p99_s=itl_s * 1.3,
    )
    created = _EPOCH + timedelta(seconds=index)
    trace = _timeline(build, duration, power, energy_source) if timeline else None
    sub = _submission(build, submitter, index, created) if submitter else None
    return build(
        RunRecord,
        run_id=f"syn{index:08d}{sha256_hex(model.model_id + gpu)[:8]}",
        created_at=created,
        model=model,
        workload=build(
            Workload,
            kind="inference",
            task=task,
            batch_size=batch_size,
            max_num_seqs=batch_size,
            input_tokens=256,
            output_tokens=output_tokens,
            num_requests=batch_size,
            device="cuda",
            tensor_parallel=num_gpus,
        ),
        hardware=build(
            Hardware, accelerator_model=gpu, accelerator_count=num_gpus, accelerator_tdp_w=tdp_w
        ),
        software=_SOFTWARE,
        energy_source=energy_source,
        phases=(phase,),
        power_timeline=trace,
        submission=sub,
    )


def _timeline(build: Any, duration: float, power: float, energy_source: str) -> PowerTimeline:
    """A 21-point power timeline over ``duration`` seconds around ``power`` watts."""
    return build(
        PowerTimeline,
        t_s=tuple(round(duration * k / 20, 6) for k in range(21)),
        power_w=tuple(power * (0.9 + 0.1 * ((k % 4) / 3)) for k in range(21)),
        energy_source=energy_source,
    )


def _submission(build: Any, submitter: str, index: int, created: datetime) -> SubmissionInfo:
    """An approved submission by ``submitter``, submitted and approved at ``created``."""
    return build(
        SubmissionInfo,
        submission_id=f"sub{index:08d}",
        submitter=submitter,
        submitted_at=created,
        approved_at=created,
    )


def synthetic_runs(
    n: int,
    models: Sequence[ModelInfo] | None = None,
    sources: Sequence[str] = ("emulated:synthetic",),
    seed: int = 0,
    validate: bool = True,
) -> list[RunRecord]:
    """``n`` synthetic runs over models x GPUs x GPU counts x batch sizes x tasks.

    Args:
        n: Number of runs.
        models: Models to draw from (default :func:`default_models`).
        sources: Energy-source labels, cycled over the runs.
        seed: Random seed.
        validate: See :func:`synthetic_run`.
    """
    rng = random.Random(seed)
    models = list(models) if models is not None else default_models()
    out = []
    for i in range(n):
        gpu, tdp = GPUS[rng.randrange(len(GPUS))]
        out.append(
            synthetic_run(
                models[rng.randrange(len(models))],
                gpu=gpu,
                tdp_w=tdp,
                num_gpus=rng.choice((1, 2, 4, 8)),
                batch_size=rng.choice((8, 16, 32, 64, 128, 256, 512)),
                task=TASKS[rng.randrange(len(TASKS))],
                energy_source=sources[i % len(sources)],
                index=i,
                validate=validate,
            )
        )
    return out


def synthetic_quality(
    model: ModelInfo, value: float, linked: Sequence[str] = (), metric: str = "acc"
) -> QualityResult:
    """A quality result (``lm-eval:synthetic``, higher is better) for ``model``."""
    return QualityResult(
        quality_id=f"q{sha256_hex(f'{model.model_id}|{metric}|{value}|{linked}')[:15]}",
        created_at=_EPOCH,
        model=model,
        software=_SOFTWARE,
        task="lm-eval:synthetic",
        metric=metric,
        value=value,
        higher_is_better=True,
        linked_run_ids=tuple(linked),
    )
