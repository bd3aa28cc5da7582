"""A finer search just above the shortest iteration time (``real`` accounting).

The solver steps in whole time units and rounds every instruction's time *up*, so a plan it
sees at ``q`` units runs anywhere between ``q - n`` and ``q`` units of real time, ``n`` being
the most instructions on one path of the DAG. Just above the shortest schedule that slack is
everything: options a fraction of a unit apart round to different steps, and the search
never looks between the shortest schedule and the first plan whose rounded time it can
shorten. On the GPT-3 175B A100 profile (8 x 12, 1 ms) that leaves nothing but the
shortest schedule (6,448 J) between 2.8365 s and 2.8502 s, where plans of 6,150 J exist.

:func:`refine_near_shortest` searches that stretch again with a unit ``factor`` times finer,
starting from the best plan found within ``depth x n`` units of real time above the shortest,
for each depth of :data:`REFINE_DEPTHS`: no instruction may run slower than in that plan, so
each search starts there and walks down to the shortest time instead of over the whole range.
The two depths find different plans (on GPT-3 175B A100 8 x 96 from ``n`` units the better one at
the shortest time, 13.0% saved against 8.7%; from ``2n`` those about 0.17 s above it that
Perseus's own solver otherwise beats by up to 0.18%). Their plans join the
coarse search's before the frontier is kept (:func:`~mlenergy.optimize.frontier.build_frontier`),
so the frontier can only gain.
"""

from __future__ import annotations

import numpy as np

from mlenergy.optimize.frontier import PlanTrace, Solver, replay_from, solve_frontier
from mlenergy.optimize.pipeline_dag import build_pipeline_dag, makespan_s
from mlenergy.optimize.pipeline_paths import LongestPaths, ops_per_path, shortest_schedule
from mlenergy.optimize.profile import PipelineProfile

REFINE_FACTOR = 10
"""How many times finer the unit of the searches near the shortest time is."""
REFINE_DEPTHS = (1, 2)
"""How far above the shortest time each finer search starts, in units per instruction on a path."""


def start_plan(trace: PlanTrace, band_s: float) -> np.ndarray:
    """The least-energy plan of ``trace`` running at most ``band_s`` above the shortest time.

    Only the plans whose rounded time can be that short are evaluated: rounded up, a plan's
    real time is at most its rounded time and at least that minus one unit per instruction on
    a path. The shortest schedule the profile allows is always a candidate.
    """
    pdag = trace.pdag
    shortest = shortest_schedule(pdag)
    limit = makespan_s(pdag, shortest) + band_s
    unit = pdag.time_unit_s
    first = next(
        (i for i, q in enumerate(trace.quant_time) if q * unit <= limit + band_s + 1e-12),
        len(trace),
    )
    plans = [shortest, *replay_from(trace, first)]
    stacked = np.stack(plans)
    times = LongestPaths(pdag).makespans_s(stacked)
    cost = np.array([float(pdag.op_costs(k).sum()) for k in plans])
    cost[times > limit * (1 + 1e-12)] = np.inf
    return plans[int(np.argmin(cost))]


def refine_near_shortest(
    profile: PipelineProfile,
    trace: PlanTrace,
    solver: Solver = "fast",
    factor: int = REFINE_FACTOR,
    depths: tuple[int, ...] = REFINE_DEPTHS,
) -> tuple[PlanTrace, ...]:
    """Search again, ``factor`` times finer, from plans just above the shortest time.

    Args:
        profile: The profile ``trace``'s DAG was built from.
        trace: The coarse search (``real`` accounting).
        solver: ``fast`` or ``lowtime``.
        factor: How many times finer the unit is.
        depths: Where the searches start: the best plan within ``depth`` units per instruction
            on a path of the shortest time, one search per depth.

    Returns:
        The finer searches' plans (their DAGs share the coarse one's ops and option table).
    """
    pdag = trace.pdag
    step = ops_per_path(pdag) * pdag.time_unit_s
    searches = []
    for depth in depths:
        fine = build_pipeline_dag(
            profile,
            pdag.num_microbatches,
            pdag.p_blocking_w,
            pdag.time_unit_s / factor,
            slowest_knobs=start_plan(trace, depth * step),
        )
        searches.append(solve_frontier(fine, solver))
    return tuple(searches)
