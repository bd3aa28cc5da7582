"""The 1F1B pipeline schedule as a lowtime DAG, with one lowtime operation per instruction.

Each (stage, instruction) of the profile becomes one :class:`lowtime.operation.OperationSpec`
whose execution options are the profile's clocks; each (stage, instruction, microbatch) of the
synchronous 1F1B schedule (:class:`lowtime.perseus.schedule.Synchronous1F1B`) becomes one
:class:`lowtime.perseus.instruction.Forward` / ``Backward`` node sharing that spec.

Two accountings build the specs:

* ``real`` (default): the cost of an option is its energy minus the blocking power times its
  real time, so that minimising the summed cost at a fixed iteration time ``T`` minimises the
  iteration energy ``sum(energy) + p_blocking * (stages * T - busy time)``. Times are quantised
  *up* to whole ``time_unit_s`` steps, so a plan whose quantised iteration time is ``q``
  finishes in at most ``q * time_unit_s`` seconds of real time; options are kept where no
  other is both as fast (rounded) and cheaper, and the cost model is the lower convex hull of
  the options' costs (:class:`ConvexHullCost`).
* ``perseus``: the Perseus paper's option specs (:mod:`mlenergy.optimize.pipeline_perseus`):
  times rounded *down*, options filtered on measured energy, cost charged on the rounded time,
  an exponential cost model.

Every option of the profile has one knob in the :class:`OptionTable`, whatever the accounting
and time unit, so plans of DAGs built from one profile can be compared knob for knob.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import networkx as nx
import numpy as np
from lowtime.cost_model import CostModel
from lowtime.graph_utils import add_sink_node, add_source_node
from lowtime.operation import CandidateExecutionOptions, ExecutionOption, OperationSpec
from lowtime.perseus.instruction import Backward, Forward, Instruction
from lowtime.perseus.schedule import Synchronous1F1B

from mlenergy.errors import UserError
from mlenergy.optimize.pipeline_options import (
    OptionKey,
    OptionTable,
    option_table,
)
from mlenergy.optimize.pipeline_perseus import perseus_spec
from mlenergy.optimize.profile import PipelineProfile

SCHEDULES = ("1f1b",)
Accounting = Literal["real", "perseus"]
ACCOUNTINGS = ("real", "perseus")
"""``real``: the profile's own times and energies; ``perseus``: the Perseus paper's model."""
DEFAULT_TIME_UNIT_S = {"real": 0.0005, "perseus": 0.001}
"""The search's time step when none is given (s). ``real``: half a millisecond (most steps reuse
the previous step's minimum cut, so a finer step costs little, and rounding up then hides
less); ``perseus``: the 1 ms of Perseus's script, with which its A100 frontiers were published
(its A40 ones used 0.1 ms)."""


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
        accounting: ``real`` or ``perseus`` (how the specs were built).
        shortest: The shortest schedule, once computed
            (:func:`~mlenergy.optimize.pipeline_paths.shortest_schedule`).
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
    accounting: str = "real"
    shortest: np.ndarray | None = field(default=None, init=False, repr=False)

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


def _cost(table: OptionTable, k: int, p_blocking_w: float) -> float:
    return float(table.energy_j[k] - p_blocking_w * table.time_s[k])


def _pareto(table: OptionTable, knobs: list[int], p_blocking_w: float) -> list[int]:
    """Knobs no other option beats on both rounded time and cost, fastest first."""
    best: dict[int, int] = {}
    for k in knobs:
        q = int(table.quant_time[k])
        if q not in best or _cost(table, k, p_blocking_w) < _cost(table, best[q], p_blocking_w):
            best[q] = k
    kept: list[int] = []
    for q in sorted(best):
        k = best[q]
        if not kept or _cost(table, k, p_blocking_w) < _cost(table, kept[-1], p_blocking_w):
            kept.append(k)
    return kept


def _real_pareto(table: OptionTable, knobs: list[int], p_blocking_w: float) -> list[int]:
    """Knobs no other option beats on both real time and cost, fastest first."""
    kept: list[int] = []
    for k in sorted(knobs, key=lambda k: (table.time_s[k], _cost(table, k, p_blocking_w))):
        if not kept or _cost(table, k, p_blocking_w) < _cost(table, kept[-1], p_blocking_w):
            kept.append(k)
    return kept


def real_spec(
    table: OptionTable, knobs: list[int], unit_s: float, p_blocking_w: float
) -> OperationSpec:
    """The ``real`` accounting's spec of one (stage, instruction) over the options ``knobs``."""
    exec_opts = [
        ExecutionOption(
            real_time=(int(table.quant_time[k]) + 0.5) * unit_s,
            unit_time=unit_s,
            cost=_cost(table, k, p_blocking_w),
            knob=k,
        )
        for k in _pareto(table, knobs, p_blocking_w)
    ]
    cands = CandidateExecutionOptions(options=exec_opts)
    model = ConvexHullCost([o.quant_time for o in cands.options], [o.cost for o in cands.options])
    return OperationSpec(options=cands, cost_model=model)


