"""The pipeline planner against lowtime and against the Perseus paper, in three parts.

``speed``: the planner on the GPT-3 175B A40 profile (8 stages, 60 clocks, its default step),
end to end (coarse search, the finer search near the shortest time, the frontier on real times) and
the coarse search beside lowtime's solver as shipped on the same DAG, checking that both visit
the same plans (quantised time and clock of every op at every step). lowtime is skipped above
``--lowtime-max`` microbatches (minutes per size); up to ``--check-max`` the project's solver
runs again asking lowtime's Rust code for every minimum cut and counts disagreements. The first
size's time includes compiling the kernels unless numba's cache already holds them. The
planner's CPU time is printed beside its wall time: on a shared machine it moves less.

``accountings``: for the GPT-3 175B and Bloom 176B A100 profiles, both accountings: the shortest
time, its energy, the saving as Perseus's Table 6 counts it (against every instruction at max
clock, blocking power to the same time), and the worst difference against the published
frontier (``perseus``: every published time must be reached) and against Perseus's own plans
re-timed on the profile (``real``: ``benchmarks/perseus_lowtime.py`` runs lowtime's solver with
Perseus's option specs; a plan below mlenergy's frontier at its time counts against it).

``published``: the ``perseus`` accounting against every published frontier
(``benchmarks/data/perseus-frontiers``: A100 at 1 ms, A40 at 0.1 ms, 12 to 96 microbatches).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/pipeline_planner.py speed --microbatches 12,96
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/pipeline_planner.py accountings
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/pipeline_planner.py published --gpus a100
"""

from __future__ import annotations

import argparse
import gzip
import time
from pathlib import Path

import numpy as np

from mlenergy.optimize.fast_solver import FastPhillipsDessouky
from mlenergy.optimize.frontier import Frontier, search_frontier, solve_frontier
from mlenergy.optimize.pipeline import PipelineResult, plan_pipeline
from mlenergy.optimize.pipeline_dag import DEFAULT_TIME_UNIT_S, build_pipeline_dag
from mlenergy.optimize.reference_profiles import load_perseus_profile, perseus_blocking_w

PUBLISHED = Path(__file__).parent / "data" / "perseus-frontiers"
"""Perseus's published frontiers: ``<gpu>/<model>_mb<N>.csv.gz``, columns ``time,energy``."""
UNITS = {"a100": 0.001, "a40": 0.0001}
"""The time unit Perseus's published frontiers were computed with, per GPU (s)."""
MODELS = ("gpt3-175b", "bloom-176b")


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


def speed(args) -> None:
    """One line per size: the planner end to end, its searches, lowtime's solver."""
    profile = load_perseus_profile(args.profile)
    p_blocking = perseus_blocking_w(args.profile)
    args.time_unit = args.time_unit or DEFAULT_TIME_UNIT_S["real"]
    opts = {len(v) for v in profile.options.values()}
    print(
        f"profile {args.profile}: {profile.num_stages} stages, {min(opts)}-{max(opts)} clocks "
        f"per instruction, time unit {args.time_unit} s, blocking {p_blocking} W"
    )
    for mb in (int(x) for x in args.microbatches.split(",")):
        start, cpu = time.perf_counter(), time.process_time()
        result = plan_pipeline(profile, mb, p_blocking, args.time_unit)
        total, cpu = time.perf_counter() - start, time.process_time() - cpu
        fast, fine = result.trace, result.refined
        line = (
            f"8 x {mb:3d}: planner {total:6.1f} s, CPU {cpu:.1f} s (search {fast.solve_s:.1f} s, "
            f"{len(fast)} steps; finer searches {sum(t.solve_s for t in fine):.1f} s, "
            f"{' + '.join(str(len(t)) for t in fine)} steps)"
        )
        if args.shares:
            line += " (" + repeated_share(fast) + ")"
        if mb <= args.lowtime_max:
            pdag = build_pipeline_dag(profile, mb, p_blocking, args.time_unit)
            start = time.perf_counter()
            low = solve_frontier(pdag, "lowtime")
            t_low = time.perf_counter() - start
            line += f", lowtime's search {t_low:.1f} s ({t_low / fast.solve_s:.1f}x), "
            line += f"answer: {same_answer(low, fast)}"
        else:
            line += ", lowtime skipped"
        if mb <= args.check_max:
            line += "; " + check_cuts(profile, mb, args.time_unit, p_blocking)
        print(line, flush=True)


def published_frontier(gpu: str, model: str, microbatches: int) -> tuple[np.ndarray, np.ndarray]:
    """(time s, energy J) of one published frontier, as published (longest time first)."""
    path = PUBLISHED / gpu / f"{model}_mb{microbatches}.csv.gz"
    with gzip.open(path, "rt") as fh:
        data = np.loadtxt(fh, delimiter=",", skiprows=1, ndmin=2)
    return data[:, 0], data[:, 1]


def against_published(frontier: Frontier, times: np.ndarray, energies: np.ndarray, unit: float):
    """(published times not on the frontier, worst relative energy difference at the others)."""
    pairs = zip(frontier.iteration_time_s, frontier.energy_j, strict=True)
    ours = {round(t / unit): e for t, e in pairs}
    steps = np.round(times / unit).astype(np.int64)
    missing = sum(1 for q in steps if int(q) not in ours)
    rel = [
        abs(ours[int(q)] - e) / e for q, e in zip(steps, energies, strict=True) if int(q) in ours
    ]
    return missing, max(rel, default=float("nan"))


