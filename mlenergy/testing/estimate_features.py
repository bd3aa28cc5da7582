"""One configuration's features through the one estimator path, for tests of the physics.

:func:`prepare` runs a :class:`~mlenergy.estimate.serving.ServingSetup` through
:func:`~mlenergy.estimate.table.prepare_table` as a table of one row and returns the
physics' inputs, so that a check of the physics starts from exactly what an estimate uses.
"""

from __future__ import annotations

from pathlib import Path

from mlenergy.errors import UserError
from mlenergy.estimate.profile import ModelProfile
from mlenergy.estimate.requests import EstimateRequests
from mlenergy.estimate.serving import ServingSetup
from mlenergy.estimate.table import prepare_table
from mlenergy.models.architecture import ArchitectureSpec
from mlenergy.reference.gpus import GpuSpec


def prepare(
    model: str,
    gpu: str | GpuSpec,
    workload: ServingSetup,
    precision: str | None = None,
    configs_dir: str | Path | None = None,
    check_fit: bool = True,
) -> tuple[ArchitectureSpec, ModelProfile, GpuSpec, dict[str, float]]:
    """The architecture, profile, GPU and feature row of one serving configuration.

    Raises:
        UserError: The error an estimate of it would give.
    """
    w = workload
    request = EstimateRequests.one(
        model=model,
        gpu=gpu,
        precision=precision,
        engine=w.engine,
        batch_size=w.batch_size,
        input_tokens=w.input_tokens,
        output_tokens=w.output_tokens,
        num_gpus=w.num_gpus,
        tensor_parallel=w.tensor_parallel,
        expert_parallel=w.expert_parallel,
        data_parallel=w.data_parallel,
        pipeline_parallel=w.pipeline_parallel,
        sm_clock_mhz=w.sm_clock_mhz,
        power_limit_w=w.power_limit_w,
        max_num_seqs=w.max_num_seqs,
    )
    table = prepare_table(request, configs_dir, check_fit)
    if table.errors.messages[0]:
        raise UserError(str(table.errors.messages[0]))
    key = table.keys[table.codes[0]]
    assert key is not None
    features = {name: float(v[0]) for name, v in table.features.columns().items()}
    return key.spec, key.prof, key.gpu, features
