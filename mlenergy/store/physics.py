"""Physics rules of a submitted run, with every limit taken from the GPU catalog.

The record's own claims (``accelerator_tdp_w``, its figures) are what is checked, never what
the limits are made of: the ceiling on power is the catalog TDP x accelerator count, the floor
on energy per token comes from the catalog's peak tensor throughput and the model's active
parameters, and throughput must equal tokens / duration. See :mod:`mlenergy.store.checks` for
the names printed after each problem.
"""

from __future__ import annotations

from mlenergy.store.checks import tag
from mlenergy.store.facts import PRESENT, PhaseFacts, RunFacts
from mlenergy.store.gpus import GpuFacts, GpuLookup, as_facts

POWER_CEILING_FACTOR = 1.2
"""Average power may exceed the devices' total catalog TDP by at most this factor."""
POWER_FLOOR_FRACTION = 0.05
"""Average power must reach this fraction of the devices' total catalog TDP (the floor)."""
ENERGY_REL_TOL = 0.05
"""Allowed relative gap between ``energy_j`` and ``avg_power_w x duration_s``."""
PER_TOKEN_REL_TOL = 0.01
"""Allowed relative gap between ``energy_per_token_j`` and ``energy_j / tokens``."""
THROUGHPUT_REL_TOL = 0.01
"""Allowed relative gap between ``throughput_tokens_per_s`` and ``tokens / duration_s``."""
FLOOR_MARGIN = 0.5
"""The energy-per-token floor is this fraction of ``2 x active params x TDP / peak FLOP/s``."""
FLOPS_PER_PARAM_TOKEN = 2.0
"""FLOPs a token needs per active parameter at least (one multiply-add per weight)."""
MAX_DURATION_S = 30 * 86_400.0
"""Longest phase accepted, in seconds (30 days)."""
MAX_ENERGY_J = 1e12
"""Largest phase energy accepted, in joules (about 280 MWh)."""
MAX_TOKENS = 1e12
"""Most tokens in one phase."""
MAX_ACCELERATORS = 4096
"""Most accelerators in one run."""
COUNT_LIMITS: dict[str, float] = {
    "workload.batch_size": 1e6,
    "workload.num_requests": 1e9,
    "workload.input_tokens": 1e7,
    "workload.output_tokens": 1e7,
    "workload.max_num_seqs": 1e6,
    "workload.steps": 1e9,
    "workload.seq_len": 1e7,
    "repeats": 1e4,
    "warmup_runs": 1e4,
    "model.total_params": 1e13,
    "model.active_params": 1e13,
}
"""Largest value of each count a submission may carry."""

Limits = tuple[float, float, str]
"""``(floor_w, ceiling_w, description)`` of a run's plausible average power."""


def rel_gap(a: float, b: float) -> float:
    """Relative difference of two numbers (0 when both are 0)."""
    scale = max(abs(a), abs(b))
    return 0.0 if scale == 0 else abs(a - b) / scale


def catalog_gpu(
    where: str, facts: RunFacts, lookup: GpuLookup | None
) -> tuple[GpuFacts | None, list[str]]:
    """The catalog entry of the run's accelerator, and the problems of naming it."""
    name = facts.accelerator_model or ""
    if not name or name == PRESENT:  # missing or not text: the schema error names it
        return None, []
    found = None
    if lookup is not None and name:
        try:
            found = as_facts(name, lookup(name))
        except Exception:  # a catalog failure must not hide the other problems
            found = None
    if found is None:
        return None, [
            tag(
                "gpu-in-catalog",
                f"{where}.hardware: unknown accelerator {name[:80]!r}: it is not in the GPU "
                "catalog; a maintainer can admit it in data/submissions/gpus.json",
            )
        ]
    problems = []
    claimed = facts.accelerator_tdp_w
    if claimed is not None and claimed > found.tdp_w * POWER_CEILING_FACTOR:
        problems.append(
            tag(
                "tdp-matches-catalog",
                f"{where}.hardware.accelerator_tdp_w: {claimed:.4g} W is above the catalog's "
                f"{found.tdp_w:g} W for {found.name}",
            )
        )
    return found, problems


