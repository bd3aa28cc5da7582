"""The fast solver against lowtime's where many cuts cost the same."""

from __future__ import annotations

import numpy as np
import pytest
from lowtime import _lowtime_rs
from optimize_cases import UNIT

from mlenergy.estimate.reference import reference_dir
from mlenergy.optimize import fast_solver
from mlenergy.optimize.fast_solver import CriticalView
from mlenergy.optimize.frontier import solve_frontier
from mlenergy.optimize.pipeline_dag import build_pipeline_dag
from mlenergy.optimize.profile import ClockOption, PipelineProfile
from mlenergy.optimize.reference_profiles import load_perseus_profile

P_BLOCK = 60.0


def symmetric_linear_profile(stages: int, clocks: int, saving_j: float) -> PipelineProfile:
    """Every stage the same, every clock step saving the same energy: equal-cost cuts abound."""
    options = {}
    for s in range(stages):
        for inst, k0 in (("forward", 3), ("backward", 6)):
            opts = []
            for i in range(clocks):
                t = (k0 + i) * UNIT
                opts.append(ClockOption(1800 - 150 * i, t, 30.0 - saving_j * i + P_BLOCK * t))
            options[(s, inst)] = opts
    return PipelineProfile(options, energy_source="emulated:test")


class CountingRunner:
    """lowtime's Rust runner, counting its calls."""

    calls = 0

    def __init__(self, *args) -> None:
        self._runner = _lowtime_rs.PhillipsDessouky(*args)

    def find_min_cut(self):
        CountingRunner.calls += 1
        return self._runner.find_min_cut()


def solve_both(monkeypatch, stages: int, microbatches: int, clocks: int, saving_j: float):
    """(lowtime's trace, the fast solver's trace, Rust min-cut calls of the fast solver)."""
    profile = symmetric_linear_profile(stages, clocks, saving_j)
    low = solve_frontier(build_pipeline_dag(profile, microbatches, P_BLOCK, UNIT), "lowtime")
    rust = type("Rust", (), {"PhillipsDessouky": CountingRunner})
    monkeypatch.setattr(fast_solver, "_lowtime_rs", rust, raising=True)
    CountingRunner.calls = 0
    fast = solve_frontier(build_pipeline_dag(profile, microbatches, P_BLOCK, UNIT), "fast")
    return low, fast, CountingRunner.calls


@pytest.mark.parametrize("stages,microbatches,clocks", [(3, 4, 4), (4, 3, 5), (2, 6, 3)])
@pytest.mark.parametrize("saving_j", [1.0, 2.5])
def test_fast_solver_visits_lowtimes_plans_where_cuts_tie(
    monkeypatch, stages, microbatches, clocks, saving_j
):
    low, fast, calls = solve_both(monkeypatch, stages, microbatches, clocks, saving_j)
    assert low.quant_time == fast.quant_time and len(low) > 3
    for i in range(len(low)):
        assert np.array_equal(low.knobs(i), fast.knobs(i))
    assert 0 < calls <= len(fast) + 1


def test_unchanged_flow_bounds_reuse_the_previous_cut(monkeypatch):
    low, fast, calls = solve_both(monkeypatch, 3, 4, 4, 1.0)
    assert calls < len(fast)
    assert low.quant_time == fast.quant_time
    assert all(np.array_equal(low.knobs(i), fast.knobs(i)) for i in range(len(low)))


@pytest.mark.skipif(reference_dir() is None, reason="no reference data")
def test_min_cut_input_equals_lowtimes_annotation_at_every_step():
    pdag = build_pipeline_dag(load_perseus_profile("bloom-176b"), 2, 70.38, 0.01)
    solver = fast_solver.FastPhillipsDessouky(pdag.dag)
    checked = 0
    for _ in solver.steps():
        view, _ = solver.critical()
        ours = solver.rust_edges(view)
        plain = CriticalView(
            view.nodes, [(u, v, {"op": a["op"]}) for u, v, a in view.edges(True)], 0, 0
        )
        solver.annotate_capacities(plain)
        assert ours == solver.format_rust_inputs(plain)[1]
        checked += 1
    assert checked > 10
