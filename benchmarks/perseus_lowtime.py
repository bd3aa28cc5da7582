"""Perseus's own plans: lowtime's PhillipsDessouky with Perseus's option specs, re-timed.

This follows ``lowtime/scripts/perseus.py`` (ml-energy/zeus, branch ``kronos``, Apache-2.0)
step for step, without its plots: each (stage, instruction) of the profile becomes lowtime's
``CandidateExecutionOptions`` of (time, energy, clock), refiltered with a 0.95 noise factor
where three or fewer remain; each option costs its energy minus the blocking power times its
rounded-down time; an ``ExponentialModel(search_strategy="best")`` is fitted; the 1F1B DAG is
built node for node and edge for edge as the script builds it, and lowtime's solver runs on it.
Each plan the solver visits is kept with the figures Perseus reports for it (its rounded time
and fitted energy, the published frontier) and re-timed on the profile: the longest path with
every instruction at its clock's measured time, and the measured energies plus blocking power
over the idle time. Nothing of mlenergy's planner is used, so it checks it from outside.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/perseus_lowtime.py --microbatches 12
"""

from __future__ import annotations

import argparse
import csv
import itertools
import time
import warnings
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

import networkx as nx
import numpy as np
import pandas as pd
from lowtime.cost_model import ExponentialModel
from lowtime.graph_utils import DependencyResolver, add_sink_node, add_source_node
from lowtime.operation import CandidateExecutionOptions, ExecutionOption, OperationSpec
from lowtime.perseus.instruction import Backward, Forward, Instruction, backward_dep, forward_dep
from lowtime.perseus.schedule import Synchronous1F1B
from lowtime.solver import PhillipsDessouky

from mlenergy.optimize.reference_profiles import PERSEUS_BLOCKING_W, PERSEUS_PROFILES
from mlenergy.reference import reference_dir


class PerseusPlans(NamedTuple):
    """Every plan lowtime's solver visited with Perseus's specs, as reported and as run.

    Attributes:
        model_time_s: The rounded iteration time Perseus reports (s).
        model_energy_j: The fitted energy Perseus reports (J).
        real_time_s: The plan's iteration time on the profile's measured times (s).
        real_energy_j: Its energy on the profile: measured energies plus blocking power over
            the idle time of every stage (J).
        solve_s: Wall time of lowtime's solver and the re-timing (s).
    """

    model_time_s: np.ndarray
    model_energy_j: np.ndarray
    real_time_s: np.ndarray
    real_energy_j: np.ndarray
    solve_s: float


def profile_path(name: str) -> Path:
    """The shipped profile file of ``perseus:<name>``."""
    return reference_dir() / "perseus-profiles" / PERSEUS_PROFILES[name.removeprefix("perseus:")]


def perseus_dag(
    inst_df: pd.DataFrame, num_stages: int, num_mbs: int, p_p2p: float, unit_time: float
) -> tuple[nx.DiGraph, list[list[Instruction]]]:
    """The DAG ``lowtime/scripts/perseus.py`` builds (its node ids, its edge order)."""
    op_spec_map: dict[int, dict[type, OperationSpec]] = defaultdict(dict)
    for instruction in [Forward, Backward]:
        name = instruction.__name__
        for stage_id in range(num_stages):
            options = []
            rows = inst_df.query(f"stage == {stage_id} and instruction == '{name.lower()}'")
            for _, row in rows.iterrows():
                r = row.to_dict()
                options.append(
                    ExecutionOption[int](
                        real_time=r["time"],
                        unit_time=unit_time,
                        cost=r["energy"],
                        knob=int(r["frequency"]),
                    )
                )
            cands = CandidateExecutionOptions[int](options=options)
            if len(cands.options) <= 3:
                cands = CandidateExecutionOptions[int](options=options, noise_factor=0.95)
            for option in cands.options:
                option.cost -= p_p2p * option.quant_time * option.unit_time
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                model = ExponentialModel(cands, search_strategy="best")
            op_spec_map[stage_id][instruction] = OperationSpec[int](options=cands, cost_model=model)
    dag = nx.DiGraph()
    node_id = 2
    instructions: list[list[Instruction]] = []
    for stage_id in range(num_stages):
        stage_insts, stage_ids = [], []
        for inst in Synchronous1F1B(
            num_stages=num_stages,
            num_micro_batches=num_mbs,
            stage_id=stage_id,
            operation_spec_map=op_spec_map[stage_id],
        ):
            dag.add_node(node_id, op=inst)
            stage_insts.append(inst)
            stage_ids.append(node_id)
            node_id += 1
        instructions.append(stage_insts)
        for a, b in itertools.pairwise(stage_ids):
            dag.add_edge(a, b)
    insts = dag.nodes(data=True)
    resolver = DependencyResolver(
        dependency_rules=[forward_dep, backward_dep], node_type=Instruction
    )
    for (id1, data1), (id2, data2) in itertools.product(insts, insts):
        if resolver.is_dependent(data1["op"], data2["op"]):
            dag.add_edge(id1, id2)
    add_source_node(dag, 0)
    add_sink_node(dag, 1)
    dag.graph["source_node"] = 0
    dag.graph["sink_node"] = 1
    return dag, instructions


