"""The fast solver against lowtime's where many cuts cost the same."""

from __future__ import annotations

import numpy as np
import pytest
from lowtime.graph_utils import aoa_to_critical_dag, aon_dag_to_aoa_dag
from optimize_cases import UNIT

from mlenergy.optimize import fast_solver
from mlenergy.optimize.fast_solver import FastPhillipsDessouky
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


def solve_both(stages: int, microbatches: int, clocks: int, saving_j: float):
    """(lowtime's trace, the fast solver's trace, the fast solver checking every cut)."""
    profile = symmetric_linear_profile(stages, clocks, saving_j)
    low = solve_frontier(build_pipeline_dag(profile, microbatches, P_BLOCK, UNIT), "lowtime")
    fast = solve_frontier(build_pipeline_dag(profile, microbatches, P_BLOCK, UNIT), "fast")
    checked = FastPhillipsDessouky(
        build_pipeline_dag(profile, microbatches, P_BLOCK, UNIT).dag, check_cuts=True
    )
    steps = sum(1 for _ in checked.steps())
    assert steps == len(fast) - 1
    return low, fast, checked


@pytest.mark.parametrize("stages,microbatches,clocks", [(3, 4, 4), (4, 3, 5), (2, 6, 3)])
@pytest.mark.parametrize("saving_j", [1.0, 2.5])
def test_fast_solver_visits_lowtimes_plans_where_cuts_tie(stages, microbatches, clocks, saving_j):
    low, fast, checked = solve_both(stages, microbatches, clocks, saving_j)
    assert low.quant_time == fast.quant_time and len(low) > 3
    for i in range(len(low)):
        assert np.array_equal(low.knobs(i), fast.knobs(i))
    # Every cut the port computed equals the one lowtime's Rust code returns for that input.
    assert checked.cut_calls > 0 and checked.cut_mismatches == 0


def test_unchanged_flow_bounds_reuse_the_previous_cut():
    low, fast, checked = solve_both(3, 4, 4, 1.0)
    assert checked.cut_calls < len(fast)
    assert low.quant_time == fast.quant_time
    assert all(np.array_equal(low.knobs(i), fast.knobs(i)) for i in range(len(low)))


def test_a_cut_the_port_cannot_vouch_for_is_asked_of_lowtime(monkeypatch):
    """Where the compiled cut reports a case it does not reproduce, lowtime's Rust code answers."""
    profile = symmetric_linear_profile(2, 3, 1.0)
    monkeypatch.setattr(
        fast_solver.kern, "lowtime_min_cut", lambda *args: fast_solver.kern.CUT_ASK_LOWTIME
    )
    solver = FastPhillipsDessouky(build_pipeline_dag(profile, 3, P_BLOCK, UNIT).dag)
    steps = sum(1 for _ in solver.steps())
    low = solve_frontier(build_pipeline_dag(profile, 3, P_BLOCK, UNIT), "lowtime")
    assert steps == len(low) - 1
    assert solver.lowtime_calls == solver.cut_calls > 0


def test_min_cut_input_equals_lowtimes_annotation_at_every_step():
    pdag = build_pipeline_dag(load_perseus_profile("bloom-176b-a40"), 2, 70.38, 0.01)
    solver = fast_solver.FastPhillipsDessouky(pdag.dag, check_cuts=True)
    aoa = aon_dag_to_aoa_dag(pdag.dag)
    checked = 0
    for _ in solver.steps():
        critical = aoa_to_critical_dag(aoa)
        solver.annotate_capacities(critical)
        assert solver.cut_input() == solver.format_rust_inputs(critical)[1]
        checked += 1
    assert checked > 10 and solver.cut_mismatches == 0


def test_the_ports_maximum_flow_is_the_crates_on_a_small_network():
    """Two paths of capacity 1 and 2 and a cross arc: the flow the crate's order finds."""
    from mlenergy.optimize.edmonds_karp import edmonds_karp, live_rows
    from mlenergy.optimize.fast_solver import ArcTable, PassRecord

    tail = np.array([0, 0, 1, 2, 1], dtype=np.int64)
    head = np.array([1, 2, 3, 3, 2], dtype=np.int64)
    arcs = ArcTable(4, tail, head, 0, 3)
    residual = np.zeros(len(arcs.arc_head))
    flow = np.zeros(len(arcs.arc_head))
    for e, cap in enumerate([2.0, 1.0, 1.0, 3.0, 5.0]):
        residual[arcs.edge_arc[e]] = cap
    live = residual > 0
    live[arcs.rev[live]] = True
    starts, rows = live_rows(arcs.row_start, live)
    rec = PassRecord(6, len(arcs.arc_head), 8)
    edmonds_karp(
        starts, rows, arcs.arc_head, arcs.rev, residual, flow, 0, 3, np.empty(0, np.int64),
        rec.arrays,
    )  # fmt: skip
    edge_flow = flow[arcs.edge_arc]
    # 0-1-3 (1), 0-2-3 (1), then 0-1-2-3 (1): the breadth-first order of ascending heads.
    assert edge_flow.tolist() == [2.0, 1.0, 1.0, 2.0, 1.0]
    assert rec.searched == 3 and rec.counts[0] == 3  # the three paths, recorded


def test_feasible_flow_repeats_the_previous_cuts_augmentations_with_the_same_cuts():
    pdag = build_pipeline_dag(load_perseus_profile("gpt3-175b-a40"), 3, 70.38, 0.001)
    solver = FastPhillipsDessouky(pdag.dag, check_cuts=True)
    steps = sum(1 for _ in solver.steps())
    rec = solver.feasible_record
    assert steps > 50 and solver.cut_mismatches == 0
    assert rec.repeated > rec.searched > 0  # most augmentations repeat from cut to cut


def test_unchanged_prefix_rules():
    """Equal capacities repeat everything; a changed source arc repeats nothing."""
    from mlenergy.optimize.edmonds_karp import replay, unchanged_prefix
    from mlenergy.optimize.fast_solver import ArcTable, PassRecord

    tail = np.array([0, 0, 1, 2], dtype=np.int64)
    head = np.array([1, 2, 3, 3], dtype=np.int64)
    arcs = ArcTable(4, tail, head, 0, 3)
    rec = PassRecord(6, len(arcs.arc_head), 8)
    rec.counts[:2] = 3  # three augmentations recorded, none of them using any arc
    cap = np.zeros(len(arcs.arc_head))
    cap[arcs.edge_arc] = [1.0, 2.0, 1.0, 2.0]
    assert unchanged_prefix(rec.arrays, cap, cap.copy(), arcs.arc_head, arcs.rev, 4) == 3
    changed = cap.copy()
    changed[arcs.src_arc[2]] = 1.0  # node 2 becomes a neighbour of the super source
    assert unchanged_prefix(rec.arrays, cap, changed, arcs.arc_head, arcs.rev, 4) == 0
    rec.first_used[arcs.edge_arc[1]] = 1  # the second augmentation used edge 0 -> 2
    bigger = cap.copy()
    bigger[arcs.edge_arc[1]] = 5.0  # still positive: matters from its first use on
    assert unchanged_prefix(rec.arrays, cap, bigger, arcs.arc_head, arcs.rev, 4) == 1
    replay(rec.arrays, 1, arcs.arc_head, arcs.rev, cap, np.zeros_like(cap))
    assert rec.counts[0] == rec.counts[1] == 1
