"""Checks of a plan against this machine, before any run starts or the store is touched.

Models must resolve (presets, config files, reachable hub ids), sequences must fit the model's
context, dtypes and devices must exist, and GPUs may be asked for only where Zeus sees them
(or on a Ray cluster, whose nodes the Ray executor checks). Estimates are computed once here
(well under a millisecond each), so a configuration the estimator refuses fails up front.
"""

from __future__ import annotations

from typing import Any

from mlenergy.errors import UserError
from mlenergy.sweep.plan import Plan
from mlenergy.sweep.spec import RunSpec


def _named(origin: str, key: str, value: Any, exc: UserError) -> UserError:
    return UserError(f"{origin}: key {key} = {value!r}: {exc.problem}", exc.fix)


def _gpus_here() -> int:
    from mlenergy.measure.devices import discover_gpus

    gpus = discover_gpus()
    return len(gpus) if gpus is not None else 0


def check_gpus(plan: Plan, runs: list[RunSpec], origin: str) -> None:
    """Refuse GPUs on a machine that has none (or too few) for the in-process executor.

    Raises:
        UserError: Naming ``resources.gpus`` (or ``devices``) and its value.
    """
    wanted = max((r.gpus for r in runs), default=0)
    if wanted == 0:
        return
    have = _gpus_here()
    if have >= wanted:
        return
    key = "resources.gpus" if plan.resources.gpus is not None else "devices"
    value = plan.resources.gpus if plan.resources.gpus is not None else plan.device_axis
    where = "no GPU" if have == 0 else f"only {have} GPU(s)"
    raise UserError(
        f"{origin}: key {key} = {value!r} asks for {wanted} GPU(s) per run but this machine "
        f"has {where}",
        "Run with --ray on a cluster with GPUs, or use devices: [cpu] and resources.gpus: 0",
    )


def _check_bench(plan: Plan, origin: str, local: bool) -> None:
    from mlenergy.models.loading import (
        canonical_dtype,
        check_buildable,
        check_device,
        resolve_source,
    )
    from mlenergy.workloads.inference import InferenceSpec, check_context_length
    from mlenergy.workloads.prompts import PromptSource

    for i, precision in enumerate(plan.precision_axis):
        try:
            canonical_dtype(precision)
        except UserError as exc:
            raise _named(origin, f"precisions[{i}]", precision, exc) from None
    for i, device in enumerate(plan.device_axis):
        try:
            if local or not device.startswith("cuda"):
                check_device(device)
        except UserError as exc:
            raise _named(origin, f"devices[{i}]", device, exc) from None
    try:
        PromptSource.parse(plan.prompts)
    except UserError as exc:
        raise _named(origin, "prompts", plan.prompts, exc) from None
    longest = InferenceSpec(
        input_tokens=max(plan.input_tokens), output_tokens=max(plan.output_tokens)
    )
    for i, model in enumerate(dict.fromkeys(plan.models)):
        try:
            source = resolve_source(model)
            check_context_length(source.config, longest, source.model_id)
            if not source.pretrained:
                for precision in plan.precision_axis:
                    check_buildable(source.config, canonical_dtype(precision), source.model_id)
        except UserError as exc:
            raise _named(origin, f"models[{i}]", model, exc) from None


def _check_estimates(runs: list[RunSpec], origin: str) -> None:
    from mlenergy.sweep.runs import estimate_record

    for run in runs:
        try:
            estimate_record(run)
        except UserError as exc:
            raise UserError(
                f"{origin}: the estimate of model {run.model!r} on device {run.device!r} "
                f"(batch {run.batch_size}, {run.input_tokens} in, {run.output_tokens} out, "
                f"{run.precision}) fails: {exc.problem}",
                exc.fix,
            ) from None


def _check_quality(plan: Plan, origin: str) -> None:
    if plan.quality and plan.quality.startswith("lm-eval:"):
        from mlenergy.quality.lmeval import require_lm_eval

        try:
            require_lm_eval()
        except UserError as exc:
            raise _named(origin, "quality", plan.quality, exc) from None


def check_plan(plan: Plan, origin: str = "plan", *, use_ray: bool = False) -> list[RunSpec]:
    """Check ``plan`` against this machine and return its runs.

    Args:
        plan: The validated plan.
        origin: Name of the plan in messages (its path).
        use_ray: Runs go to a Ray cluster: local GPU and CUDA checks are left to the cluster.

    Raises:
        UserError: Naming the first bad key and value.
    """
    runs = plan.runs()
    if plan.kind == "bench":
        if plan.resources.tensor_parallel > 1:
            raise UserError(
                f"{origin}: key resources.tensor_parallel = {plan.resources.tensor_parallel}: "
                "the transformers runner splits a model's layers over its GPUs but does not "
                "shard tensors",
                "Use tensor_parallel: 1 for kind: bench (kind: estimate models tensor parallelism)",
            )
        _check_bench(plan, origin, local=not use_ray)
        _check_quality(plan, origin)
        if not use_ray:
            check_gpus(plan, runs, origin)
    elif plan.kind == "estimate":
        _check_estimates(runs, origin)
    return runs