def _check_args(
    num_microbatches: int, time_unit_s: float, p_blocking_w: float, schedule: str, accounting: str
) -> None:
    if num_microbatches < 1:
        raise UserError(
            f"--microbatches is {num_microbatches}; it must be >= 1", "Pass a positive count"
        )
    if not time_unit_s > 0 or not math.isfinite(time_unit_s):
        raise UserError(
            f"--time-unit is {time_unit_s}; it must be > 0", "Pass e.g. --time-unit 0.0005"
        )
    if not p_blocking_w >= 0 or not math.isfinite(p_blocking_w):
        raise UserError(
            f"--p-blocking is {p_blocking_w}; it must be >= 0 W", "Pass the blocked-GPU power in W"
        )
    if schedule not in SCHEDULES:
        raise UserError(
            f"--schedule {schedule!r} is not supported", f"Use one of {', '.join(SCHEDULES)}"
        )
    if accounting not in ACCOUNTINGS:
        raise UserError(
            f"--accounting {accounting!r} is not supported", f"Use one of {', '.join(ACCOUNTINGS)}"
        )


def build_pipeline_dag(
    profile: PipelineProfile,
    num_microbatches: int,
    p_blocking_w: float,
    time_unit_s: float | None = None,
    schedule: str = "1f1b",
    accounting: Accounting = "real",
    slowest_knobs: np.ndarray | None = None,
) -> PipelineDag:
    """Build the synchronous 1F1B DAG of one iteration.

    Args:
        profile: Per-stage clock options.
        num_microbatches: Microbatches per iteration (>= 1).
        p_blocking_w: Power of a GPU blocked on communication or idle (W, >= 0).
        time_unit_s: Quantisation step of time (s, > 0); default
            :data:`DEFAULT_TIME_UNIT_S` of the accounting.
        schedule: Pipeline schedule; only ``1f1b`` (synchronous 1F1B).
        accounting: ``real`` or ``perseus`` (see the module docstring).
        slowest_knobs: With ``real`` accounting, a plan (knob of every op) no op may run slower
            than: each op keeps only the options no slower in real time than its knob's.

    Raises:
        UserError: A non-positive microbatch count or time unit, a negative blocking power,
            an unknown schedule or accounting, or (``perseus``) an instruction whose options
            the exponential cost model cannot fit.
    """
    if time_unit_s is None:
        time_unit_s = DEFAULT_TIME_UNIT_S.get(accounting, DEFAULT_TIME_UNIT_S["real"])
    _check_args(num_microbatches, time_unit_s, p_blocking_w, schedule, accounting)
    table, knobs_of = option_table(profile, time_unit_s, accounting)
    if accounting == "perseus":
        specs = {
            key: perseus_spec(table, knobs, time_unit_s, p_blocking_w, key)
            for key, knobs in knobs_of.items()
        }
    else:
        specs = {
            key: real_spec(table, knobs, time_unit_s, p_blocking_w)
            for key, knobs in knobs_of.items()
        }
    n_stages = profile.num_stages
    ops: list[Instruction] = []
    for stage in range(n_stages):
        spec_map = {Forward: specs[(stage, "forward")], Backward: specs[(stage, "backward")]}
        ops.extend(Synchronous1F1B(n_stages, num_microbatches, stage, spec_map))
    if slowest_knobs is not None:
        ops = _capped_ops(ops, slowest_knobs, table, knobs_of, time_unit_s, p_blocking_w)
    dag = _schedule_dag(ops, n_stages, num_microbatches)
    max_knob = {
        key: max(knobs, key=lambda k: table.frequency_mhz[k]) for key, knobs in knobs_of.items()
    }
    real_knobs = {key: _real_pareto(table, knobs, p_blocking_w) for key, knobs in knobs_of.items()}
    keys = [(op.stage_id, instruction_name(op)) for op in ops]
    return PipelineDag(
        dag,
        ops,
        table,
        n_stages,
        num_microbatches,
        p_blocking_w,
        time_unit_s,
        np.array([max_knob[k] for k in keys], dtype=np.int64),
        profile.energy_source,
        [np.array(real_knobs[k], dtype=np.int64) for k in keys],
        accounting,
    )


