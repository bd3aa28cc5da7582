"""Choose a pipeline frequency plan from the frontier and write it (plan JSON, Zeus plan).

With ``real`` accounting every time and energy here comes from the profile's real durations and
energies (the solver's rounding to ``time_unit_s`` only steers its search; see
:func:`build_frontier`); with ``perseus`` accounting the plan's time and energy are the Perseus
solver's model (:func:`~mlenergy.optimize.frontier.model_frontier`). Default choice: the
frontier's shortest plan, the shortest iteration at the least energy found (removes intrinsic
energy bloat). With a straggler (another pipeline finishing at ``straggler_time_s``), the
least-energy plan finishing by the straggler's time, with blocking energy counted up to it
(extrinsic bloat).

Savings are against the same schedule with every instruction at the highest SM clock of the
profile (its real energies). ``real``: counted over the same iteration time, the longer of the
plan's horizon and the max-clock schedule's own time. ``perseus``: as the paper's Table 6 counts
it, with blocking power over the plan's horizon even where that is shorter than the max-clock
schedule's real time (the model's shortest time is below any real schedule).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlenergy.errors import UserError
from mlenergy.optimize.frontier import Frontier, PlanTrace, build_frontier, model_frontier
from mlenergy.optimize.pipeline_dag import PipelineDag, instruction_name, makespan_s


@dataclass(frozen=True)
class PipelinePlan:
    """A chosen plan and its comparison with the maximum clock.

    Attributes:
        target: ``shortest`` or ``straggler``.
        iteration_time_s: Time the plan is asked to finish by (s); its real finish is
            ``plan_makespan_s`` <= this.
        plan_makespan_s: Iteration time of the plan (s): real, from the profile's times, or
            the solver's model time with ``perseus`` accounting.
        energy_j: Plan energy over ``iteration_time_s`` (J), blocking included.
        shortest_iteration_time_s: Shortest iteration time on the frontier (s).
        shortest_iteration_energy_j: Least energy at that time (J).
        max_clock_iteration_time_s: Iteration time with every instruction at max clock (s).
        max_clock_energy_j: Energy of that schedule over ``iteration_time_s`` or its own time,
            whichever is longer (J).
        saving_j: ``max_clock_energy_j - energy_j`` over the same time (J).
        saving_fraction: ``saving_j / max_clock_energy_j``.
        knobs: Knob of every op of the plan.
    """

    target: str
    iteration_time_s: float
    plan_makespan_s: float
    energy_j: float
    shortest_iteration_time_s: float
    shortest_iteration_energy_j: float
    max_clock_iteration_time_s: float
    max_clock_energy_j: float
    saving_j: float
    saving_fraction: float
    straggler_time_s: float | None
    knobs: np.ndarray


def choose_plan(
    trace: PlanTrace,
    straggler_time_s: float | None = None,
    straggler_slowdown: float | None = None,
    frontier: Frontier | None = None,
) -> PipelinePlan:
    """Pick the plan for the shortest iteration time or for a straggler.

    Args:
        trace: Plans from :func:`mlenergy.optimize.frontier.solve_frontier`.
        straggler_time_s: Iteration time of the slowest pipeline (s).
        straggler_slowdown: The straggler's time as a multiple of the shortest time (>= 1).
        frontier: The frontier of ``trace`` (computed when not given: real times, or the
            model's with ``perseus`` accounting).

    Raises:
        UserError: Both straggler options, a slowdown below 1, or a straggler time shorter
            than the shortest iteration time.
    """
    pdag = trace.pdag
    if frontier is None:
        perseus = pdag.accounting == "perseus"
        frontier = model_frontier(trace) if perseus else build_frontier(trace)
    shortest_s = float(frontier.iteration_time_s[0])
    if straggler_time_s is not None and straggler_slowdown is not None:
        raise UserError(
            "--straggler-time and --straggler-slowdown are both given", "Pass one of them"
        )
    if straggler_slowdown is not None:
        if not straggler_slowdown >= 1.0:
            raise UserError(
                f"--straggler-slowdown is {straggler_slowdown}; it must be >= 1", "Pass e.g. 1.1"
            )
        straggler_time_s = shortest_s * straggler_slowdown
    if straggler_time_s is not None and straggler_time_s < shortest_s:
        raise UserError(
            f"--straggler-time {straggler_time_s} s is shorter than the shortest iteration "
            f"time {shortest_s:.6f} s",
            "Pass a time the pipeline can meet",
        )
    base_knobs = pdag.max_clock_knobs
    base_time = makespan_s(pdag, base_knobs)
    horizon = shortest_s if straggler_time_s is None else float(straggler_time_s)
    index = frontier.best_within(horizon)
    knobs = frontier.knobs[index]
    makespan = float(frontier.iteration_time_s[index])
    span = horizon if pdag.accounting == "perseus" else max(horizon, base_time)
    blocking_w = pdag.p_blocking_w * pdag.num_stages
    energy = float(frontier.energy_j[index]) + blocking_w * (span - makespan)
    base_energy = pdag.iteration_energy_j(base_knobs, span)
    return PipelinePlan(
        target="shortest" if straggler_time_s is None else "straggler",
        iteration_time_s=horizon,
        plan_makespan_s=makespan,
        energy_j=energy,
        shortest_iteration_time_s=shortest_s,
        shortest_iteration_energy_j=float(frontier.energy_j[0]),
        max_clock_iteration_time_s=base_time,
        max_clock_energy_j=base_energy,
        saving_j=base_energy - energy,
        saving_fraction=(base_energy - energy) / base_energy,
        straggler_time_s=straggler_time_s,
        knobs=knobs,
    )


ACCOUNTING_NOTES = {
    "real": "real: the profile's durations and energies (time_unit_s steers the search only)",
    "perseus": "model: the Perseus solver's figures (times rounded down to time_unit_s, fitted "
    "costs plus blocking power), not the profile's; savings against the profile's max-clock "
    "energy with blocking counted to the same time, as Perseus's Table 6",
}
"""What the plan's times and energies are, per accounting."""


def energy_source(pdag: PipelineDag) -> str:
    """The label of the plan's energy figures (the profile's, or the Perseus model of it)."""
    if pdag.accounting == "perseus":
        return f"modelled:perseus-fit({pdag.energy_source})"
    return pdag.energy_source


def plan_frequencies(trace: PlanTrace, knobs: np.ndarray) -> list[dict[str, Any]]:
    """The clock of every (stage, instruction, microbatch), in each stage's schedule order."""
    freq = trace.pdag.table.frequency_mhz
    return [
        {
            "stage": op.stage_id,
            "instruction": instruction_name(op),
            "microbatch": op.micro_batch_id,
            "frequency_mhz": int(freq[k]),
        }
        for op, k in zip(trace.pdag.ops, knobs, strict=True)
    ]


def plan_to_dict(trace: PlanTrace, plan: PipelinePlan) -> dict[str, Any]:
    """The plan JSON: times in s, energies in J, with the profile's energy source."""
    pdag = trace.pdag
    return {
        "target": plan.target,
        "iteration_time_s": plan.iteration_time_s,
        "plan_makespan_s": plan.plan_makespan_s,
        "energy_j": plan.energy_j,
        "shortest_iteration_time_s": plan.shortest_iteration_time_s,
        "shortest_iteration_energy_j": plan.shortest_iteration_energy_j,
        "max_clock_iteration_time_s": plan.max_clock_iteration_time_s,
        "max_clock_energy_j": plan.max_clock_energy_j,
        "saving_j": plan.saving_j,
        "saving_fraction": plan.saving_fraction,
        "straggler_time_s": plan.straggler_time_s,
        "num_stages": pdag.num_stages,
        "num_microbatches": pdag.num_microbatches,
        "p_blocking_w": pdag.p_blocking_w,
        "time_unit_s": pdag.time_unit_s,
        "accounting": pdag.accounting,
        "times": ACCOUNTING_NOTES[pdag.accounting],
        "schedule": "1f1b",
        "energy_source": energy_source(pdag),
        "frequencies": plan_frequencies(trace, plan.knobs),
    }


ZEUS_PLAN_USAGE = """\
# How to use it (Zeus's Perseus integration, zeus.optimizer.pipeline_frequency):
# 1. On a host the training ranks can reach, with `pip install 'zeus[pfo-server]'`, serve it:
#      ZEUS_PFO_SCHEDULER=PointSolution \\
#      ZEUS_PFO_SCHEDULER_ARGS='{{"solution_path": "/absolute/path/to/{name}"}}' \\
#      uvicorn zeus.optimizer.pipeline_frequency.server.router:app --host 0.0.0.0 --port 7787
#    (PointSolution3D instead when data or tensor parallel > 1: it gives each stage's list to
#    every rank of that stage; PointSolution needs exactly one rank per stage.)
# 2. In each training rank (torch.distributed initialised, `pip install 'zeus[pfo]'`):
#      pfo = PipelineFrequencyOptimizer(rank, dp_rank, pp_rank, tp_rank, device_id, dp_degree,
#                                       pp_degree, tp_degree, world_size,
#                                       server_url="http://HOST:7787")
#    and per iteration pfo.on_step_begin(); around each microbatch's forward and backward
#    pfo.on_instruction_begin("forward") / pfo.on_instruction_end("forward") (and "backward");
#    pfo.on_step_end(). Each rank then runs its stage's list below, in order.
# The server reads this file with eval(): keep it a single list literal (comments are fine).
"""


def zeus_plan_text(trace: PlanTrace, knobs: np.ndarray, name: str = "plan.py") -> str:
    """The plan as the file Zeus's ``PointSolution`` scheduler reads, with how to use it.

    The body is the Python literal ``PointSolution`` evaluates: one list per pipeline stage (rank
    of a pure pipeline-parallel job; Zeus's ``PointSolution3D`` copies it to every rank of that
    stage) of ``(instruction, MHz)`` pairs in the order the stage runs them. Comment lines above
    it say what the plan is and how to serve it to ``PipelineFrequencyOptimizer``.

    Args:
        trace: The solver's trace (the pipeline and its instructions).
        knobs: The chosen plan's clock per instruction.
        name: The file's name, quoted in the usage comment.
    """
    pdag = trace.pdag
    per_stage: list[list[tuple[str, int]]] = [[] for _ in range(pdag.num_stages)]
    for row in plan_frequencies(trace, knobs):
        per_stage[row["stage"]].append((row["instruction"], row["frequency_mhz"]))
    head = (
        f"# Per-instruction GPU frequency plan (MHz) for a 1F1B pipeline of {pdag.num_stages} "
        f"stages, {pdag.num_microbatches} microbatches per iteration,\n"
        f"# written by `mlenergy optimize pipeline --zeus-plan`; profile energy source: "
        f"{pdag.energy_source}.\n"
    )
    return head + ZEUS_PLAN_USAGE.format(name=name) + repr(per_stage) + "\n"


def write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temp file and a rename."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(p)
    return p


def write_plan_json(path: str | Path, data: dict[str, Any]) -> Path:
    """Write the plan JSON."""
    return write_text(path, json.dumps(data, indent=2) + "\n")
