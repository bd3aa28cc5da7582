"""The pipeline frequency planner end to end: profile -> DAG -> frontier -> plan -> files.

>>> from mlenergy.optimize import plan_pipeline, read_profile_csv
>>> result = plan_pipeline(read_profile_csv("profile.csv"), microbatches=12,
...                        p_blocking_w=83.64)  # doctest: +SKIP

Two accountings (:mod:`mlenergy.optimize.pipeline_dag`): ``real`` (default) reports every plan
on the profile's own times and energies, searching the stretch just above the shortest time
again on a finer unit (:mod:`mlenergy.optimize.pipeline_refine`); ``perseus`` reports the
Perseus solver's model figures, as the paper published them
(:mod:`mlenergy.optimize.pipeline_perseus`).
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
    model_frontier,
    solve_frontier,
    write_frontier_csv,
)
from mlenergy.optimize.pipeline_dag import Accounting, build_pipeline_dag, makespan_s
from mlenergy.optimize.pipeline_refine import refine_near_shortest
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
        frontier: The iteration time-energy frontier (``real``: the profile's figures;
            ``perseus``: the solver's model).
        plan: The chosen plan.
        plan_json: The plan JSON as a dict.
        refined: The finer searches near the shortest time (``real`` accounting; none with
            ``perseus``).
    """

    trace: PlanTrace
    frontier: Frontier
    plan: PipelinePlan
    plan_json: dict[str, Any]
    refined: tuple[PlanTrace, ...] = ()

    @property
    def accounting(self) -> str:
        """``real`` or ``perseus``."""
        return self.trace.pdag.accounting

    @property
    def plans_visited(self) -> int:
        """Plans visited by every search."""
        return len(self.trace) + sum(len(t) for t in self.refined)

    @property
    def solve_s(self) -> float:
        """Wall time of every search (s)."""
        return self.trace.solve_s + sum(t.solve_s for t in self.refined)


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
    time_unit_s: float | None = None,
    schedule: str = "1f1b",
    straggler_time_s: float | None = None,
    straggler_slowdown: float | None = None,
    solver: Solver = "fast",
    accounting: Accounting = "real",
) -> PipelineResult:
    """Solve the frontier of one pipeline and choose a plan.

    Args:
        profile: Per-stage clock options.
        microbatches: Microbatches per iteration.
        p_blocking_w: Power of a blocked or idle GPU (W).
        time_unit_s: Time step of the solver's search (s; default 0.0005 for ``real``, 0.001
            for ``perseus``); with ``real`` accounting every reported time and energy is the
            profile's real one.
        schedule: ``1f1b``.
        straggler_time_s: Finish-by time of a straggler (s), or None.
        straggler_slowdown: Straggler time as a multiple of the shortest time, or None.
        solver: ``fast`` (default) or ``lowtime`` (same answer, slower).
        accounting: ``real`` (the profile's figures) or ``perseus`` (the Perseus solver's
            model, as the paper published it).

    Raises:
        UserError: Bad parameters.
    """
    if straggler_time_s is not None and straggler_slowdown is not None:
        raise UserError(
            "--straggler-time and --straggler-slowdown are both given", "Pass one of them"
        )
    pdag = build_pipeline_dag(
        profile, microbatches, p_blocking_w, time_unit_s, schedule, accounting
    )
    trace = solve_frontier(pdag, solver)
    refined: tuple[PlanTrace, ...] = ()
    if accounting == "perseus":
        frontier = model_frontier(trace)
    else:
        refined = refine_near_shortest(profile, trace, solver)
        frontier = build_frontier(trace, *refined)
    plan = choose_plan(trace, straggler_time_s, straggler_slowdown, frontier)
    return PipelineResult(trace, frontier, plan, plan_to_dict(trace, plan), refined)


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
        model = result.accounting == "perseus"
        written.append(write_frontier_csv(result.frontier, frontier_out, model))
    if plan_out is not None:
        written.append(write_plan_json(plan_out, result.plan_json))
    if zeus_plan is not None:
        text = zeus_plan_text(result.trace, result.plan.knobs, Path(zeus_plan).name)
        written.append(write_text(zeus_plan, text))
    if plot is not None:
        written.append(plot_pipeline_result(result, plot))
    return written


def plot_pipeline_result(result: PipelineResult, path: str | Path | None = None):
    """The frontier with the max-clock schedule (its own time) and the chosen plan.

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
        model=result.accounting == "perseus",
    )


def summary_lines(result: PipelineResult) -> list[str]:
    """A few lines a user reads: shortest time, chosen plan, saving."""
    p, pdag = result.plan, result.trace.pdag
    src = result.plan_json["energy_source"]
    base_j = pdag.iteration_energy_j(pdag.max_clock_knobs, p.max_clock_iteration_time_s)
    lines = [
        f"pipeline: {pdag.num_stages} stages x {pdag.num_microbatches} microbatches, "
        f"{result.plans_visited} plans visited by the solver ({result.solve_s:.2f} s), "
        f"energy source {src}",
    ]
    if result.accounting == "perseus":
        real_t = makespan_s(pdag, p.knobs)
        lines += [
            "accounting perseus: times and energies below are the Perseus solver's model "
            f"(times rounded down to {pdag.time_unit_s:g} s steps, fitted costs), not the "
            "profile's",
            f"shortest iteration: {p.shortest_iteration_time_s:.4f} s, "
            f"{p.shortest_iteration_energy_j:.1f} J (model)",
            f"all at max clock:   {p.max_clock_iteration_time_s:.4f} s, {base_j:.1f} J "
            "(the profile's)",
            f"chosen ({p.target}): finish by {p.iteration_time_s:.4f} s, {p.energy_j:.1f} J vs "
            f"{p.max_clock_energy_j:.1f} J at max clock with blocking counted to the same time "
            f"(Perseus's Table 6): saves {p.saving_j:.1f} J ({100 * p.saving_fraction:.2f}%)",
            f"on the profile the chosen plan runs {real_t:.4f} s and takes "
            f"{pdag.iteration_energy_j(p.knobs, real_t):.1f} J",
        ]
        return lines
    lines += [
        f"shortest iteration: {p.shortest_iteration_time_s:.4f} s, "
        f"{p.shortest_iteration_energy_j:.1f} J",
        f"all at max clock:   {p.max_clock_iteration_time_s:.4f} s, "
        f"{base_j:.1f} J (times and energies: the profile's own, not rounded)",
        f"chosen ({p.target}): finish by {p.iteration_time_s:.4f} s (plan runs "
        f"{p.plan_makespan_s:.4f} s), {p.energy_j:.1f} J vs {p.max_clock_energy_j:.1f} J at max "
        f"clock over the same time: saves {p.saving_j:.1f} J ({100 * p.saving_fraction:.1f}%)",
    ]
    return lines