def power_limits(
    where: str, facts: RunFacts, lookup: GpuLookup | None
) -> tuple[Limits | None, GpuFacts | None, list[str]]:
    """The plausible power range of the claimed hardware (catalog TDPs), its GPU, and problems.

    ``None`` limits when the hardware is unknown (with a problem) or not readable (raw record
    with a schema error there: no problem, the schema error names it).
    """
    count = facts.accelerator_count
    if count is None:
        return None, None, []
    cpu_packages = max(1, facts.cpu_packages)
    if count > MAX_ACCELERATORS:
        return (
            None,
            None,
            [
                tag(
                    "figures-bounded",
                    f"{where}.hardware.accelerator_count: {count} is above {MAX_ACCELERATORS}",
                )
            ],
        )
    if count > 0:
        gpu, problems = catalog_gpu(where, facts, lookup)
        if gpu is None:
            return None, None, problems
        total = count * gpu.tdp_w
        ceiling = total * POWER_CEILING_FACTOR
        if facts.cpu_packages and facts.cpu_tdp_w:
            ceiling += cpu_packages * facts.cpu_tdp_w * POWER_CEILING_FACTOR
        desc = f"{count} x {gpu.name} (catalog TDP {gpu.tdp_w:g} W)"
        return (POWER_FLOOR_FRACTION * total, ceiling, desc), gpu, problems
    if facts.cpu_tdp_w is None:
        return (
            None,
            None,
            [
                tag(
                    "cpu-tdp-given",
                    f"{where}.hardware.cpu_tdp_w: a CPU-only run needs the CPU TDP in watts",
                )
            ],
        )
    total = cpu_packages * facts.cpu_tdp_w
    desc = f"CPU {(facts.cpu_model or '?')[:80]} (TDP {facts.cpu_tdp_w:g} W)"
    return (POWER_FLOOR_FRACTION * total, total * POWER_CEILING_FACTOR, desc), None, []


def energy_per_token_floor(facts: RunFacts, gpu: GpuFacts | None) -> float | None:
    """Least energy per token (J) the catalog allows this model on this GPU (``None``: unknown).

    A token needs at least 2 FLOPs per active parameter; a GPU does at most its peak tensor
    FLOP/s at its TDP; the floor is :data:`FLOOR_MARGIN` of that ratio.
    """
    active = facts.counts.get("model.active_params")
    peak = gpu.peak_for(facts.dtype) if gpu is not None else None
    if gpu is None or not active or not peak:
        return None
    joules_per_flop = gpu.tdp_w / (peak * 1e12)
    return FLOOR_MARGIN * FLOPS_PER_PARAM_TOKEN * active * joules_per_flop


def bound_problems(where: str, facts: RunFacts) -> list[str]:
    """Counts and per-phase figures within their maxima."""
    problems = [
        tag("figures-bounded", f"{where}.{path}: {value:.4g} is above {COUNT_LIMITS[path]:.0e}")
        for path, value in facts.counts.items()
        if value is not None and value > COUNT_LIMITS[path]
    ]
    for i, p in enumerate(facts.phases):
        at = f"{where}.phases[{i}] ({p.name})"
        for label, value, limit in (
            ("duration_s", p.duration_s, MAX_DURATION_S),
            ("energy_j", p.energy_j, MAX_ENERGY_J),
            ("tokens", p.tokens, MAX_TOKENS),
        ):
            if value is not None and value > limit:
                problems.append(
                    tag("figures-bounded", f"{at}.{label}: {value:.4g} is above {limit:.4g}")
                )
        if p.latency_s is not None and p.duration_s is not None and p.latency_s > p.duration_s:
            problems.append(
                tag(
                    "figures-bounded",
                    f"{at}: a latency of {p.latency_s:.4g} s (TTFT or ITL) is longer than the "
                    f"phase's {p.duration_s:.4g} s",
                )
            )
    for label, value, limit in (
        ("duration_s", facts.checkpoint_max_s, MAX_DURATION_S),
        ("energy_j", facts.checkpoint_max_j, MAX_ENERGY_J),
    ):
        if value is not None and value > limit:
            problems.append(
                tag(
                    "figures-bounded",
                    f"{where}.checkpoints: {label} {value:.4g} is above {limit:.4g}",
                )
            )
    return problems


