"""Measure a serving engine level by level; store one record per level as it finishes.

:func:`run_serving_bench` is what ``mlenergy bench --endpoint/--launch`` calls (and notebook 06,
and a sweep's ``kind: serve`` point). For each level it attaches to the server or launches one
(:mod:`~.engine`), checks the model and the ignore-EOS field with one short request, measures the
idle power, sends the load (:mod:`~.loadgen`) with Zeus windows opened and closed live at the
steady state's edges, and builds the record (:mod:`~.record`). Every input is checked before
anything runs or the store is touched. A level that fails (the server answers errors or dies)
raises :class:`ServingLevelFailed`: the levels before it are stored already, nothing is
half-written, and a launched server is stopped whatever happens.
"""

from __future__ import annotations

import asyncio
import functools
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from mlenergy.errors import UserError
from mlenergy.measure.counter_period import MIN_PERIODS
from mlenergy.measure.host_bound import with_host_bound
from mlenergy.measure.provenance import collect_hardware, collect_software
from mlenergy.records import IdleBaseline, new_run_id
from mlenergy.store.preflight import open_store_for_append
from mlenergy.workloads.serving.arrivals import arrival_offsets_s
from mlenergy.workloads.serving.client import (
    IGNORE_EOS_BODIES,
    RequestOptions,
    http_session,
    stream_request,
)
from mlenergy.workloads.serving.engine import (
    EngineInfo,
    check_model_served,
    detect_engine,
    engine_of_command,
    engine_of_process,
    launched_server,
    server_root,
)
from mlenergy.workloads.serving.loadgen import LoadFailed, generate_load
from mlenergy.workloads.serving.power import ServingPower, WindowEnergy
from mlenergy.workloads.serving.prompts import build_prompts
from mlenergy.workloads.serving.record import (
    LevelContext,
    LevelMeasurement,
    build_record,
    failed_record,
)
from mlenergy.workloads.serving.served_model import describe_served_model
from mlenergy.workloads.serving.server_gpus import listening_pid, server_gpus, visible_devices_for
from mlenergy.workloads.serving.server_info import read_metrics_async
from mlenergy.workloads.serving.signals import interrupted, signals_as_interrupt
from mlenergy.workloads.serving.spec import ServingSpec
from mlenergy.workloads.serving.steady_state import SteadyStateTracker, Window
from mlenergy.workloads.serving.timing import RequestTiming

if TYPE_CHECKING:
    from mlenergy.records import ModelInfo, RunRecord
    from mlenergy.store import RunStore

LOG_FOLDER = "server-logs"
"""Folder of the data directory that keeps each launched server's log, named by run id."""


class ServingLevelFailed(UserError):
    """A level could not be measured; the levels before it are stored.

    Attributes:
        record: The failed point (status ``failed``), for a sweep to keep.
        stored_ids: Run ids stored before the failure.
    """

    def __init__(self, problem: str, record: RunRecord, stored_ids: list[str]) -> None:
        kept = (
            f"; {len(stored_ids)} finished level(s) stored ({', '.join(stored_ids)})"
            if stored_ids
            else "; no level had finished"
        )
        super().__init__(problem + kept, "See the server's log; fix it and run the level again")
        self.record = record
        self.stored_ids = stored_ids


