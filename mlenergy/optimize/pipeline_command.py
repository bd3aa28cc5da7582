"""``mlenergy optimize pipeline`` as one library call: options in, plan and files out.

:func:`run_pipeline_command` checks every option and output folder before anything is
computed or written, picks the profile (a file, a shipped ``perseus:`` profile or the
estimator's), defaults the blocking power, plans and writes the requested files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mlenergy.errors import UserError
from mlenergy.optimize.estimated_profile import (
    estimated_blocking_power_w,
    estimated_pipeline_profile,
)
from mlenergy.optimize.frontier import Solver
from mlenergy.optimize.pipeline import (
    PipelineResult,
    check_outputs,
    plan_pipeline,
    write_pipeline_outputs,
)
from mlenergy.optimize.pipeline_dag import ACCOUNTINGS, Accounting
from mlenergy.optimize.profile import PipelineProfile, read_profile_csv, write_profile_csv
from mlenergy.optimize.reference_profiles import (
    is_perseus_name,
    load_perseus_profile,
    perseus_blocking_w,
)


@dataclass(frozen=True)
class EstimateOptions:
    """How to build the profile with the estimator (``--from-estimate``).

    Attributes:
        model: Model id or config path.
        gpu: GPU name or spec file.
        stages: Pipeline stages.
        tensor_parallel: Tensor parallel per stage.
        microbatch_size: Sequences per microbatch.
        seq_len: Tokens per sequence.
        layers_per_stage: Comma-separated layers per stage, or None (even split).
        data_parallel: Data-parallel degree sharding the optimizer states.
    """

    model: str | None = None
    gpu: str | None = None
    stages: int = 1
    tensor_parallel: int = 1
    microbatch_size: int = 1
    seq_len: int = 2048
    layers_per_stage: str | None = None
    data_parallel: int = 1

    def arguments(self) -> dict:
        """Keyword arguments of :func:`estimated_pipeline_profile`.

        Raises:
            UserError: A missing model or GPU, or a bad layer split.
        """
        missing = [k for k in ("model", "gpu") if not getattr(self, k)]
        if missing:
            raise UserError(
                f"--from-estimate needs --{' and --'.join(missing)}", "Pass the model and GPU"
            )
        split = None
        if self.layers_per_stage:
            try:
                split = [int(x) for x in self.layers_per_stage.split(",")]
            except ValueError:
                raise UserError(
                    f"--layers-per-stage {self.layers_per_stage!r} is not a list of integers",
                    "Pass e.g. 12,12,12,12",
                ) from None
        return {
            "model": self.model,
            "gpu": self.gpu,
            "stages": self.stages,
            "tensor_parallel": self.tensor_parallel,
            "microbatch_size": self.microbatch_size,
            "seq_len": self.seq_len,
            "layers_per_stage": split,
            "data_parallel": self.data_parallel,
        }


@dataclass(frozen=True)
class PipelineOutputs:
    """Files to write (None: not written).

    Attributes:
        frontier: Frontier CSV.
        plan: Plan JSON.
        zeus_plan: Zeus ``PointSolution`` plan (``.py``).
        plot: Frontier PNG.
        profile: The estimated profile CSV.
    """

    frontier: Path | None = None
    plan: Path | None = None
    zeus_plan: Path | None = None
    plot: Path | None = None
    profile: Path | None = None

    def check(self) -> None:
        """Every folder exists and the Zeus plan ends in ``.py``.

        Raises:
            UserError: It does not.
        """
        check_outputs(self.frontier, self.plan, self.zeus_plan, self.plot, self.profile)
        if self.zeus_plan is not None and self.zeus_plan.suffix != ".py":
            raise UserError(
                f"--zeus-plan {self.zeus_plan} must end in .py (Zeus's PointSolution refuses "
                "other files)",
                "Name it e.g. plan.py",
            )


@dataclass
class PipelineRun:
    """What the command computed and wrote.

    Attributes:
        result: The planner's result.
        written: The files written, in order.
    """

    result: PipelineResult
    written: list[Path] = field(default_factory=list)


def _profile(profile: str | None, estimate: EstimateOptions | None) -> PipelineProfile:
    if profile is not None and estimate is None:
        if is_perseus_name(profile):
            return load_perseus_profile(profile)
        return read_profile_csv(Path(profile))
    if estimate is None or profile is not None:
        raise UserError("give exactly one of --profile and --from-estimate", "Pass one of them")
    return estimated_pipeline_profile(**estimate.arguments())


def _blocking_w(
    p_blocking: float | None, profile: str | None, estimate: EstimateOptions | None
) -> float:
    if p_blocking is not None:
        return p_blocking
    if profile is not None and is_perseus_name(profile):
        return perseus_blocking_w(profile)
    if estimate is None:
        raise UserError("--p-blocking is required with --profile", "Pass the power in W")
    return estimated_blocking_power_w(estimate.gpu or "")


def run_pipeline_command(
    microbatches: int,
    profile: str | None = None,
    estimate: EstimateOptions | None = None,
    p_blocking_w: float | None = None,
    time_unit_s: float | None = None,
    schedule: str = "1f1b",
    straggler_time_s: float | None = None,
    straggler_slowdown: float | None = None,
    solver: str = "fast",
    accounting: str = "real",
    outputs: PipelineOutputs | None = None,
) -> PipelineRun:
    """Plan one pipeline from the command's options and write the requested files.

    Args:
        microbatches: Microbatches per iteration.
        profile: A profile CSV or a shipped ``perseus:<name>`` profile (or None with
            ``estimate``).
        estimate: Build the profile with the estimator instead.
        p_blocking_w: Blocking power (W); default: the paper's figure for a shipped profile,
            the estimator's for an estimated one; required with a profile file.
        time_unit_s: Time step of the search (s); default: the accounting's
            (:data:`~mlenergy.optimize.pipeline_dag.DEFAULT_TIME_UNIT_S`).
        schedule: ``1f1b``.
        straggler_time_s: Finish-by time of a straggler (s).
        straggler_slowdown: Straggler time as a multiple of the shortest time.
        solver: ``fast`` or ``lowtime``.
        accounting: ``real`` or ``perseus``.
        outputs: Files to write.

    Raises:
        UserError: Bad options (nothing is written then).
    """
    outputs = outputs or PipelineOutputs()
    if solver not in ("fast", "lowtime"):
        raise UserError(f"--solver {solver!r} is not fast or lowtime", "Use fast or lowtime")
    if accounting not in ACCOUNTINGS:
        raise UserError(
            f"--accounting {accounting!r} is not supported", f"Use one of {', '.join(ACCOUNTINGS)}"
        )
    outputs.check()
    prof = _profile(profile, estimate)
    result = plan_pipeline(
        prof,
        microbatches=microbatches,
        p_blocking_w=_blocking_w(p_blocking_w, profile, estimate),
        time_unit_s=time_unit_s,
        schedule=schedule,
        straggler_time_s=straggler_time_s,
        straggler_slowdown=straggler_slowdown,
        solver=_solver(solver),
        accounting=_accounting(accounting),
    )
    run = PipelineRun(result)
    if outputs.profile is not None:
        run.written.append(write_profile_csv(prof, outputs.profile))
    run.written += write_pipeline_outputs(
        result, outputs.frontier, outputs.plan, outputs.zeus_plan, outputs.plot
    )
    return run


def _solver(name: str) -> Solver:
    return "lowtime" if name == "lowtime" else "fast"


def _accounting(name: str) -> Accounting:
    return "perseus" if name == "perseus" else "real"
