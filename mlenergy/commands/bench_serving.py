"""``mlenergy bench --endpoint URL`` / ``--launch CMD``: the serving side of ``bench``.

:func:`serving_spec` turns the options (:mod:`mlenergy.commands.bench_options`) into a
:class:`~mlenergy.workloads.serving.spec.ServingSpec`; :func:`bench_serving` runs it with
:func:`~mlenergy.workloads.serving.runs.run_serving_runs`, and
:func:`~mlenergy.workloads.serving.display.serving_table` prints one row per level.
"""

from __future__ import annotations

import math
from typing import Literal, cast

import typer
from rich.console import Console

from mlenergy.commands.bench_options import BenchTarget, ServingBench
from mlenergy.errors import UserError
from mlenergy.measure.scope import parse_gpu_indices
from mlenergy.records import RunRecord
from mlenergy.workloads.serving.arrivals import parse_request_rate
from mlenergy.workloads.serving.display import serving_table
from mlenergy.workloads.serving.runs import check_runs, run_serving_runs
from mlenergy.workloads.serving.spec import ServingSpec, parse_levels

MAX_TIMEOUT_S = 86_400.0
"""Longest ``--request-timeout`` / ``--startup-timeout`` taken (a day), in seconds."""
MAX_CLIENT_PROCS = 64
"""Most client processes ``--client-procs`` takes."""


def _seconds(name: str, value: float, *, low: float, high: float, zero_ok: bool = False) -> None:
    ok = math.isfinite(value) and (low <= value if zero_ok else low < value) and value <= high
    if not ok:
        bound = f"from {low:g}" if zero_ok else f"above {low:g}"
        raise UserError(
            f"{name} {value} is not a number of seconds {bound} to {high:g}",
            f"Pass e.g. {name} 600" if "timeout" in name else f"Pass e.g. {name} 1",
        )


def parse_client_procs(text: str) -> int | None:
    """Parse ``--client-procs``: ``auto`` (``None``) or a number of processes.

    Raises:
        UserError: Neither ``auto`` nor an integer from 1 to :data:`MAX_CLIENT_PROCS`.
    """
    raw = str(text).strip().lower()
    if raw == "auto":
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_CLIENT_PROCS:
        raise UserError(
            f"--client-procs {text!r} is not 'auto' or a number of processes from 1 to "
            f"{MAX_CLIENT_PROCS}",
            "Pass --client-procs auto (the default) or e.g. --client-procs 4",
        )
    return value


def check_serving_numbers(
    *,
    num_requests: int,
    input_tokens: int,
    max_output_tokens: int,
    burstiness: float,
    idle_s: float,
    seed: int,
    startup_timeout_s: float,
    request_timeout_s: float,
    cpu_tdp_w: float | None,
    server_pid: int | None,
) -> None:
    """Check every numeric option of a serving benchmark before anything runs.

    Raises:
        UserError: The first bad option, named with its value (NaN, infinite, zero or
            negative where a positive number is needed, out of range).
    """
    for name, value in (
        ("--num-requests", num_requests),
        ("--input-tokens", input_tokens),
        ("--max-output-tokens", max_output_tokens),
    ):
        if value < 1:
            raise UserError(f"{name} {value} must be at least 1", f"Pass e.g. {name} 128")
    if seed < 0:
        raise UserError(f"--seed {seed} must be 0 or more", "Pass e.g. --seed 0")
    if server_pid is not None and server_pid < 1:
        raise UserError(f"--server-pid {server_pid} is not a process id", "Pass the server's pid")
    if not (math.isfinite(burstiness) and burstiness > 0):
        raise UserError(
            f"--burstiness {burstiness} must be a positive number",
            "Pass 1.0 for Poisson arrivals, below 1 for bursts, above 1 for regular gaps",
        )
    _seconds("--idle-s", idle_s, low=0.0, high=600.0, zero_ok=True)
    _seconds("--request-timeout", request_timeout_s, low=0.0, high=MAX_TIMEOUT_S)
    _seconds("--startup-timeout", startup_timeout_s, low=0.0, high=MAX_TIMEOUT_S)
    if cpu_tdp_w is not None and not (math.isfinite(cpu_tdp_w) and 0 < cpu_tdp_w < 1e5):
        raise UserError(
            f"--cpu-tdp-w {cpu_tdp_w} is not a power in watts (above 0, below 100000)",
            "Pass the CPU's full-load watts, e.g. --cpu-tdp-w 250",
        )


