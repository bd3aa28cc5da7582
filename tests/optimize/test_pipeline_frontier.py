"""The pipeline frontier against exhaustive enumeration, plan time and savings."""

from __future__ import annotations

import numpy as np
import pytest
from optimize_cases import UNIT, convex_profile, exhaustive_frontier, random_profile

from mlenergy.optimize.frontier import search_frontier, solve_frontier
from mlenergy.optimize.pipeline_dag import build_pipeline_dag, makespan_s
from mlenergy.optimize.plan import choose_plan
from mlenergy.optimize.reference_profiles import load_perseus_profile

P_BLOCK = 60.0
SIZES = [(2, 2, 3), (3, 2, 3), (2, 3, 3), (3, 3, 2), (1, 3, 3)]


@pytest.mark.slow
@pytest.mark.parametrize("solver", ["lowtime", "fast"])
@pytest.mark.parametrize("stages,microbatches,clocks", SIZES)
@pytest.mark.parametrize("seed", range(4))
def test_frontier_equals_exhaustive_search(solver, stages, microbatches, clocks, seed):
    profile = convex_profile(stages, clocks, seed, P_BLOCK)
    trace = solve_frontier(build_pipeline_dag(profile, microbatches, P_BLOCK, UNIT), solver)
    frontier = search_frontier(trace)
    brute, shortest = exhaustive_frontier(profile, microbatches, P_BLOCK, frontier.quant_time)
    assert frontier.quant_time[0] == shortest
    np.testing.assert_allclose(frontier.energy_j, brute, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_unstructured_profiles_never_beat_exhaustive_and_stay_on_time(seed):
    profile = random_profile(2, 3, seed)
    trace = solve_frontier(build_pipeline_dag(profile, 3, P_BLOCK, UNIT), "fast")
    frontier = search_frontier(trace)
    brute, shortest = exhaustive_frontier(profile, 3, P_BLOCK, frontier.quant_time)
    assert frontier.quant_time[0] == shortest
    assert np.all(frontier.energy_j >= brute - 1e-9)
    for t, index in zip(frontier.iteration_time_s, frontier.plan_index, strict=True):
        assert makespan_s(trace.pdag, trace.knobs(int(index))) <= t + 1e-12


@pytest.mark.parametrize("slowdown", [None, 1.0, 1.15, 1.6])
def test_plan_never_longer_than_asked_and_saves_against_max_clock(slowdown):
    profile = convex_profile(3, 3, 7, P_BLOCK)
    trace = solve_frontier(build_pipeline_dag(profile, 3, P_BLOCK, UNIT))
    plan = choose_plan(trace, straggler_slowdown=slowdown)
    assert plan.plan_makespan_s <= plan.iteration_time_s + 1e-12
    pdag = trace.pdag
    base_span = makespan_s(pdag, pdag.max_clock_knobs)
    span = max(plan.iteration_time_s, base_span)
    assert plan.max_clock_energy_j == pytest.approx(
        pdag.iteration_energy_j(pdag.max_clock_knobs, span)
    )
    assert plan.saving_j == pytest.approx(plan.max_clock_energy_j - plan.energy_j)
    assert plan.saving_j >= -1e-9
    if slowdown and slowdown > 1.1:
        assert plan.target == "straggler"
        assert plan.saving_j > 0


def test_fast_solver_visits_lowtimes_plans_on_a_measured_profile():
    profile = load_perseus_profile("bloom-176b-a40")
    runs = [
        solve_frontier(build_pipeline_dag(profile, 2, 70.38, 0.01), s) for s in ("lowtime", "fast")
    ]
    assert runs[0].quant_time == runs[1].quant_time and len(runs[0]) > 10
    for i in range(len(runs[0])):
        assert np.array_equal(runs[0].knobs(i), runs[1].knobs(i))
