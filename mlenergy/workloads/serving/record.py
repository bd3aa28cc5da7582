"""Turn one measured concurrency level into a :class:`~mlenergy.records.RunRecord`.

The ``request`` phase holds the steady-state window, as the reference rows do: its energy from
Zeus (or the modelled server CPU), its duration, and the output tokens whose arrival fell in it;
energy per token and throughput follow from those three, so
``energy_per_token_j x tokens == energy_j`` and ``throughput x duration_s == tokens`` hold
exactly. Everything else lands in :class:`~mlenergy.records.ServingStats`: the batch as the
reference means it (the server's mean running requests, from its ``/metrics``), the server's
cap, and the energy of each request (:mod:`~.energy_split`), withheld when the split's power
samples and the counter disagree by more than
:data:`~mlenergy.records.serving.SPLIT_WINDOW_AGREEMENT` over the window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mlenergy.measure.timeline import to_power_timeline
from mlenergy.records import (
    EngineMetrics,
    Hardware,
    IdleBaseline,
    ModelInfo,
    Phase,
    PhaseResult,
    RunRecord,
    ServingStats,
    Software,
    Workload,
    utc_now,
)
from mlenergy.records.serving import SPLIT_WINDOW_AGREEMENT as SPLIT_AGREEMENT
from mlenergy.workloads.prompts import PromptSource
from mlenergy.workloads.serving.energy_split import SplitResult, split_energy, timeline_energy_j
from mlenergy.workloads.serving.server_queue import ServerCap, infer_cap
from mlenergy.workloads.serving.spec import ServingSpec
from mlenergy.workloads.serving.stats import percentiles
from mlenergy.workloads.serving.steady_state import Window, mean_in_flight, tokens_in_window
from mlenergy.workloads.serving.timing import RequestTiming


@dataclass
class LevelContext:
    """Everything about a level that is not the client's timings.

    Attributes:
        spec: The benchmark.
        level: The concurrency level.
        run_id: The record's id (also names the server log).
        model: The model description.
        engine: Engine name and version, or ``None``.
        engine_source: Where ``engine`` came from.
        launched: Whether mlenergy started the server.
        sets_server_cap: Whether the launch command received ``{max_num_seqs}`` (the level).
        ignore_eos_via: How ignore-EOS was asked, ``None`` when not asked or unsupported.
        hardware: The machine.
        software: Versions (engine included).
        energy_source: Label of every energy figure.
        scope: Devices covered.
        scope_note: What the modelled CPU energy covers, when modelled.
        idle: Idle power before the level, when measured.
        tags: Extra tags (the server log path).
    """

    spec: ServingSpec
    level: int
    run_id: str
    model: ModelInfo
    engine: str | None
    engine_source: str | None
    launched: bool
    sets_server_cap: bool
    ignore_eos_via: str | None
    hardware: Hardware
    software: Software
    energy_source: str
    scope: Any
    scope_note: str | None = None
    idle: IdleBaseline | None = None
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LevelMeasurement:
    """The measured side of a level.

    Attributes:
        timings: Every request, in send order.
        start_s: Unix time of the first arrival.
        end_s: Unix time the last request ended.
        window: The steady-state window as Zeus timed it (unix start, Zeus duration).
        window_energy_j: Its energy in joules (``None``: no figure).
        window_by_device_j: Its energy per device.
        run_energy_j: The whole run's energy in joules.
        run_duration_s: The whole run's Zeus duration in seconds.
        samples: Power samples ``(unix time, watts)`` over the run, each held until the next.
        scrapes: ``(unix time, counts)`` of every ``/metrics`` scrape over the run.
        counter_period_s: Update period of the slowest counter in scope, seconds (0: none).
    """

    timings: list[RequestTiming]
    start_s: float
    end_s: float
    window: Window
    window_energy_j: float | None
    window_by_device_j: dict[str, float]
    run_energy_j: float | None
    run_duration_s: float
    samples: list[tuple[float, float]]
    scrapes: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    counter_period_s: float = 0.0

    def window_scrapes(self) -> list[dict[str, float]]:
        """The scrapes taken inside the steady-state window."""
        return [s for t, s in self.scrapes if self.window.start_s <= t <= self.window.end_s]


def _engine_metrics(scrapes: list[dict[str, float]]) -> EngineMetrics | None:
    if not scrapes:
        return None

    def mean(key: str) -> float | None:
        values = [s[key] for s in scrapes if key in s]
        return sum(values) / len(values) if values else None

    return EngineMetrics(
        samples=len(scrapes),
        running_mean=mean("running"),
        waiting_mean=mean("waiting"),
        kv_cache_usage_mean=mean("kv_cache"),
    )


def _workload(ctx: LevelContext, ok: list[RequestTiming], batch: float, cap: ServerCap) -> Workload:
    """The workload (``max_num_seqs``: the server's cap, where it is known and bounds the batch).

    The cap is the level when ``--launch`` set it, the server's observed cap when the level was
    above it; ML.ENERGY's batch column is that ``max_num_seqs``.
    """
    spec = ctx.spec
    mean_out = sum(r.output_tokens for r in ok) / len(ok)
    mean_in = sum(r.prompt_tokens for r in ok) / len(ok)

    return Workload(
        kind="inference",
        task=spec.task,
        batch_size=ctx.level,
        avg_batch_size=batch if batch > 0 else None,
        max_num_seqs=cap.cap if cap.cap is not None and cap.cap <= ctx.level else None,
        input_tokens=round(mean_in),
        output_tokens=max(1, round(mean_out)),
        num_requests=len(ok),
        prompt_source=PromptSource.parse(spec.prompts).label,
        device="cuda" if ctx.hardware.accelerator_count else "cpu",
        avg_output_tokens=mean_out if mean_out > 0 else None,
        method="serving-steady-state",
    )


def build_record(ctx: LevelContext, m: LevelMeasurement) -> RunRecord:
    """The record of a measured level (see the module docstring)."""
    spec = ctx.spec
    ok = [r for r in m.timings if r.ok]
    window_tokens = tokens_in_window(ok, m.window)
    achieved = mean_in_flight(m.timings, m.window)
    ttfts = [r.first_token_s - r.sent_s for r in ok if r.first_token_s is not None]
    itls = [g for r in ok for g in r.itls_s()]
    tpots = [
        (r.end_s - r.first_token_s) / (r.output_tokens - 1)
        for r in ok
        if r.output_tokens > 1 and r.end_s is not None and r.first_token_s is not None
    ]
    e2e = [r.end_s - r.sent_s for r in ok if r.end_s is not None]
    itl = percentiles(itls)
    ttft = percentiles(ttfts)
    phase = PhaseResult.from_totals(
        Phase.REQUEST,
        duration_s=m.window.duration_s,
        energy_j=m.window_energy_j,
        tokens=window_tokens,
        ttft_s=ttft.p50 if ttft else None,
        itl_p50_s=itl.p50 if itl else None,
        itl_p90_s=itl.p90 if itl else None,
        itl_p99_s=itl.p99 if itl else None,
        energy_by_device_j=m.window_by_device_j,
    )
    metrics = _engine_metrics(m.window_scrapes())
    server_running = metrics.running_mean if metrics is not None else None
    declared = ctx.level if ctx.sets_server_cap else None
    cap = infer_cap(ok, ctx.level, [s for _, s in m.scrapes], declared)
    split, withheld = _split(ctx, m, ok, cap, phase.energy_j)
    # No split (no samples, or samples that disagree with the counter): no per-request
    # energies, never zeros.
    energies = split.energy_j if split is not None and withheld is None else []
    per_token = [e / r.output_tokens for e, r in zip(energies, ok, strict=False) if r.output_tokens]
    out_total = sum(r.output_tokens for r in ok)
    limit = spec.max_output_tokens
    stats = ServingStats(
        endpoint_api=spec.api,
        engine=ctx.engine,
        engine_version_source=ctx.engine_source,
        launched=ctx.launched,
        concurrency=ctx.level,
        request_rate_per_s=None if spec.request_rate == float("inf") else spec.request_rate,
        burstiness=None if spec.request_rate == float("inf") else spec.burstiness,
        seed=spec.seed,
        max_output_tokens=limit,
        ignore_eos=ctx.ignore_eos_via is not None,
        ignore_eos_via=ctx.ignore_eos_via,
        outputs_ended_early=sum(1 for r in ok if r.output_tokens < limit),
        requests_completed=len(ok),
        requests_failed=len(m.timings) - len(ok),
        input_tokens_total=sum(r.prompt_tokens for r in ok),
        output_tokens_total=out_total,
        window_start_s=max(0.0, m.window.start_s - m.start_s),
        window_end_s=max(0.0, m.window.end_s - m.start_s),
        window_output_tokens=window_tokens,
        achieved_concurrency=achieved,
        batch_source="server" if server_running is not None else "client",
        server_cap=cap.cap,
        server_cap_source=cap.source,
        level_above_server_cap=cap.cap is not None and cap.cap < ctx.level,
        window_counter_periods=(
            m.window.duration_s / m.counter_period_s if m.counter_period_s > 0 else None
        ),
        run_duration_s=m.run_duration_s,
        run_energy_j=m.run_energy_j,
        run_energy_per_token_j=(
            m.run_energy_j / out_total if m.run_energy_j is not None and out_total else None
        ),
        ttft_s=percentiles(ttfts),
        tpot_s=percentiles(tpots),
        itl_s=itl,
        e2e_latency_s=percentiles(e2e),
        request_energy_j=percentiles(energies),
        request_energy_per_token_j=percentiles(per_token),
        request_energies_j=tuple(energies),
        request_output_tokens=tuple(r.output_tokens for r in ok) if energies else (),
        split_energy_j=split.attributed_j if energies and split else None,
        split_span_s=split.in_flight_s if energies and split else None,
        split_window_energy_j=(
            timeline_energy_j(m.samples, m.window.start_s, m.window.end_s) if m.samples else None
        ),
        split_costs=split.costs if energies and split else {},
        split_withheld=withheld,
        request_queue_s=percentiles(split.queued_s) if split is not None else None,
        engine_metrics=metrics,
        energy_scope_note=ctx.scope_note,
    )
    return RunRecord(
        run_id=ctx.run_id,
        started_at=_utc(m.start_s),
        ended_at=_utc(m.end_s),
        model=ctx.model,
        workload=_workload(
            ctx, ok, server_running if server_running is not None else achieved, cap
        ),
        hardware=ctx.hardware,
        software=ctx.software,
        energy_source=ctx.energy_source,
        scope=ctx.scope,
        phases=(phase,),
        idle=ctx.idle,
        power_timeline=to_power_timeline(m.samples, ctx.energy_source, m.start_s),
        tags=ctx.tags,
        serving=stats,
    )


def _split(
    ctx: LevelContext,
    m: LevelMeasurement,
    ok: list[RequestTiming],
    cap: ServerCap,
    window_j: float | None,
) -> tuple[SplitResult | None, str | None]:
    """The per-request split, and why its energies are withheld (``None``: kept)."""
    if not m.samples:
        return None, "no power samples"
    idle = ctx.idle.avg_power_w if ctx.idle is not None else None
    split = split_energy(ok, m.samples, server_cap=cap.cap, idle_w=idle)
    if window_j is None or window_j <= 0:
        return split, "no window energy to hold the split's power samples to"
    sampled = timeline_energy_j(m.samples, m.window.start_s, m.window.end_s)
    gap = sampled / window_j - 1
    if abs(gap) > SPLIT_AGREEMENT:
        return split, (
            f"the power samples give {sampled:.4g} J over the steady-state window, the counter "
            f"{window_j:.4g} J ({gap:+.1%}, more than {SPLIT_AGREEMENT:.0%})"
        )
    return split, None


def failed_record(ctx: LevelContext, error: str) -> RunRecord:
    """The record of a level that could not be measured (a sweep keeps it as a failed point)."""
    spec = ctx.spec

    workload = Workload(
        kind="inference",
        task=spec.task,
        batch_size=ctx.level,
        max_num_seqs=ctx.level if ctx.sets_server_cap else None,
        input_tokens=spec.input_tokens,
        output_tokens=spec.max_output_tokens,
        num_requests=spec.num_requests,
        prompt_source=PromptSource.parse(spec.prompts).label,
        device="cuda" if ctx.hardware.accelerator_count else "cpu",
        method="serving-steady-state",
    )
    return RunRecord(
        run_id=ctx.run_id,
        status="failed",
        error=error,
        model=ctx.model,
        workload=workload,
        hardware=ctx.hardware,
        software=ctx.software,
        energy_source=ctx.energy_source,
        scope=ctx.scope,
        tags=ctx.tags,
        ended_at=utc_now(),
    )


def _utc(unix_s: float) -> Any:
    return datetime.fromtimestamp(unix_s, UTC)
