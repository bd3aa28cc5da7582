"""A pipeline profile from the estimator's training mode (no GPU needed).

Adapter over :func:`mlenergy.estimate.training.estimate_pipeline_stages`: each stage's forward
and backward of one microbatch at every SM clock of the GPU, labelled with the estimator's
energy source.
"""

from __future__ import annotations

from pathlib import Path

from mlenergy.estimate import resolve_gpu
from mlenergy.estimate.training import estimate_pipeline_stages
from mlenergy.optimize.profile import ClockOption, PipelineProfile


def estimated_pipeline_profile(
    model: str | None,
    gpu: str | None,
    stages: int = 1,
    tensor_parallel: int = 1,
    microbatch_size: int = 1,
    seq_len: int = 2048,
    layers_per_stage: list[int] | None = None,
    data_parallel: int = 1,
    configs_dir: str | Path | None = None,
) -> PipelineProfile:
    """Estimate every stage x instruction x clock of a pipeline.

    Raises:
        UserError: As the estimator (unknown model or GPU, a stage that does not fit).
    """
    rows = estimate_pipeline_stages(
        str(model),
        str(gpu),
        stages=stages,
        tensor_parallel=tensor_parallel,
        microbatch_size=microbatch_size,
        seq_len=seq_len,
        layers_per_stage=layers_per_stage,
        data_parallel=data_parallel,
        configs_dir=configs_dir,
    )
    options: dict[tuple[int, str], list[ClockOption]] = {}
    for r in rows:
        options.setdefault((r.stage, r.instruction), []).append(
            ClockOption(int(r.frequency_mhz), float(r.time_s), float(r.energy_j))
        )
    return PipelineProfile(options, energy_source=rows[0].energy_source)


def estimated_blocking_power_w(gpu: str) -> float:
    """Power of a GPU blocked on communication, when none is given: the GPU's idle power (W).

    The catalog's idle figure (or its sibling's); Perseus measured 70.38 W on an A40, above
    idle, so pass ``--p-blocking`` when you know it.
    """
    spec = resolve_gpu(gpu)
    if spec.idle_power_w is not None:
        return float(spec.idle_power_w)
    return 0.1 * float(spec.tdp_w)
