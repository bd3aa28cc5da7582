"""The pipeline frequency planner end to end: profile -> DAG -> frontier -> plan -> files.

>>> from mlenergy.optimize import plan_pipeline, read_profile_csv
>>> result = plan_pipeline(read_profile_csv("profile.csv"), microbatches=12,
...                        p_blocking_w=83.64)  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlenergy.errors import UserError
from mlenergy.optimize.frontier import (
    Frontier,
    PlanTrace,
    Solver,
    build_frontier,
    solve_frontier,
    write_frontier_csv,
)
from mlenergy.optimize.pipeline_dag import build_pipeline_dag
from mlenergy.optimize.plan import (
    PipelinePlan,
    choose_plan,
    plan_to_dict,
    write_plan_json,
    write_text,
    zeus_plan_text,
)
from mlenergy.optimize.profile import PipelineProfile


@dataclass(frozen=True)
class PipelineResult:
    """Everything the planner found.

    Attributes:
        trace: Every plan the solver visited.
        frontier: The iteration time-energy frontier.
        plan: The chosen plan.
        plan_json: The plan JSON as a dict.
    """

    trace: PlanTrace
    frontier: Frontier
    plan: PipelinePlan
    plan_json: dict[str, Any]


def check_outputs(*paths: str | Path | None) -> None:
    """Every output's folder exists, before anything is computed or written.

    Raises:
        UserError: A folder is missing.
    """
    for p in paths:
        if p is not None and not Path(p).resolve().parent.is_dir():
            raise UserError(f"output folder of {p} does not exist", "Create it first")


def plan_pipeline(
    profile: PipelineProfile,
    microbatches: int,
    p_blocking_w: float,
    time_unit_s: float = 0.001,
    schedule: str = "1f1b",
    straggler_time_s: float | None = None,
    straggler_slowdown: float | None = None,
    solver: Solver = "fast",
) -> PipelineResult:
    """Solve the frontier of one pipeline and choose a plan.

    Args:
        profile: Per-stage clock options.
        microbatches: Microbatches per iteration.
        p_blocking_w: Power of a blocked or idle GPU (W).
        time_unit_s: Time step of the solver's search (s); every reported time and energy is
            the profile's real one.
        schedule: ``1f1b``.
        straggler_time_s: Finish-by time of a straggler (s), or None.
        straggler_slowdown: Straggler time as a multiple of the shortest time, or None.
        solver: ``fast`` (default) or ``lowtime`` (same answer, slower).

    Raises:
        UserError: Bad parameters.
    """
    if straggler_time_s is not None and straggler_slowdown is not None:
        raise UserError(
            "--straggler-time and --straggler-slowdown are both given", "Pass one of them"
        )
    pdag = build_pipeline_dag(profile, microbatches, p_blocking_w, time_unit_s, schedule)
    trace = solve_frontier(pdag, solver)
    frontier = build_frontier(trace)
    plan = choose_plan(trace, straggler_time_s, straggler_slowdown, frontier)
    return PipelineResult(trace, frontier, plan, plan_to_dict(trace, plan))


def write_pipeline_outputs(
    result: PipelineResult,
    frontier_out: str | Path | None = None,
    plan_out: str | Path | None = None,
    zeus_plan: str | Path | None = None,
    plot: str | Path | None = None,
) -> list[Path]:
    """Write the requested files (each through a temp file and a rename).

    Returns:
        The paths written.
    """
    written: list[Path] = []
    if frontier_out is not None:
        written.append(write_frontier_csv(result.frontier, frontier_out))
    if plan_out is not None:
        written.append(write_plan_json(plan_out, result.plan_json))
    if zeus_plan is not None:
        text = zeus_plan_text(result.trace, result.plan.knobs, Path(zeus_plan).name)
        written.append(write_text(zeus_plan, text))
    if plot is not None:
        written.append(plot_pipeline_result(result, plot))
    return written


def plot_pipeline_result(result: PipelineResult, path: str | Path | None = None):
    """The real-time frontier with the max-clock schedule (its own time) and the chosen plan.

    Returns:
        The path written, or the figure when ``path`` is None (for notebooks).
    """
    from mlenergy.optimize.plots import plot_pipeline_frontier

    p, pdag = result.plan, result.trace.pdag
    base = pdag.iteration_energy_j(pdag.max_clock_knobs, p.max_clock_iteration_time_s)
    return plot_pipeline_frontier(
        result.frontier,
        path,
        max_clock=(p.max_clock_iteration_time_s, base),
        chosen=(p.iteration_time_s, p.energy_j),
    )


def summary_lines(result: PipelineResult) -> list[str]:
    """A few lines a user reads: shortest time, chosen plan, saving."""
    p, pdag = result.plan, result.trace.pdag
    src = result.plan_json["energy_source"]
    base_j = pdag.iteration_energy_j(pdag.max_clock_knobs, p.max_clock_iteration_time_s)
    lines = [
        f"pipeline: {result.trace.pdag.num_stages} stages x "
        f"{result.trace.pdag.num_microbatches} microbatches, {len(result.trace)} plans visited "
        f"by the solver ({result.trace.solve_s:.2f} s), energy source {src}",
        f"shortest iteration: {p.shortest_iteration_time_s:.4f} s, "
        f"{p.shortest_iteration_energy_j:.1f} J",
        f"all at max clock:   {p.max_clock_iteration_time_s:.4f} s, "
        f"{base_j:.1f} J (times and energies: the profile's own, not rounded)",
        f"chosen ({p.target}): finish by {p.iteration_time_s:.4f} s (plan runs "
        f"{p.plan_makespan_s:.4f} s), {p.energy_j:.1f} J vs {p.max_clock_energy_j:.1f} J at max "
        f"clock over the same time: saves {p.saving_j:.1f} J ({100 * p.saving_fraction:.1f}%)",
    ]
    return lines
