"""The finer search near the shortest time, and the solver's tables against lowtime's own code."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from lowtime.solver import PhillipsDessouky
from optimize_cases import UNIT, convex_profile
from test_pipeline_real_times import P_BLOCK, off_grid_profile

from mlenergy.optimize.fast_solver import FastPhillipsDessouky
from mlenergy.optimize.frontier import build_frontier, solve_frontier
from mlenergy.optimize.pipeline import plan_pipeline
from mlenergy.optimize.pipeline_dag import build_pipeline_dag, makespan_s
from mlenergy.optimize.pipeline_paths import LongestPaths, ops_per_path, shortest_schedule
from mlenergy.optimize.pipeline_refine import start_plan


def _energy_at(frontier, pdag, t: float) -> float:
    j = frontier.best_within(t)
    return frontier.energy_j[j] + pdag.p_blocking_w * pdag.num_stages * (
        t - frontier.iteration_time_s[j]
    )


@pytest.mark.parametrize("seed", range(4))
def test_refined_frontier_is_real_and_never_above_the_coarse_one(seed):
    profile = off_grid_profile(3, 4, seed)
    result = plan_pipeline(profile, 4, P_BLOCK, UNIT)
    pdag = result.trace.pdag
    assert len(result.refined) == 2 and all(len(t) >= 1 for t in result.refined)
    coarse = build_frontier(result.trace)
    f = result.frontier
    for t, e, knobs in zip(f.iteration_time_s, f.energy_j, f.knobs, strict=True):
        assert makespan_s(pdag, knobs) == pytest.approx(t, rel=1e-12)
        assert pdag.iteration_energy_j(knobs, t) == pytest.approx(e, rel=1e-12)
    for t in coarse.iteration_time_s:
        assert _energy_at(f, pdag, t) <= _energy_at(coarse, pdag, t) + 1e-9
    # Each finer search starts from a plan within one (two) units per instruction on a path
    # of the shortest time, and no instruction there runs slower than in it.
    step = ops_per_path(pdag) * UNIT
    for depth, fine in zip((1, 2), result.refined, strict=True):
        start = start_plan(result.trace, depth * step)
        assert makespan_s(pdag, start) <= f.iteration_time_s[0] + depth * step + 1e-12
        for i in (0, len(fine) - 1):
            assert np.all(pdag.table.time_s[fine.knobs(i)] <= pdag.table.time_s[start] + 1e-15)


def test_ops_per_path_counts_the_longest_chain():
    pdag = build_pipeline_dag(convex_profile(3, 2, 0, P_BLOCK), 4, P_BLOCK, UNIT)
    longest = nx.dag_longest_path_length(pdag.dag)  # edges; the source and sink add two
    assert ops_per_path(pdag) == longest - 1
    assert ops_per_path(pdag) == 2 * (4 + 3 - 1)


def test_compiled_paths_equal_a_plain_topological_pass():
    pdag = build_pipeline_dag(off_grid_profile(3, 4, 2), 5, P_BLOCK, UNIT)
    rng = np.random.default_rng(0)
    knobs = np.array([[rng.choice(k) for k in pdag.real_option_knobs] for _ in range(7)])
    spans = LongestPaths(pdag).makespans_s(knobs)
    assert [makespan_s(pdag, k) for k in knobs] == list(spans)  # the same floats
    shortest = shortest_schedule(pdag)
    assert makespan_s(pdag, shortest) == makespan_s(pdag, pdag.fastest_knobs)


@pytest.mark.parametrize("accounting", ["real", "perseus"])
def test_tabulated_bounds_and_knobs_are_lowtimes(accounting):
    profile = convex_profile(2, 5, 3, P_BLOCK)
    pdag = build_pipeline_dag(profile, 2, P_BLOCK, UNIT, accounting=accounting)
    solver = FastPhillipsDessouky(pdag.dag)
    solver._prepare()
    reference = PhillipsDessouky(pdag.dag)
    for e, op in enumerate(solver.ops):
        if op.is_dummy:
            continue
        row = solver.cost_row[e]
        saved = op.duration
        for d in range(op.min_duration, op.max_duration + 1):
            op.duration = d  # lowtime's setter assigns the knob
            g = nx.DiGraph()
            g.add_edge(0, 1, op=op)
            reference.annotate_capacities(g)
            col = d - solver.cost_min[row]
            assert solver.lb_table[row, col] == g[0][1]["lb"]
            assert solver.ub_table[row, col] == g[0][1]["ub"]
            assert solver.knob_table[row, col] == op.assigned_knob
            assert solver.costs[row, col] == op.get_cost(d)
        op.duration = saved


def test_fast_and_lowtime_record_the_same_model_costs():
    profile = convex_profile(2, 5, 5, P_BLOCK)
    runs = [
        solve_frontier(build_pipeline_dag(profile, 3, P_BLOCK, UNIT, accounting="perseus"), s)
        for s in ("lowtime", "fast")
    ]
    assert runs[0].quant_time == runs[1].quant_time
    np.testing.assert_allclose(runs[0].model_cost, runs[1].model_cost, rtol=1e-12)
