"""Small pipeline instances and an exhaustive solver for them (test support)."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np

from mlenergy.optimize.pipeline_dag import PipelineDag, build_pipeline_dag, instruction_name
from mlenergy.optimize.profile import ClockOption, PipelineProfile

UNIT = 0.001


def convex_profile(stages: int, clocks: int, seed: int, p_blocking: float) -> PipelineProfile:
    """Options one time unit apart with convex, falling cost (where Phillips-Dessouky is exact)."""
    rng = np.random.default_rng(seed)
    options = {}
    for s in range(stages):
        for inst in ("forward", "backward"):
            k0 = int(rng.integers(2, 7)) * (2 if inst == "backward" else 1)
            steps = np.sort(rng.uniform(0.5, 6.0, clocks - 1))[::-1]  # falling marginal saving
            costs = [float(rng.uniform(20, 40))]
            for d in steps:
                costs.append(costs[-1] - float(d))
            opts = []
            for i, c in enumerate(costs):
                t = (k0 + i) * UNIT
                opts.append(ClockOption(1800 - 150 * i, t, c + p_blocking * t))
            options[(s, inst)] = opts
    return PipelineProfile(options, energy_source="emulated:test")


def random_profile(stages: int, clocks: int, seed: int) -> PipelineProfile:
    """Unstructured options: gaps in time, dominated and non-convex points."""
    rng = np.random.default_rng(seed)
    options = {}
    for s in range(stages):
        for inst in ("forward", "backward"):
            ks = rng.choice(np.arange(2, 12), size=clocks, replace=False)
            opts = [
                ClockOption(1800 - 150 * i, int(k) * UNIT, float(rng.uniform(0.5, 6.0)))
                for i, k in enumerate(sorted(ks))
            ]
            options[(s, inst)] = opts
    return PipelineProfile(options, energy_source="emulated:test")


def exhaustive_frontier(
    profile: PipelineProfile, microbatches: int, p_blocking: float, grid: np.ndarray
) -> np.ndarray:
    """Least iteration energy finishing by each grid time, over every clock assignment.

    Every op (stage, instruction, microbatch) independently takes every clock of the profile,
    dominated ones included; iteration time uses times rounded up to whole units.
    """
    pdag: PipelineDag = build_pipeline_dag(profile, microbatches, p_blocking, UNIT)
    keys = [(op.stage_id, instruction_name(op)) for op in pdag.ops]
    choices = [profile.options[k] for k in keys]
    combos = np.array(list(itertools.product(*[range(len(c)) for c in choices])), dtype=np.int64)
    quant = [np.array([round(o.time_s / UNIT) for o in c]) for c in choices]
    time_s = [np.array([o.time_s for o in c]) for c in choices]
    energy = [np.array([o.energy_j for o in c]) for c in choices]
    finish: dict[int, np.ndarray] = {}
    zero = np.zeros(len(combos), dtype=np.int64)
    for node in nx.topological_sort(pdag.dag):
        preds = list(pdag.dag.predecessors(node))
        start = np.max([finish[p] for p in preds], axis=0) if preds else zero
        i = node - 1
        finish[node] = start + (quant[i][combos[:, i]] if 0 <= i < len(keys) else 0)
    span = np.max(list(finish.values()), axis=0)
    cost = sum(
        energy[i][combos[:, i]] - p_blocking * time_s[i][combos[:, i]] for i in range(len(keys))
    )
    out = np.empty(len(grid))
    for j, t in enumerate(grid):
        ok = span <= t
        out[j] = cost[ok].min() + p_blocking * profile.num_stages * t * UNIT if ok.any() else np.inf
    return out, int(span.min())


class CliResult:
    """Exit code and combined output of one CLI call."""

    def __init__(self, exit_code: int, output: str, stdout: str) -> None:
        self.exit_code = exit_code
        self.output = output
        self.stdout = stdout


def run_cli(argv: list[str]) -> CliResult:
    """Run ``mlenergy`` in-process (the real entry point: errors become one line, exit 2)."""
    import contextlib
    import io

    from mlenergy.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return CliResult(code, out.getvalue() + err.getvalue(), out.getvalue())