def phase_problems(
    at: str, phase: PhaseFacts, limits: Limits | None, floor_j: float | None = None
) -> list[str]:
    """Power, energy = power x time, energy per token (consistent, above the floor), throughput."""
    problems = _throughput_problems(at, phase)
    energy, duration = phase.energy_j, phase.duration_s
    if energy is None or duration is None:
        return problems
    if duration <= 0:
        return [
            *problems,
            tag("figures-bounded", f"{at}.duration_s: must be positive when energy_j is given"),
        ]
    power = energy / duration
    if phase.avg_power_w is not None:
        implied = phase.avg_power_w * duration
        gap = rel_gap(energy, implied)
        if gap > ENERGY_REL_TOL:
            problems.append(
                tag(
                    "energy-matches-power",
                    f"{at}.energy_j: {energy:.6g} J differs from avg_power_w x duration_s "
                    f"= {implied:.6g} J by {gap:.1%} (limit {ENERGY_REL_TOL:.0%})",
                )
            )
    if limits is not None:
        low, high, desc = limits
        if not (low <= power <= high and power > 0):
            problems.append(
                tag(
                    "power-within-tdp",
                    f"{at}: average power {power:.4g} W is outside the plausible range "
                    f"[{low:.4g}, {high:.4g}] W for {desc}",
                )
            )
    tokens = phase.tokens
    if tokens is not None and tokens > 0 and floor_j is not None and energy / tokens < floor_j:
        problems.append(
            tag(
                "energy-per-token-floor",
                f"{at}: {energy / tokens:.4g} J per token is below the {floor_j:.4g} J the "
                "catalog's peak throughput allows for this model",
            )
        )
    if phase.energy_per_token_j is not None and tokens is not None:
        if tokens <= 0:
            problems.append(
                tag("energy-per-token-matches", f"{at}.energy_per_token_j: given but tokens is 0")
            )
        else:
            expected = energy / tokens
            gap = rel_gap(phase.energy_per_token_j, expected)
            if gap > PER_TOKEN_REL_TOL:
                problems.append(
                    tag(
                        "energy-per-token-matches",
                        f"{at}.energy_per_token_j: {phase.energy_per_token_j:.6g} J differs "
                        f"from energy_j / tokens = {expected:.6g} J by {gap:.1%}",
                    )
                )
    return problems


def _throughput_problems(at: str, phase: PhaseFacts) -> list[str]:
    rate, tokens, duration = phase.throughput_tokens_per_s, phase.tokens, phase.duration_s
    if rate is None or tokens is None or duration is None:
        return []
    if duration <= 0:
        return [tag("throughput-matches", f"{at}.throughput_tokens_per_s: given but duration 0")]
    expected = tokens / duration
    gap = rel_gap(rate, expected)
    if gap <= THROUGHPUT_REL_TOL:
        return []
    return [
        tag(
            "throughput-matches",
            f"{at}.throughput_tokens_per_s: {rate:.6g} differs from tokens / duration_s = "
            f"{expected:.6g} by {gap:.1%}",
        )
    ]


def check_physics(where: str, facts: RunFacts, lookup: GpuLookup | None) -> list[str]:
    """Every physics rule of one run; return its problems."""
    problems = bound_problems(where, facts)
    limits, gpu, limit_problems = power_limits(where, facts, lookup)
    problems.extend(limit_problems)
    floor_j = energy_per_token_floor(facts, gpu)
    for i, phase in enumerate(facts.phases):
        problems.extend(
            phase_problems(f"{where}.phases[{i}] ({phase.name})", phase, limits, floor_j)
        )
    idle_w = facts.idle_avg_power_w
    if limits is not None and idle_w is not None and idle_w > limits[1]:
        problems.append(
            tag(
                "idle-within-tdp",
                f"{where}.idle.avg_power_w: {idle_w:.4g} W exceeds {limits[1]:.4g} W for "
                f"{limits[2]}",
            )
        )
    return problems