def table6_saving(result: PipelineResult, t_min: float, e_min: float) -> float:
    """Saving at ``t_min`` against every instruction at max clock, blocking power to ``t_min``."""
    pdag = result.trace.pdag
    base = pdag.iteration_energy_j(pdag.max_clock_knobs, t_min)
    return 1.0 - e_min / base


def energy_on(frontier: Frontier, p_blocking: float, stages: int, t: float) -> float:
    """Least energy of the frontier's plans finishing by ``t``, blocking counted to ``t`` (J)."""
    i = frontier.best_within(t)
    return float(frontier.energy_j[i]) + p_blocking * stages * (t - frontier.iteration_time_s[i])


def against_perseus_plans(result: PipelineResult, plans) -> str:
    """Perseus's plans re-timed on the profile, each against mlenergy's frontier at its time."""
    pdag = result.trace.pdag
    rel = []
    for t, e in zip(plans.real_time_s, plans.real_energy_j, strict=True):
        ours = energy_on(result.frontier, pdag.p_blocking_w, pdag.num_stages, float(t))
        rel.append((e - ours) / ours)
    rel_a = np.array(rel)
    below = int((rel_a < -1e-3).sum())
    worst = int(np.argmin(rel_a))
    return (
        f"{below} of {len(rel_a)} Perseus plans re-timed on the profile more than 0.1% below "
        f"mlenergy's frontier; the lowest {100 * rel_a[worst]:+.2f}% at "
        f"{plans.real_time_s[worst]:.4f} s; mlenergy lower by up to {100 * rel_a.max():.2f}%"
    )


def accountings(args) -> None:
    """Both A100 profiles, both accountings."""
    from perseus_lowtime import run_perseus

    mb = args.microbatches
    for model in MODELS:
        name = f"{model}-a100"
        profile = load_perseus_profile(name)
        p_blocking = perseus_blocking_w(name)
        times, energies = published_frontier("a100", model, mb)
        for accounting in ("perseus", "real"):
            start = time.perf_counter()
            unit = UNITS["a100"] if accounting == "perseus" else None  # real: the planner's
            result = plan_pipeline(profile, mb, p_blocking, unit, accounting=accounting)
            took = time.perf_counter() - start
            f = result.frontier
            t0, e0 = float(f.iteration_time_s[0]), float(f.energy_j[0])
            line = (
                f"{name} 8 x {mb} {accounting:7s}: T_min {t0:.4f} s, {e0:,.1f} J, Table 6 saving "
                f"{100 * result.plan.saving_fraction:.2f}% ({took:.1f} s); "
            )
            if accounting == "perseus":
                missing, worst = against_published(f, times, energies, UNITS["a100"])
                pub = table6_saving(result, float(times[-1]), float(energies[-1]))
                line += (
                    f"published T_min {times[-1]:.3f} s, saving {100 * pub:.2f}%; "
                    f"{missing} of {len(times)} published times missing, worst energy "
                    f"difference {100 * worst:.2g}%"
                )
            else:
                plans = run_perseus(f"perseus:{name}", mb, UNITS["a100"])
                line += against_perseus_plans(result, plans) + f" (lowtime {plans.solve_s:.0f} s)"
            print(line, flush=True)


def published(args) -> None:
    """The ``perseus`` accounting against every published frontier asked for."""
    for gpu in args.gpus.split(","):
        for model in MODELS:
            name = f"{model}-{gpu}"
            profile = load_perseus_profile(name)
            for mb in (int(x) for x in args.microbatches.split(",")):
                times, energies = published_frontier(gpu, model, mb)
                start = time.perf_counter()
                result = plan_pipeline(
                    profile, mb, perseus_blocking_w(name), UNITS[gpu], accounting="perseus"
                )
                took = time.perf_counter() - start
                missing, worst = against_published(result.frontier, times, energies, UNITS[gpu])
                f = result.frontier
                print(
                    f"{name} 8 x {mb:3d} ({UNITS[gpu] * 1e3:g} ms): {len(times)} published points, "
                    f"{missing} missing, worst energy difference {100 * worst:.2g}%; T_min "
                    f"{f.iteration_time_s[0]:.4f} s (published {times[-1]:.4f} s), saving "
                    f"{100 * result.plan.saving_fraction:.2f}% ({took:.1f} s)",
                    flush=True,
                )


def main() -> None:
    """Run one part."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parts = ap.add_subparsers(dest="part", required=True)
    sp = parts.add_parser("speed", help="the planner's time; same plans as lowtime's solver")
    sp.add_argument("--microbatches", default="12,24,48,96")
    sp.add_argument("--time-unit", type=float, default=None, help="default: the planner's")
    sp.add_argument("--profile", default="gpt3-175b-a40")
    sp.add_argument("--lowtime-max", type=int, default=24)
    sp.add_argument("--check-max", type=int, default=24)
    sp.add_argument("--shares", action="store_true", help="also count repeated augmentations")
    sp.set_defaults(run=speed)
    ac = parts.add_parser("accountings", help="both A100 profiles, both accountings")
    ac.add_argument("--microbatches", type=int, default=12)
    ac.set_defaults(run=accountings)
    pu = parts.add_parser("published", help="the perseus accounting on every published frontier")
    pu.add_argument("--gpus", default="a100,a40")
    pu.add_argument("--microbatches", default="12,24,48,96")
    pu.set_defaults(run=published)
    args = ap.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
