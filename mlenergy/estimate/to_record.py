"""Turn estimates into :class:`~mlenergy.records.RunRecord` s labelled ``estimated:mlenergy-<v>``.

Saved estimates sit beside measurements in the store; their ``energy_source`` says they are
predictions. Phases: ``prefill`` (the prompt tokens of one request), ``decode`` (its output
tokens) and ``request`` (both), all per request of the batch-averaged steady state. The
prediction interval of energy per token is the request phase's
``energy_per_token_j_interval``.
"""

from __future__ import annotations

import json
import platform
from pathlib import Path

from mlenergy.estimate.api import Estimate, estimator_version
from mlenergy.estimate.configs import resolve_model_config
from mlenergy.estimate.engines import engine_software
from mlenergy.models.info import model_info_from_config
from mlenergy.records import (
    Hardware,
    Interval,
    ModelInfo,
    Phase,
    PhaseResult,
    RunRecord,
    Software,
    Workload,
)
from mlenergy.reference.gpus import resolve_gpu


def estimate_model_info(est: Estimate, configs_dir: str | Path | None = None) -> ModelInfo:
    """The :class:`ModelInfo` of an estimate's model, built from its config like every record.

    Args:
        est: The estimate.
        configs_dir: Folder of model configs (to find the config of a model id).
    """
    path = resolve_model_config(est.model, configs_dir).path
    config = json.loads(path.read_text(encoding="utf-8"))
    return model_info_from_config(config, est.model, est.precision, "pretrained")


def to_run_record(est: Estimate, configs_dir: str | Path | None = None) -> RunRecord:
    """Build a :class:`~mlenergy.records.RunRecord` from an estimate.

    Args:
        est: The estimate.
        configs_dir: Folder of model configs (to describe the model).
    """
    gpu = resolve_gpu(est.gpu)
    n_req = max(1, round(est.batch_size))
    out_tokens = max(1, round(est.output_tokens))
    workload = Workload(
        kind="inference",
        task=est.task,
        batch_size=n_req,
        avg_batch_size=est.batch_size,
        input_tokens=round(est.input_tokens),
        output_tokens=out_tokens,
        num_requests=n_req,
        prompt_source="estimated",
        device="cuda",
        tensor_parallel=est.tensor_parallel,
        expert_parallel=est.expert_parallel,
        data_parallel=est.data_parallel,
        pipeline_parallel=est.pipeline_parallel,
        avg_output_tokens=est.output_tokens,
        max_num_seqs=None if est.max_num_seqs is None else round(est.max_num_seqs),
    )
    hardware = Hardware(
        accelerator_model=gpu.name,
        accelerator_count=est.num_gpus,
        accelerator_memory_gb=gpu.memory_gb,
        accelerator_tdp_w=gpu.tdp_w,
    )
    software = Software(
        python=platform.python_version(),
        mlenergy=estimator_version(),
        engine=engine_software(est.engine),  # the serving software the profile models
    )
    return RunRecord(
        model=estimate_model_info(est, configs_dir),
        workload=workload,
        hardware=hardware,
        software=software,
        energy_source=est.energy_source,
        phases=_phases(est, n_req, out_tokens),
        tags=_tags(est),
    )


def _tags(est: Estimate) -> dict[str, str]:
    """The estimate's SM clock and, for an offline job, its mode and generation cap."""
    tags = {"sm_clock_mhz": f"{est.sm_clock_mhz:.0f}"}
    if est.mode != "serving":
        tags["mode"] = est.mode
        if est.max_output_tokens is not None:
            tags["max_output_tokens"] = f"{est.max_output_tokens:g}"
    return tags


def _phases(est: Estimate, n_req: int, out_tokens: int) -> tuple[PhaseResult, ...]:
    """Prefill, decode and request phases of one batch of ``n_req`` requests.

    Tokens are summed over the batch, so that power and throughput of the request phase are
    those of the whole configuration.
    """
    total_j = est.energy_per_token_j * n_req * out_tokens
    bd = est.breakdown_j_per_token
    share_pf = bd["prefill"] / est.energy_per_token_j if est.energy_per_token_j else 0.0
    dur, pf_dur = est.request_duration_s, est.prefill_duration_s
    interval = Interval(low=est.energy_per_token_j_lo, high=est.energy_per_token_j_hi)
    pf_tokens = n_req * round(est.input_tokens)
    return (
        PhaseResult.from_totals(Phase.PREFILL, pf_dur, total_j * share_pf, pf_tokens),
        PhaseResult.from_totals(
            Phase.DECODE,
            dur - pf_dur,
            total_j * (1 - share_pf),
            n_req * out_tokens,
            itl_p50_s=est.itl_s,
        ),
        PhaseResult.from_totals(
            Phase.REQUEST,
            dur,
            total_j,
            n_req * out_tokens,
            itl_p50_s=est.itl_s,
            energy_per_token_j_interval=interval,
        ),
    )
