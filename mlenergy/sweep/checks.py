"""Checks of a plan against this machine, before any run starts or the store is touched.

Models must resolve (presets, config files, reachable hub ids), sequences must fit the model's
context, dtypes and devices must exist, and GPUs may be asked for only where Zeus sees them
(or on a Ray cluster, whose nodes the Ray executor checks). Estimates are computed once here
(well under a millisecond each), so a configuration the estimator refuses fails up front.
"""

from __future__ import annotations

from typing import Any

from mlenergy.errors import UserError
from mlenergy.measure.devices import discover_gpus
from mlenergy.models.loading import canonical_dtype, check_buildable, check_device, resolve_source
from mlenergy.models.presets import PRESET_PREFIX, PRESETS, preset_config
from mlenergy.quality.lmeval import require_lm_eval
from mlenergy.sweep.plan import Plan, raise_problems
from mlenergy.sweep.runs import estimate_record
from mlenergy.sweep.spec import RunSpec
from mlenergy.workloads.inference import InferenceSpec, check_context_length
from mlenergy.workloads.prompts import PromptSource


def _named(origin: str, key: str, value: Any, exc: UserError) -> UserError:
    return UserError(f"{origin}: key {key} = {value!r}: {exc.problem}", exc.fix)


def _gpus_here() -> int:
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


_DEVICE_FIX = (
    "Use devices: [cpu] in the plan, or run the sweep with --ray on a cluster whose nodes "
    "have that device"
)


def _check_bench(plan: Plan, origin: str, local: bool, quick: bool = False) -> list[UserError]:
    """Every problem of a measured plan's models, dtypes, devices and prompts, one each.

    With ``quick`` (a dry run) presets are checked by name only: building their configs would
    load transformers and torch, seconds for a command that runs nothing. The real run checks
    them in full before anything starts.
    """
    errors: list[UserError] = []
    precisions = []
    for i, precision in enumerate(plan.precision_axis):
        try:
            precisions.append(canonical_dtype(precision))
        except UserError as exc:
            errors.append(_named(origin, f"precisions[{i}]", precision, exc))
    for i, device in enumerate(plan.device_axis):
        if device == "cpu":  # always present; checking it would import torch for nothing
            continue
        try:
            if local or not device.startswith("cuda"):
                check_device(device)
        except UserError as exc:
            # The device check's own advice names bench's --device; a plan says it otherwise.
            errors.append(
                UserError(_named(origin, f"devices[{i}]", device, exc).problem, _DEVICE_FIX)
            )
    try:
        PromptSource.parse(plan.prompts)
    except UserError as exc:
        errors.append(_named(origin, "prompts", plan.prompts, exc))
    longest = InferenceSpec(
        input_tokens=max(plan.input_tokens), output_tokens=max(plan.output_tokens)
    )
    for i, model in enumerate(dict.fromkeys(plan.models)):
        try:
            if quick and model.startswith(PRESET_PREFIX):
                if model.removeprefix(PRESET_PREFIX) not in PRESETS:
                    preset_config(model)  # raises the unknown-preset error
                continue
            source = resolve_source(model)
            check_context_length(source.config, longest, source.model_id)
            # Presets are small causal LMs by construction; the check would import torch.
            if not source.pretrained and not model.startswith(PRESET_PREFIX):
                for precision in precisions:
                    check_buildable(source.config, precision, source.model_id)
        except UserError as exc:
            errors.append(_named(origin, f"models[{i}]", model, exc))
    return errors


def _check_estimates(runs: list[RunSpec], origin: str) -> list[UserError]:
    """Every run whose estimate the estimator refuses, one error each."""
    errors: list[UserError] = []
    for run in runs:
        try:
            estimate_record(run)
        except UserError as exc:
            errors.append(
                UserError(
                    f"{origin}: the estimate of model {run.model!r} on device {run.device!r} "
                    f"(batch {run.batch_size}, {run.input_tokens} in, {run.output_tokens} out, "
                    f"{run.precision}) fails: {exc.problem}",
                    exc.fix,
                )
            )
    return errors


def _check_quality(plan: Plan, origin: str) -> None:
    if plan.quality and plan.quality.startswith("lm-eval:"):
        try:
            require_lm_eval()
        except UserError as exc:
            raise _named(origin, "quality", plan.quality, exc) from None


def check_plan(
    plan: Plan, origin: str = "plan", *, use_ray: bool = False, dry_run: bool = False
) -> list[RunSpec]:
    """Check ``plan`` against this machine and return its runs.

    Args:
        plan: The validated plan.
        origin: Name of the plan in messages (its path).
        use_ray: Runs go to a Ray cluster: local GPU and CUDA checks are left to the cluster.
        dry_run: Nothing will run: presets are checked by name only (see ``_check_bench``).

    Raises:
        UserError: Naming the bad key and value (:class:`~mlenergy.sweep.plan.PlanProblems`
            when there are several: every one, one line each).
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
        errors = _check_bench(plan, origin, local=not use_ray, quick=dry_run)
        errors += _collect(_check_quality, plan, origin)
        device_named = any("key devices[" in e.problem for e in errors)
        if not use_ray and not device_named:  # a missing CUDA device already says it
            errors += _collect(check_gpus, plan, runs, origin)
    elif plan.kind == "estimate":
        errors = _check_estimates(runs, origin)
    else:  # serve: the server is checked when the run reaches it
        errors = []
    raise_problems(origin, errors)
    return runs


def _collect(check: Any, *args: Any) -> list[UserError]:
    try:
        check(*args)
    except UserError as exc:
        return [exc]
    return []
