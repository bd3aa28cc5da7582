"""The 1F1B pipeline schedule as a lowtime DAG, with one lowtime operation per instruction.

Each (stage, instruction) of the profile becomes one :class:`lowtime.operation.OperationSpec`
whose execution options are the profile's clocks; each (stage, instruction, microbatch) of the
synchronous 1F1B schedule (:class:`lowtime.perseus.schedule.Synchronous1F1B`) becomes one
:class:`lowtime.perseus.instruction.Forward` / ``Backward`` node sharing that spec. The cost of an
option is Perseus's: its energy minus the blocking power times its time, so that minimising the
summed cost at a fixed iteration time ``T`` minimises the iteration energy
``sum(energy) + p_blocking * (stages * T - busy time)``.

Times are quantised *up* to whole ``time_unit_s`` steps, so a plan whose quantised iteration
time is ``q`` finishes in at most ``q * time_unit_s`` seconds of real time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import networkx as nx
import numpy as np
from lowtime.cost_model import CostModel
from lowtime.graph_utils import add_sink_node, add_source_node
from lowtime.operation import CandidateExecutionOptions, ExecutionOption, OperationSpec
from lowtime.perseus.instruction import Backward, Forward, Instruction
from lowtime.perseus.schedule import Synchronous1F1B

from mlenergy.errors import UserError
from mlenergy.optimize.profile import ClockOption, PipelineProfile

SCHEDULES = ("1f1b",)


class ConvexHullCost(CostModel):
    """Piecewise-linear cost through the lower convex hull of an operation's options.

    Phillips-Dessouky is exact for convex piecewise-linear costs; where the options are convex
    and one time unit apart (the usual case at a fine ``time_unit_s``) this model equals every
    option's cost. Between hull points it interpolates linearly.

    Args:
        quant_times: Quantised times of the options (any order).
        costs: Their costs.
    """

    def __init__(self, quant_times: list[int], costs: list[float]) -> None:
        pts = sorted(zip(quant_times, costs, strict=True))
        hull: list[tuple[int, float]] = []
        for q, c in pts:
            while len(hull) >= 2:
                (q1, c1), (q2, c2) = hull[-2], hull[-1]
                # Drop the middle point when it lies on or above the chord q1 -> q.
                if (c2 - c1) * (q - q1) >= (c - c1) * (q2 - q1):
                    hull.pop()
                else:
                    break
            hull.append((q, c))
        self.xs = np.array([q for q, _ in hull], dtype=float)
        self.ys = np.array([c for _, c in hull], dtype=float)
        self._cache: dict[int, float] = {}

    def __call__(self, quant_time: int) -> float:
        """Cost at ``quant_time`` (linear extrapolation outside the options' range)."""
        hit = self._cache.get(quant_time)
        if hit is not None:
            return hit
        xs, ys = self.xs, self.ys
        if len(xs) == 1:
            value = float(ys[0])
        elif quant_time <= xs[0]:
            value = float(ys[0] + (ys[1] - ys[0]) / (xs[1] - xs[0]) * (quant_time - xs[0]))
        elif quant_time >= xs[-1]:
            slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
            value = float(ys[-1] + slope * (quant_time - xs[-1]))
        else:
            value = float(np.interp(quant_time, xs, ys))
        self._cache[quant_time] = value
        return value


@dataclass
class OptionTable:
    """Every candidate option of every spec, indexed by the knob lowtime assigns.

    Attributes:
        frequency_mhz: SM clock of option ``k``.
        time_s: Real time of option ``k`` (s).
        energy_j: Energy of option ``k`` (J).
        quant_time: ``time_s`` rounded up to whole time units.
    """

    frequency_mhz: np.ndarray
    time_s: np.ndarray
    energy_j: np.ndarray
    quant_time: np.ndarray


@dataclass
class PipelineDag:
    """A pipeline's 1F1B DAG ready for :class:`lowtime.solver.PhillipsDessouky`.

    Attributes:
        dag: Activity-on-node DAG, operations under node attribute ``op``.
        ops: The instructions, stage by stage in schedule order.
        table: All options, indexed by knob.
        num_stages: Pipeline stages.
        num_microbatches: Microbatches per iteration.
        p_blocking_w: Power of a blocked or idle GPU (W).
        time_unit_s: Quantisation step (s).
        max_clock_knobs: Knob of each op's highest-clock profile point.
        energy_source: Label of the profile's figures.
        real_option_knobs: Knobs of each op's options that no other option beats on both real
            time and cost, fastest first (for evaluating and polishing plans in real time).
    """

    dag: nx.DiGraph
    ops: list[Instruction]
    table: OptionTable
    num_stages: int
    num_microbatches: int
    p_blocking_w: float
    time_unit_s: float
    max_clock_knobs: np.ndarray
    energy_source: str
    real_option_knobs: list[np.ndarray]

    @property
    def fastest_knobs(self) -> np.ndarray:
        """Knob of each op's fastest option (real time): the shortest schedule there is."""
        return np.array([k[0] for k in self.real_option_knobs], dtype=np.int64)

    def op_costs(self, knobs: np.ndarray) -> np.ndarray:
        """Perseus cost of each op at its knob: energy minus blocking power x time (J)."""
        return self.table.energy_j[knobs] - self.p_blocking_w * self.table.time_s[knobs]

    def knobs(self) -> np.ndarray:
        """The knob currently assigned to every op (one int per op)."""
        return np.fromiter(
            (op.assigned_knob for op in self.ops), dtype=np.int64, count=len(self.ops)
        )

    def iteration_energy_j(self, knobs: np.ndarray, iteration_time_s: float) -> float:
        """Energy of one iteration: instructions plus blocking power over the idle time (J)."""
        busy = float(self.table.time_s[knobs].sum())
        energy = float(self.table.energy_j[knobs].sum())
        return energy + self.p_blocking_w * (self.num_stages * iteration_time_s - busy)


def quantise_up(time_s: float, unit_s: float) -> int:
    """Whole time units needed for ``time_s`` (rounded up, robust to float noise)."""
    return max(1, math.ceil(round(time_s / unit_s, 9)))


def _pareto(
    opts: list[ClockOption], unit_s: float, p_blocking_w: float
) -> list[tuple[int, float, ClockOption]]:
    """(quant time, cost, option) of the options no other option beats on both, fastest first."""
    best: dict[int, tuple[float, ClockOption]] = {}
    for o in opts:
        q = quantise_up(o.time_s, unit_s)
        cost = o.energy_j - p_blocking_w * o.time_s
        if q not in best or cost < best[q][0]:
            best[q] = (cost, o)
    kept: list[tuple[int, float, ClockOption]] = []
    for q in sorted(best):
        cost, o = best[q]
        if not kept or cost < kept[-1][1]:
            kept.append((q, cost, o))
    return kept


def _real_pareto(opts: list[ClockOption], p_blocking_w: float) -> list[ClockOption]:
    """The options no other option beats on both real time and cost, fastest first."""
    kept: list[ClockOption] = []
    for o in sorted(opts, key=lambda o: (o.time_s, o.energy_j - p_blocking_w * o.time_s)):
        cost = o.energy_j - p_blocking_w * o.time_s
        if not kept or cost < kept[-1].energy_j - p_blocking_w * kept[-1].time_s:
            kept.append(o)
    return kept


def _stage_specs(
    profile: PipelineProfile, unit_s: float, p_blocking_w: float
) -> tuple[
    dict[tuple[int, str], OperationSpec],
    OptionTable,
    dict[tuple[int, str], int],
    dict[tuple[int, str], list[int]],
]:
    freq: list[int] = []
    times: list[float] = []
    energies: list[float] = []
    quants: list[int] = []
    specs: dict[tuple[int, str], OperationSpec] = {}
    max_knob: dict[tuple[int, str], int] = {}
    real_knobs: dict[tuple[int, str], list[int]] = {}
    for key in sorted(profile.options):
        exec_opts = []
        for q, cost, o in _pareto(profile.options[key], unit_s, p_blocking_w):
            knob = len(freq)
            freq.append(o.frequency_mhz)
            times.append(o.time_s)
            energies.append(o.energy_j)
            quants.append(q)
            exec_opts.append(
                ExecutionOption(
                    real_time=(q + 0.5) * unit_s, unit_time=unit_s, cost=cost, knob=knob
                )
            )
        cands = CandidateExecutionOptions(options=exec_opts)
        model = ConvexHullCost(
            [o.quant_time for o in cands.options], [o.cost for o in cands.options]
        )
        specs[key] = OperationSpec(options=cands, cost_model=model)
        top = profile.max_clock(*key)
        max_knob[key] = len(freq)
        freq.append(top.frequency_mhz)
        times.append(top.time_s)
        energies.append(top.energy_j)
        quants.append(quantise_up(top.time_s, unit_s))
        real_knobs[key] = []
        for o in _real_pareto(profile.options[key], p_blocking_w):
            real_knobs[key].append(len(freq))
            freq.append(o.frequency_mhz)
            times.append(o.time_s)
            energies.append(o.energy_j)
            quants.append(quantise_up(o.time_s, unit_s))
    table = OptionTable(
        np.array(freq, dtype=np.int64),
        np.array(times, dtype=float),
        np.array(energies, dtype=float),
        np.array(quants, dtype=np.int64),
    )
    return specs, table, max_knob, real_knobs


def build_pipeline_dag(
    profile: PipelineProfile,
    num_microbatches: int,
    p_blocking_w: float,
    time_unit_s: float = 0.001,
    schedule: str = "1f1b",
) -> PipelineDag:
    """Build the synchronous 1F1B DAG of one iteration.

    Args:
        profile: Per-stage clock options.
        num_microbatches: Microbatches per iteration (>= 1).
        p_blocking_w: Power of a GPU blocked on communication or idle (W, >= 0).
        time_unit_s: Quantisation step of time (s, > 0).
        schedule: Pipeline schedule; only ``1f1b`` (synchronous 1F1B).

    Raises:
        UserError: A non-positive microbatch count or time unit, a negative blocking power
            or an unknown schedule.
    """
    if num_microbatches < 1:
        raise UserError(
            f"--microbatches is {num_microbatches}; it must be >= 1", "Pass a positive count"
        )
    if not time_unit_s > 0 or not math.isfinite(time_unit_s):
        raise UserError(
            f"--time-unit is {time_unit_s}; it must be > 0", "Pass e.g. --time-unit 0.001"
        )
    if not p_blocking_w >= 0 or not math.isfinite(p_blocking_w):
        raise UserError(
            f"--p-blocking is {p_blocking_w}; it must be >= 0 W", "Pass the blocked-GPU power in W"
        )
    if schedule not in SCHEDULES:
        raise UserError(
            f"--schedule {schedule!r} is not supported", f"Use one of {', '.join(SCHEDULES)}"
        )
    specs, table, max_knob, real_knobs = _stage_specs(profile, time_unit_s, p_blocking_w)
    n_stages = profile.num_stages
    dag = nx.DiGraph()
    ops: list[Instruction] = []
    where: dict[tuple[str, int, int], int] = {}
    for stage in range(n_stages):
        spec_map = {Forward: specs[(stage, "forward")], Backward: specs[(stage, "backward")]}
        previous: int | None = None
        for inst in Synchronous1F1B(n_stages, num_microbatches, stage, spec_map):
            node = len(ops) + 1
            ops.append(inst)
            dag.add_node(node, op=inst)
            kind = "forward" if isinstance(inst, Forward) else "backward"
            where[(kind, stage, inst.micro_batch_id)] = node
            if previous is not None:
                dag.add_edge(previous, node)
            previous = node
    for stage in range(n_stages - 1):
        for mb in range(num_microbatches):
            dag.add_edge(where[("forward", stage, mb)], where[("forward", stage + 1, mb)])
            dag.add_edge(where[("backward", stage + 1, mb)], where[("backward", stage, mb)])
    add_source_node(dag, 0)
    add_sink_node(dag, len(ops) + 1)
    dag.graph["source_node"] = 0
    dag.graph["sink_node"] = len(ops) + 1
    max_clock_knobs = np.array(
        [max_knob[(op.stage_id, instruction_name(op))] for op in ops], dtype=np.int64
    )
    return PipelineDag(
        dag,
        ops,
        table,
        n_stages,
        num_microbatches,
        p_blocking_w,
        time_unit_s,
        max_clock_knobs,
        profile.energy_source,
        [np.array(real_knobs[(op.stage_id, instruction_name(op))], dtype=np.int64) for op in ops],
    )


def instruction_name(op: Instruction) -> str:
    """``forward`` or ``backward``."""
    return "forward" if isinstance(op, Forward) else "backward"


def makespan_s(pdag: PipelineDag, knobs: np.ndarray, quantised: bool = False) -> float:
    """Iteration time of the schedule with each op at its knob (longest path).

    Args:
        pdag: The pipeline DAG.
        knobs: Knob of every op.
        quantised: Use the rounded-up times (in time units) instead of real seconds.
    """
    durations = pdag.table.quant_time[knobs] if quantised else pdag.table.time_s[knobs]
    finish: dict[int, float] = {}
    dag = pdag.dag
    for node in nx.topological_sort(dag):
        start = max((finish[p] for p in dag.predecessors(node)), default=0.0)
        idx = node - 1
        finish[node] = start + (float(durations[idx]) if 0 <= idx < len(pdag.ops) else 0.0)
    return max(finish.values())