def _capped_ops(
    ops: list[Instruction],
    slowest_knobs: np.ndarray,
    table: OptionTable,
    knobs_of: dict[OptionKey, list[int]],
    unit_s: float,
    p_blocking_w: float,
) -> list[Instruction]:
    """The same instructions, each with a spec of the options no slower than its cap."""
    specs: dict[tuple[OptionKey, float], OperationSpec] = {}
    out: list[Instruction] = []
    for op, cap in zip(ops, slowest_knobs, strict=True):
        key = (op.stage_id, instruction_name(op))
        limit = float(table.time_s[cap])
        if (key, limit) not in specs:
            allowed = [k for k in knobs_of[key] if table.time_s[k] <= limit * (1 + 1e-12)]
            specs[(key, limit)] = real_spec(table, allowed, unit_s, p_blocking_w)
        out.append(
            type(op)(
                spec=specs[(key, limit)], stage_id=op.stage_id, micro_batch_id=op.micro_batch_id
            )
        )
    return out


def _schedule_dag(ops: list[Instruction], n_stages: int, num_microbatches: int) -> nx.DiGraph:
    """Nodes ``1..len(ops)`` in op order, each stage's chain and the 1F1B dependencies."""
    dag = nx.DiGraph()
    where: dict[tuple[str, int, int], int] = {}
    previous: int | None = None
    for i, inst in enumerate(ops):
        node = i + 1
        dag.add_node(node, op=inst)
        where[(instruction_name(inst), inst.stage_id, inst.micro_batch_id)] = node
        if previous is not None and ops[i - 1].stage_id == inst.stage_id:
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
    return dag


def instruction_name(op: Instruction) -> str:
    """``forward`` or ``backward``."""
    return "forward" if isinstance(op, Forward) else "backward"


def makespan_s(pdag: PipelineDag, knobs: np.ndarray, quantised: bool = False) -> float:
    """Iteration time of the schedule with each op at its knob (longest path).

    Args:
        pdag: The pipeline DAG.
        knobs: Knob of every op.
        quantised: Use the rounded times (in time units) instead of real seconds.
    """
    durations = pdag.table.quant_time[knobs] if quantised else pdag.table.time_s[knobs]
    return _longest_path(pdag.dag, durations)


def current_quant_time(pdag: PipelineDag) -> int:
    """Iteration time of the ops' current durations (time units), as the solver sees it."""
    durations = np.array([op.duration for op in pdag.ops], dtype=float)
    return round(_longest_path(pdag.dag, durations))


def _longest_path(dag: nx.DiGraph, durations: np.ndarray) -> float:
    finish: dict[int, float] = {}
    for node in nx.topological_sort(dag):
        start = max((finish[p] for p in dag.predecessors(node)), default=0.0)
        idx = node - 1
        finish[node] = start + (float(durations[idx]) if 0 <= idx < len(durations) else 0.0)
    return max(finish.values())