def run_async(factory: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """Run a coroutine to completion, also from a thread that has a running loop (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(factory())
        except BaseException as err:  # re-raised in the caller's thread
            box["error"] = err

    thread = threading.Thread(target=target, name="mlenergy-serving-load")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


async def _probe(options: RequestOptions) -> RequestTiming:
    async with http_session(2) as session:
        return await stream_request(
            session, options, "energy is power over time", RequestTiming(0, 0.0)
        )


def negotiate_ignore_eos(
    base: RequestOptions, ignore_eos: bool, engine: str | None
) -> tuple[dict[str, Any], str | None]:
    """Send one short request; find the field this server takes to ignore end-of-sequence.

    Returns:
        ``(extra body, how)``; ``how`` is ``None`` when not asked or not supported (the record
        then counts the outputs that ended early).

    Raises:
        UserError: The server answers the plain request with an error.
    """
    probe = replace(base, max_output_tokens=2)
    if ignore_eos:
        order = list(IGNORE_EOS_BODIES)
        if engine and engine.startswith("transformers"):
            order.reverse()
        for how in order:
            result = run_async(
                functools.partial(_probe, replace(probe, extra_body=IGNORE_EOS_BODIES[how]))
            )
            if result.ok:
                return IGNORE_EOS_BODIES[how], how
            if not (result.error or "").startswith(("HTTP 400", "HTTP 422")):
                break
    result = run_async(lambda: _probe(probe))
    if not result.ok:
        raise UserError(
            f"the server at {base.endpoint} failed a test request for model {base.model!r}: "
            f"{result.error}",
            "Check --model (exactly as the server lists it), --api and the server's log",
        )
    return {}, None


async def _scrape_loop(
    endpoint: str, out: list[tuple[float, dict[str, float]]], stop: asyncio.Event
) -> None:
    url = f"{server_root(endpoint)}/metrics"
    dropped: list[str] = []
    async with httpx.AsyncClient(timeout=2.0, trust_env=False) as client:
        while not stop.is_set():
            values = await read_metrics_async(client, url, dropped)
            if values is not None:
                out.append((time.time(), values))
            try:
                await asyncio.wait_for(stop.wait(), timeout=1.0)
            except TimeoutError:
                continue
    if dropped:
        warnings.warn(
            f"{url} sent {len(dropped)} value(s) that are not finite or out of range "
            f"(first: {dropped[0]}); they were left out of the engine's metrics",
            RuntimeWarning,
            stacklevel=1,
        )


def _measure_load(
    spec: ServingSpec,
    level: int,
    options: RequestOptions,
    prompts: list[str],
    power: ServingPower,
    scrape: bool,
) -> LevelMeasurement:
    windows: dict[str, WindowEnergy] = {}
    tracker = SteadyStateTracker(
        level,
        on_open=lambda t: power.begin("steady_state"),
        on_close=lambda t: windows.__setitem__("steady_state", power.end("steady_state")),
    )
    offsets = arrival_offsets_s(spec.num_requests, spec.request_rate, spec.burstiness, spec.seed)
    scrapes: list[tuple[float, dict[str, float]]] = []

    async def go() -> Any:
        stop = asyncio.Event()
        scraper = (
            asyncio.create_task(_scrape_loop(options.endpoint, scrapes, stop)) if scrape else None
        )
        try:
            return await generate_load(
                options, prompts, offsets, level, tracker, client_procs=spec.client_procs
            )
        finally:
            stop.set()
            if scraper is not None:
                await scraper

    power.begin("run")
    try:
        load = run_async(go)
    except BaseException:
        power.cancel("run")
        power.cancel("steady_state")
        raise
    run = power.end("run")
    if "steady_state" not in windows:
        power.cancel("steady_state")
        raise LoadFailed(
            f"the server never ran {level} requests at once (fewer were outstanding when the "
            "first ones got their first token): no steady state",
            load.timings,
        )
    steady = windows["steady_state"]
    period = power.counter_period_s
    if period > 0 and steady.duration_s < MIN_PERIODS * period:
        raise LoadFailed(
            f"the steady-state window lasted {steady.duration_s:.3g} s, "
            f"{steady.duration_s / period:.1f} periods of the energy counter "
            f"({period * 1e3:.3g} ms each); at least {MIN_PERIODS} are needed for its energy "
            "to resolve: run more requests (--num-requests)",
            load.timings,
        )
    window = Window(steady.start_s, steady.start_s + steady.duration_s)
    return LevelMeasurement(
        timings=load.timings,
        start_s=load.start_s,
        end_s=load.end_s,
        window=window,
        window_energy_j=steady.energy_j,
        window_by_device_j=steady.by_device_j,
        run_energy_j=run.energy_j,
        run_duration_s=run.duration_s,
        samples=power.samples(run.start_s),
        scrapes=scrapes,
        counter_period_s=period,
    )


def _idle(power: ServingPower, seconds: float) -> IdleBaseline | None:
    if seconds <= 0:
        return None
    power.begin("idle")
    time.sleep(seconds)
    w = power.end("idle")
    avg = w.energy_j / w.duration_s if w.energy_j is not None and w.duration_s > 0 else None
    return IdleBaseline(avg_power_w=avg, duration_s=w.duration_s, energy_source=power.energy_source)


def _context(
    spec: ServingSpec,
    level: int,
    run_id: str,
    model: ModelInfo,
    engine: EngineInfo,
    power: ServingPower,
    launched: bool,
    log_path: Path | None,
) -> LevelContext:
    hardware = collect_hardware(power.meter)
    if power.meter is None:
        hardware = hardware.model_copy(update={"cpu_tdp_w": power.model.tdp_w})
    software = collect_software().model_copy(update={"engine": engine.name})
    tags = {"endpoint": spec.endpoint or "launched"}
    if log_path is not None:
        tags["server_log"] = str(log_path)
    return LevelContext(
        spec=spec,
        level=level,
        run_id=run_id,
        model=model,
        engine=engine.name,
        engine_source=engine.source,
        launched=launched,
        sets_server_cap=launched and "{max_num_seqs}" in (spec.launch or ""),
        ignore_eos_via=None,
        hardware=hardware,
        software=software,
        energy_source=power.energy_source,
        scope=power.scope,
        scope_note=power.note,
        tags=tags,
    )


def measure_level(
    spec: ServingSpec,
    level: int,
    endpoint: str,
    model: ModelInfo,
    *,
    run_id: str,
    server_pid: int | None,
    launched: bool,
    log_path: Path | None = None,
    engine_hint: str | None = None,
) -> RunRecord:
    """Measure one level against a server that is up; return its record (failed or not).

    Raises:
        UserError: The server cannot be reached, does not serve the model, or fails the test
            request (before anything is measured).
    """
    models = check_model_served(endpoint, spec.model)
    engine = detect_engine(endpoint, models, spec.engine)
    if engine.name is None and engine_hint:
        engine = EngineInfo(engine_hint, "--launch", engine.has_metrics)
    label = "launched server" if launched else "--server-pid"
    if server_pid is None:
        server_pid = listening_pid(endpoint)  # attached without --server-pid
        label = "listening server"
    if engine.name is None:  # the server said nothing: its process's command line may
        found = engine_of_process(server_pid)
        if found is not None:
            engine = EngineInfo(found, f"{label} command line", engine.has_metrics)
    options = RequestOptions(
        endpoint,
        spec.model,
        spec.api,
        spec.max_output_tokens,
        request_timeout_s=spec.request_timeout_s,
    )
    extra, via = negotiate_ignore_eos(options, spec.ignore_eos, engine.name)
    options = replace(options, extra_body=extra)
    gpus = server_gpus(spec.gpu_indices, server_pid, label)
    power = ServingPower(
        gpus.gpu_indices, spec.cpu_tdp_w, server_pid, label, spec.power_period_s, gpus.how
    )
    try:
        ctx = _context(spec, level, run_id, model, engine, power, launched, log_path)
        ctx.ignore_eos_via = via
        ctx.idle = _idle(power, spec.idle_s)
        prompts = build_prompts(spec.prompts, spec.num_requests, spec.input_tokens, spec.seed)
        try:
            measured = _measure_load(spec, level, options, prompts, power, engine.has_metrics)
        except LoadFailed as err:
            return failed_record(ctx, f"level {level}: {err}")
        return with_host_bound(build_record(ctx, measured))
    finally:
        power.close()


def run_serving_bench(
    spec: ServingSpec,
    *,
    data_dir: Path | None = None,
    on_record: Callable[[RunRecord], None] | None = None,
    keep_going: bool = False,
    log_dir: Path | None = None,
) -> list[RunRecord]:
    """Measure every level of ``spec``; append each record to the store as it finishes.

    Args:
        spec: The benchmark.
        data_dir: Store folder (``None``: store nothing; launched servers' logs then go to a
            temporary folder that is kept).
        on_record: Called with each record as soon as it is stored.
        keep_going: Store a failed level as a failed point and go on (sweeps); otherwise the
            first failed level raises after the finished ones are stored.
        log_dir: Folder for launched servers' logs (default: ``data_dir/server-logs``).

    Returns:
        One record per level, in order.

    Raises:
        UserError: Bad input, before anything runs or the store is touched.
        ServingLevelFailed: A level failed (``keep_going`` false); finished levels are stored.
    """
    spec.validate()
    served = None
    if spec.endpoint is not None:  # unreachable or wrong model: fail first
        served = check_model_served(spec.endpoint, spec.model)
    model = describe_served_model(spec, served)
    build_prompts(spec.prompts, 1, spec.input_tokens, spec.seed)  # unreadable prompts fail here
    store: RunStore | None = open_store_for_append(data_dir) if data_dir is not None else None
    if spec.launch is not None and log_dir is None:
        log_dir = server_log_dir(data_dir)
    records: list[RunRecord] = []
    stored: list[str] = []
    with signals_as_interrupt() as caught:  # SIGTERM, SIGHUP: as Ctrl-C
        try:
            for level in spec.levels:
                record = _one_level(spec, level, model, log_dir)
                if record.status == "failed" and not keep_going:
                    raise ServingLevelFailed(record.error or "level failed", record, stored)
                if store is not None:
                    store.append([record])
                    stored.append(record.run_id)
                records.append(record)
                if on_record is not None:
                    on_record(record)
        except KeyboardInterrupt as exc:
            kept = f"{len(stored)} finished level(s) stored" if stored else "no level had finished"
            raise interrupted(f"{kept}; any launched server was stopped", caught) from exc
    return records


def _one_level(spec: ServingSpec, level: int, model: ModelInfo, log_dir: Path | None) -> RunRecord:
    """Measure one level, launching its server first in launch mode."""
    run_id = new_run_id()
    if spec.launch is None:
        assert spec.endpoint is not None
        return measure_level(
            spec,
            level,
            spec.endpoint,
            model,
            run_id=run_id,
            server_pid=spec.server_pid,
            launched=False,
        )
    assert log_dir is not None
    log_path = log_dir / f"{run_id}.log"
    env = (
        {"CUDA_VISIBLE_DEVICES": visible_devices_for(spec.gpu_indices)}
        if spec.gpu_indices
        else None
    )
    with launched_server(
        spec.launch,
        spec.model,
        level,
        log_path,
        startup_timeout_s=spec.startup_timeout_s,
        env=env,
    ) as server:
        record = measure_level(
            spec,
            level,
            server.endpoint,
            model,
            run_id=run_id,
            server_pid=server.pid,
            launched=True,
            log_path=log_path,
            engine_hint=engine_of_command(server.argv),
        )
        if record.status == "failed" and not server.alive():
            error = f"{record.error} (the server exited; see {log_path})"
            record = record.model_copy(update={"error": error})
    return record


def server_log_dir(data_dir: Path | None) -> Path:
    """The folder of launched servers' logs: ``data_dir/server-logs``, or a kept temp folder."""
    if data_dir is None:
        return Path(tempfile.mkdtemp(prefix="mlenergy-server-logs-"))
    folder = Path(data_dir) / LOG_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    return folder