def run_perseus(profile: str, num_mbs: int, unit_time: float = 0.001) -> PerseusPlans:
    """Perseus's plans on a shipped profile, as reported and re-timed on the profile.

    Args:
        profile: ``perseus:<name>`` (its GPU's blocking power is the paper's).
        num_mbs: Microbatches per iteration.
        unit_time: Perseus's time unit (s): 1 ms for A100 profiles, 0.1 ms for A40 ones.
    """
    inst_df = pd.read_csv(profile_path(profile))
    p_p2p = PERSEUS_BLOCKING_W[profile.removeprefix("perseus:")]
    num_stages = int(inst_df["stage"].max()) + 1
    dag, _ = perseus_dag(inst_df, num_stages, num_mbs, p_p2p, unit_time)
    measured = {
        (int(r.stage), str(r.instruction), int(r.frequency)): (float(r.time), float(r.energy))
        for r in inst_df.itertuples()
    }
    nodes = [n for n in nx.topological_sort(dag) if n > 1]
    preds = {n: [p for p in dag.predecessors(n) if p > 1] for n in nodes}
    ops = {n: dag.nodes[n]["op"] for n in nodes}
    model_t, model_e, real_t, real_e = [], [], [], []
    start = time.perf_counter()
    for result in PhillipsDessouky(dag).run():
        model_t.append(result.real_time)
        model_e.append(result.cost + num_stages * result.real_time * p_p2p)
        finish: dict[int, float] = {}
        busy = energy = 0.0
        for n in nodes:
            op = ops[n]
            kind = "forward" if isinstance(op, Forward) else "backward"
            t, e = measured[(op.stage_id, kind, op.assigned_knob)]
            finish[n] = max((finish[p] for p in preds[n]), default=0.0) + t
            busy += t
            energy += e
        span = max(finish.values())
        real_t.append(span)
        real_e.append(energy + p_p2p * (num_stages * span - busy))
    solve_s = time.perf_counter() - start
    return PerseusPlans(
        np.array(model_t), np.array(model_e), np.array(real_t), np.array(real_e), solve_s
    )


def main() -> None:
    """Run Perseus on one profile; print its shortest plan as reported and as run."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="perseus:gpt3-175b-a100")
    ap.add_argument("--microbatches", type=int, default=12)
    ap.add_argument("--unit", type=float, default=None, help="default: 1 ms A100, 0.1 ms A40")
    ap.add_argument("--out", type=Path, default=None, help="write every plan's figures (CSV)")
    args = ap.parse_args()
    unit = args.unit or (0.0001 if args.profile.endswith("a40") else 0.001)
    plans = run_perseus(args.profile, args.microbatches, unit)
    print(
        f"{args.profile} 8 x {args.microbatches}: {len(plans.model_time_s)} plans in "
        f"{plans.solve_s:.1f} s; shortest as Perseus reports it {plans.model_time_s[-1]:.4f} s "
        f"{plans.model_energy_j[-1]:.1f} J, on the profile {plans.real_time_s[-1]:.4f} s "
        f"{plans.real_energy_j[-1]:.1f} J"
    )
    if args.out is not None:
        with args.out.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["model_time_s", "model_energy_j", "real_time_s", "real_energy_j"])
            w.writerows(
                zip(
                    plans.model_time_s,
                    plans.model_energy_j,
                    plans.real_time_s,
                    plans.real_energy_j,
                    strict=True,
                )
            )


if __name__ == "__main__":
    main()
