"""Turn estimates into :class:`~mlenergy.records.RunRecord` s labelled ``estimated:mlenergy-<v>``.

Saved estimates sit beside measurements in the store; their ``energy_source`` says they are
predictions. Phases: ``prefill`` (the prompt tokens of one request), ``decode`` (its output
tokens) and ``request`` (both), all per request of the batch-averaged steady state.
"""

from __future__ import annotations

import hashlib
import json
import platform
from pathlib import Path

from mlenergy.estimate.api import Estimate, estimator_version


def _fingerprint(model: str, configs_dir: str | Path | None) -> str:
    from mlenergy.estimate.inputs import resolve_model

    spec, _ = resolve_model(model, configs_dir)
    key = {k: v for k, v in spec.__dict__.items() if k != "extra"}
    text = json.dumps(key, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def to_run_record(est: Estimate, configs_dir: str | Path | None = None):  # -> RunRecord
    """Build a :class:`~mlenergy.records.RunRecord` from an estimate.

    Args:
        est: The estimate.
        configs_dir: Folder of model configs (to fingerprint the architecture).
    """
    from mlenergy.estimate.catalog import resolve_gpu
    from mlenergy.estimate.inputs import resolve_model
    from mlenergy.records import (
        Hardware,
        ModelInfo,
        Phase,
        PhaseResult,
        RunRecord,
        Software,
        Workload,
    )

    gpu = resolve_gpu(est.gpu)
    spec_exp = None
    spec, _ = resolve_model(est.model, configs_dir)
    if spec.is_moe:
        spec_exp = (spec.num_experts, spec.experts_per_token, spec.num_shared_experts)
    model = ModelInfo(
        model_id=est.model,
        config_fingerprint=_fingerprint(est.model, configs_dir),
        architecture=est.architecture,
        is_moe=est.is_moe,
        num_experts=spec_exp[0] if spec_exp else None,
        experts_per_token=spec_exp[1] if spec_exp else None,
        num_shared_experts=spec_exp[2] if spec_exp else None,
        total_params=est.total_params,
        active_params=est.active_params,
        dtype=est.precision,
        weights="pretrained",
    )
    n_req = max(1, round(est.batch_size))
    workload = Workload(
        kind="inference",
        task=est.task,
        batch_size=n_req,
        avg_batch_size=est.batch_size,
        input_tokens=round(est.input_tokens),
        output_tokens=max(1, round(est.output_tokens)),
        num_requests=n_req,
        prompt_source="estimated",
        device="cuda",
        tensor_parallel=est.tensor_parallel,
        expert_parallel=est.expert_parallel,
        data_parallel=est.data_parallel,
        pipeline_parallel=est.pipeline_parallel,
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
        engine=est.engine.replace("-", " ", 1),  # "vllm-0.11" -> "vllm 0.11": the modelled engine
    )
    bd = est.breakdown_j_per_token
    out_tokens = max(1, round(est.output_tokens))
    # Phases cover one batch of ``n_req`` requests (tokens summed over the batch), so that
    # power and throughput of the request phase are those of the whole configuration.
    total_j = est.energy_per_token_j * n_req * out_tokens
    share_pf = bd["prefill"] / est.energy_per_token_j if est.energy_per_token_j else 0.0
    dur = est.request_duration_s
    pf_dur = est.prefill_duration_s

    def phase(name: Phase, duration: float, energy: float, tokens: int) -> PhaseResult:
        return PhaseResult.from_totals(
            name,
            duration,
            energy,
            tokens,
            itl_p50_s=est.itl_s if name != Phase.PREFILL else None,
        )

    phases = (
        phase(Phase.PREFILL, pf_dur, total_j * share_pf, n_req * round(est.input_tokens)),
        phase(Phase.DECODE, dur - pf_dur, total_j * (1 - share_pf), n_req * out_tokens),
        phase(Phase.REQUEST, dur, total_j, n_req * out_tokens),
    )
    return RunRecord(
        model=model,
        workload=workload,
        hardware=hardware,
        software=software,
        energy_source=est.energy_source,
        phases=phases,
        tags={
            "estimate_energy_per_token_j_lo": f"{est.energy_per_token_j_lo:.6g}",
            "estimate_energy_per_token_j_hi": f"{est.energy_per_token_j_hi:.6g}",
            "sm_clock_mhz": f"{est.sm_clock_mhz:.0f}",
        },
    )