def serving_spec(target: BenchTarget, serving: ServingBench, output_tokens: int) -> ServingSpec:
    """The serving benchmark of ``bench``'s options, every number checked first.

    Args:
        target: The shared options (one model: the name the server serves).
        serving: The serving options.
        output_tokens: ``--output-tokens``, each request's ``max_tokens`` unless
            ``--max-output-tokens`` is given.

    Raises:
        UserError: The first bad option.
    """
    if len(target.model) != 1:
        raise UserError(
            f"a serving benchmark measures one model, {len(target.model)} were given",
            "Pass --model once, exactly as the server names it",
        )
    check_runs(serving.runs)
    max_output_tokens = serving.max_output_tokens or output_tokens
    check_serving_numbers(
        num_requests=serving.num_requests,
        input_tokens=target.input_tokens,
        max_output_tokens=max_output_tokens,
        burstiness=serving.burstiness,
        idle_s=target.idle_s,
        seed=target.seed,
        startup_timeout_s=serving.startup_timeout,
        request_timeout_s=serving.request_timeout,
        cpu_tdp_w=target.cpu_tdp_w,
        server_pid=serving.server_pid,
    )
    procs = parse_client_procs(serving.client_procs)
    return ServingSpec(
        model=target.model[0],
        levels=parse_levels(serving.concurrency),
        num_requests=serving.num_requests,
        endpoint=serving.endpoint,
        launch=serving.launch,
        request_rate=parse_request_rate(serving.request_rate),
        burstiness=serving.burstiness,
        prompts=target.prompts,
        input_tokens=target.input_tokens,
        max_output_tokens=max_output_tokens,
        ignore_eos=serving.ignore_eos,
        api=cast(Literal["chat", "completions"], serving.api),  # the spec refuses another
        seed=target.seed,
        task=target.task,
        engine=serving.engine,
        server_pid=serving.server_pid,
        gpu_indices=parse_gpu_indices(target.gpu_indices),
        cpu_tdp_w=target.cpu_tdp_w,
        model_config=serving.model_config,
        idle_s=target.idle_s,
        startup_timeout_s=serving.startup_timeout,
        request_timeout_s=serving.request_timeout,
        client_procs=procs,
    )


def bench_serving(target: BenchTarget, serving: ServingBench, output_tokens: int) -> None:
    """Run the serving benchmark of ``bench``'s options and print a line per level, a table."""
    spec = serving_spec(target, serving, output_tokens)
    store_dir = target.store_dir()
    console = Console(stderr=True, width=160)
    shown: list[RunRecord] = []

    def emit(record: RunRecord) -> None:
        shown.append(record)
        if target.json_out:
            typer.echo(record.model_dump_json())
        else:
            console.print(f"level {record.workload.batch_size}: {_line(record)}")

    def each_run(round_no: int, record: RunRecord) -> None:
        level = record.workload.batch_size
        console.print(f"run {round_no} of {serving.runs}, level {level}: {_line(record)}")

    run_serving_runs(spec, serving.runs, data_dir=store_dir, on_record=emit, on_run=each_run)
    Console(stderr=target.json_out, width=160).print(serving_table(shown))
    if store_dir is not None:
        console.print(f"store: {store_dir}  ({len(shown)} serving run(s) appended)")


def _line(record: RunRecord) -> str:
    phase = record.phase("request")
    if record.status != "ok" or phase is None:
        return f"failed: {record.error}"
    ept = phase.energy_per_token_j
    line = (
        f"{ept * 1e3:.4g} mJ/token over a {phase.duration_s:.3g} s steady state "
        f"({record.energy_source})"
        if ept is not None
        else "no energy figure"
    )
    s = record.serving
    if s is not None and s.level_above_server_cap:
        batch = record.workload.avg_batch_size
        line += (
            f"; level {record.workload.batch_size} is above the server's cap ({s.server_cap} "
            f"running at most, {s.server_cap_source}): the rest waited in its queue, its batch "
            f"was {batch:.3g}"
            if batch is not None
            else ""
        )
    return line
