"""Pipeline plans are reported on the profile's real durations and energies, not rounded ones."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
from optimize_cases import UNIT, run_cli

from mlenergy.optimize.frontier import build_frontier, solve_frontier
from mlenergy.optimize.pipeline import plan_pipeline
from mlenergy.optimize.pipeline_dag import build_pipeline_dag, instruction_name, makespan_s
from mlenergy.optimize.profile import ClockOption, PipelineProfile
from mlenergy.optimize.reference_profiles import load_perseus_profile

P_BLOCK = 60.0


def off_grid_profile(stages: int, clocks: int, seed: int) -> PipelineProfile:
    """Times that fall between whole time units (so rounding up lengthens them)."""
    rng = np.random.default_rng(seed)
    options = {}
    for s in range(stages):
        for inst in ("forward", "backward"):
            base = float(rng.uniform(2, 6)) * (2 if inst == "backward" else 1)
            opts = []
            energy = float(rng.uniform(30, 45))
            for i in range(clocks):
                t = (base + i * float(rng.uniform(0.6, 1.8))) * UNIT
                energy -= float(rng.uniform(0.5, 4.0))
                opts.append(ClockOption(1800 - 150 * i, t, energy + P_BLOCK * t))
            options[(s, inst)] = opts
    return PipelineProfile(options, energy_source="emulated:test")


def real_exhaustive(profile: PipelineProfile, microbatches: int):
    """(real makespan, Perseus cost) of every clock assignment of every op."""
    pdag = build_pipeline_dag(profile, microbatches, P_BLOCK, UNIT)
    keys = [(op.stage_id, instruction_name(op)) for op in pdag.ops]
    choices = [profile.options[k] for k in keys]
    combos = np.array(list(itertools.product(*[range(len(c)) for c in choices])))
    time_s = [np.array([o.time_s for o in c]) for c in choices]
    cost = sum(
        np.array([o.energy_j - P_BLOCK * o.time_s for o in c])[combos[:, i]]
        for i, c in enumerate(choices)
    )
    finish: dict[int, np.ndarray] = {}
    zero = np.zeros(len(combos))
    for node in nx.topological_sort(pdag.dag):
        preds = list(pdag.dag.predecessors(node))
        start = np.max([finish[p] for p in preds], axis=0) if preds else zero
        i = node - 1
        finish[node] = start + (time_s[i][combos[:, i]] if 0 <= i < len(keys) else zero)
    return np.max(list(finish.values()), axis=0), cost


@pytest.mark.slow
@pytest.mark.parametrize("stages,microbatches,clocks", [(2, 2, 3), (3, 2, 3), (2, 3, 2)])
@pytest.mark.parametrize("seed", range(4))
def test_each_frontier_point_is_its_plan_on_the_profile(stages, microbatches, clocks, seed):
    profile = off_grid_profile(stages, clocks, seed)
    pdag = build_pipeline_dag(profile, microbatches, P_BLOCK, UNIT)
    frontier = build_frontier(solve_frontier(pdag))
    assert len(frontier.knobs) == len(frontier.iteration_time_s) >= 1
    for t, e, knobs in zip(
        frontier.iteration_time_s, frontier.energy_j, frontier.knobs, strict=True
    ):
        # Recomputed from the plan's clocks and the profile's own figures.
        assert makespan_s(pdag, knobs) == pytest.approx(t, rel=1e-12)
        assert pdag.iteration_energy_j(knobs, t) == pytest.approx(e, rel=1e-12)
    assert np.all(np.diff(frontier.iteration_time_s) > 0)
    # Energy at each point's own time: no point is beaten by a faster one.
    cost = frontier.energy_j - P_BLOCK * stages * frontier.iteration_time_s
    assert np.all(np.diff(cost) < 0)
    spans, costs = real_exhaustive(profile, microbatches)
    # The shortest plan reported is the shortest the profile allows.
    assert frontier.iteration_time_s[0] == pytest.approx(spans.min(), rel=1e-12)
    # No reported point claims less energy than any assignment can reach by that time.
    for t, c in zip(frontier.iteration_time_s, cost, strict=True):
        assert c >= costs[spans <= t * (1 + 1e-12)].min() - 1e-9


@pytest.mark.parametrize("slowdown", [None, 1.05, 1.3])
def test_chosen_plan_reports_real_times(slowdown):
    profile = off_grid_profile(3, 3, 11)
    result = plan_pipeline(profile, 3, P_BLOCK, UNIT, straggler_slowdown=slowdown)
    plan, pdag = result.plan, result.trace.pdag
    assert plan.plan_makespan_s == pytest.approx(makespan_s(pdag, plan.knobs), rel=1e-12)
    assert plan.plan_makespan_s <= plan.iteration_time_s * (1 + 1e-12)
    span = max(plan.iteration_time_s, plan.max_clock_iteration_time_s)
    assert plan.energy_j == pytest.approx(pdag.iteration_energy_j(plan.knobs, span))
    assert plan.shortest_iteration_time_s <= plan.max_clock_iteration_time_s + 1e-12
    assert plan.shortest_iteration_time_s == pytest.approx(
        makespan_s(pdag, pdag.fastest_knobs), rel=1e-12
    )
    # Rounding up to whole units would have reported a longer shortest time.
    assert plan.shortest_iteration_time_s < makespan_s(pdag, pdag.fastest_knobs, True) * UNIT


def test_shipped_profile_shortest_plan_is_no_longer_than_max_clock():
    profile = load_perseus_profile("bloom-176b-a40")
    result = plan_pipeline(profile, 2, 70.38, 0.01)
    plan, pdag = result.plan, result.trace.pdag
    assert plan.shortest_iteration_time_s <= plan.max_clock_iteration_time_s + 1e-12
    assert plan.shortest_iteration_time_s == pytest.approx(makespan_s(pdag, pdag.fastest_knobs))
    assert plan.saving_j > 0
    # The reported frontier's points are each their plan's real time and energy.
    f = result.frontier
    for i in (0, len(f.knobs) // 2, len(f.knobs) - 1):
        assert makespan_s(pdag, f.knobs[i]) == pytest.approx(f.iteration_time_s[i], rel=1e-12)
        assert pdag.iteration_energy_j(f.knobs[i], f.iteration_time_s[i]) == pytest.approx(
            f.energy_j[i], rel=1e-12
        )


def test_cli_frontier_csv_holds_real_times(tmp_path):
    from mlenergy.optimize.profile import write_profile_csv

    path = write_profile_csv(off_grid_profile(2, 3, 5), tmp_path / "p.csv")
    out = tmp_path / "frontier.csv"
    res = run_cli(
        [
            "optimize",
            "pipeline",
            "--profile",
            str(path),
            "--microbatches",
            "2",
            "--p-blocking",
            str(P_BLOCK),
            "--time-unit",
            str(UNIT),
            "--frontier-out",
            str(out),
        ]
    )
    assert res.exit_code == 0, res.output
    first = float(out.read_text().splitlines()[1].split(",")[0])
    spans, _ = real_exhaustive(off_grid_profile(2, 3, 5), 2)
    assert first == pytest.approx(spans.min(), abs=1e-6)
    assert "not rounded" in res.output
