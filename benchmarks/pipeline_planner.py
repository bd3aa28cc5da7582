"""Frontier time of the pipeline planner: lowtime's solver as shipped versus the project's.

Both run on the same 1F1B DAG built from a measured profile (GPT-3 175B on A40, 8 stages,
~60 clocks per instruction, Perseus; shipped as ``perseus:gpt3-175b-a40``), and
the script checks that they visit the same plans (quantised time and clock of every op at
every step). lowtime is skipped above ``--lowtime-max`` microbatches (minutes per size). Up to
``--check-max`` microbatches the project's solver is run a second time asking lowtime's Rust
code for every minimum cut as well, and the disagreements are counted (the Rust calls make that
run as slow as lowtime's own minimum cuts). The first size's time includes compiling the
kernels unless numba's cache already holds them.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/pipeline_planner.py --microbatches 12,24,48,96
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mlenergy.optimize.fast_solver import FastPhillipsDessouky
from mlenergy.optimize.frontier import search_frontier, solve_frontier
from mlenergy.optimize.pipeline_dag import build_pipeline_dag
from mlenergy.optimize.reference_profiles import load_perseus_profile


def run(profile, microbatches: int, solver: str, unit: float, p_blocking: float):
    """(seconds, trace) of one frontier."""
    pdag = build_pipeline_dag(profile, microbatches, p_blocking, unit)
    start = time.perf_counter()
    trace = solve_frontier(pdag, solver)  # type: ignore[arg-type]
    return time.perf_counter() - start, trace


def repeated_share(trace) -> str:
    """Share of the feasible-flow augmentations the solver repeated from the previous cut."""
    rec = trace.solver.feasible_record
    total = rec.repeated + rec.searched
    return f"{rec.repeated / total:.0%} of {total} feasible-flow augmentations repeated"


def check_cuts(profile, microbatches: int, unit: float, p_blocking: float) -> str:
    """Run the project's solver asking lowtime's Rust code for every cut too; count mismatches."""
    pdag = build_pipeline_dag(profile, microbatches, p_blocking, unit)
    solver = FastPhillipsDessouky(pdag.dag, check_cuts=True)
    for _ in solver.steps():
        pass
    return f"{solver.cut_mismatches} of {solver.cut_calls} cuts differ from lowtime's Rust code"


def same_answer(a, b) -> str:
    """Compare two solver runs on the same DAG.

    Returns:
        ``identical`` (same clock of every op at every step), ``same frontier`` (same times
        and energies within 1e-9 relative) or ``DIFFERENT``.
    """
    if a.quant_time == b.quant_time and all(
        np.array_equal(a.knobs(i), b.knobs(i)) for i in range(len(a))
    ):
        return "identical"
    fa, fb = search_frontier(a), search_frontier(b)
    if np.array_equal(fa.quant_time, fb.quant_time) and np.allclose(
        fa.energy_j, fb.energy_j, rtol=1e-9, atol=0
    ):
        return "same frontier"
    return "DIFFERENT"


def main() -> None:
    """Print one line per size."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--microbatches", default="12,24,48,96")
    ap.add_argument("--time-unit", type=float, default=0.001)
    ap.add_argument("--p-blocking", type=float, default=70.38)
    ap.add_argument("--profile", default="gpt3-175b-a40")
    ap.add_argument("--lowtime-max", type=int, default=24)
    ap.add_argument("--check-max", type=int, default=24)
    ap.add_argument("--shares", action="store_true", help="also count repeated augmentations")
    args = ap.parse_args()
    profile = load_perseus_profile(args.profile)
    opts = {len(v) for v in profile.options.values()}
    print(
        f"profile {args.profile}: {profile.num_stages} stages, {min(opts)}-{max(opts)} clocks "
        f"per instruction, time unit {args.time_unit} s"
    )
    for mb in (int(x) for x in args.microbatches.split(",")):
        t_fast, fast = run(profile, mb, "fast", args.time_unit, args.p_blocking)
        line = f"8 x {mb:3d}: {len(fast):6d} steps, ours {t_fast:8.1f} s"
        if args.shares:
            line += " (" + repeated_share(fast) + ")"
        if mb <= args.lowtime_max:
            t_low, low = run(profile, mb, "lowtime", args.time_unit, args.p_blocking)
            line += f", lowtime {t_low:8.1f} s ({t_low / t_fast:.1f}x), "
            line += f"answer: {same_answer(low, fast)}"
        else:
            line += ", lowtime skipped"
        if mb <= args.check_max:
            line += "; " + check_cuts(profile, mb, args.time_unit, args.p_blocking)
        print(line, flush=True)


if __name__ == "__main__":
    main()
