"""``mlenergy bench``: measure the inference energy of models over a batch-size sweep.

The workflow lives in :mod:`mlenergy.workloads.bench`; this module parses the options and
prints the table, whose headline is the whole request (:mod:`mlenergy.records.metrics`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from mlenergy.commands.options import (
    CarbonIntensityOption,
    DataDirOption,
    PriceKwhOption,
    PueOption,
    RegionOption,
    footprint_from,
    resolve_data_dir,
)

if TYPE_CHECKING:
    from mlenergy.records import RunRecord

HEADLINE_PHASE_NAME = "request"
"""The phase the headline is meant to come from (a :class:`mlenergy.records.Phase` value)."""


def bench(
    model: Annotated[
        list[str],
        typer.Option(
            "--model",
            "-m",
            help="preset:<name>, a hub id, a model folder or a config.json (repeatable).",
        ),
    ],
    batch_sizes: Annotated[
        str, typer.Option("--batch-sizes", "-b", help="Comma-separated batch sizes.")
    ] = "1,4,16",
    input_tokens: Annotated[int, typer.Option(help="Prompt tokens per sequence.")] = 64,
    output_tokens: Annotated[
        int, typer.Option(help="Generated tokens per sequence (EOS ignored).")
    ] = 64,
    repeats: Annotated[int, typer.Option(help="Measured repeats per batch size.")] = 3,
    warmup: Annotated[int, typer.Option(help="Unmeasured warm-up runs per batch size.")] = 1,
    dtype: Annotated[str, typer.Option(help="float32, float16 or bfloat16.")] = "float32",
    device: Annotated[str, typer.Option(help="Torch device: cpu, cuda, cuda:1...")] = "cpu",
    prompts: Annotated[
        str,
        typer.Option(
            help="synthetic, a local .txt/.json/.jsonl/.parquet/.csv file, or hf:<dataset>[:split]."
        ),
    ] = "synthetic",
    cpu_tdp_w: Annotated[
        float | None,
        typer.Option(help="CPU full-load watts for the CPU power model (no counter)."),
    ] = None,
    gpu_indices: Annotated[
        str | None,
        typer.Option(
            help="GPUs to measure, e.g. 0,1 (none: no GPU); default: the GPUs the model "
            "occupies (serving: those NVML lists the server's processes on; a launched server "
            "is given exactly --gpu-indices)."
        ),
    ] = None,
    interleave: Annotated[
        bool,
        typer.Option(
            help="Measure repeats of every model and batch size in turn (A B A B); "
            "stores the records when the last round ends."
        ),
    ] = False,
    processes: Annotated[
        int,
        typer.Option(
            help="Repeat the bench in this many fresh processes, interleaved across models; "
            "each point's interval then comes from the spread between them (docs/measure.md)."
        ),
    ] = 1,
    generation: Annotated[
        str,
        typer.Option(
            help="Decode backend: auto (compiled-static-cache on CUDA, eager elsewhere), "
            "eager, or compiled-static-cache (static KV cache, torch.compile, CUDA graphs)."
        ),
    ] = "auto",
    experts_backend: Annotated[
        str,
        typer.Option(
            help="MoE experts backend: auto (CPU: grouped_mm; CUDA: measured), measure, "
            "eager, grouped_mm or batched_mm."
        ),
    ] = "auto",
    seed: Annotated[int, typer.Option(help="Seed of random weights and prompts.")] = 0,
    idle_s: Annotated[
        float,
        typer.Option(help="Seconds of idle power measured once, before the first model (0: skip)."),
    ] = 0.5,
    power_timeline: Annotated[
        bool, typer.Option(help="Record a downsampled power trace on each run.")
    ] = False,
    threads: Annotated[
        int | None, typer.Option(help="Torch CPU threads (default: torch's choice).")
    ] = None,
    task: Annotated[str | None, typer.Option(help="Workload label recorded on runs.")] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the records as JSON lines on stdout only.")
    ] = False,
    no_store: Annotated[
        bool, typer.Option("--no-store", help="Do not write the records to the store.")
    ] = False,
    data_dir: DataDirOption = None,
    carbon_intensity: CarbonIntensityOption = None,
    region: RegionOption = None,
    price_kwh: PriceKwhOption = None,
    pue: PueOption = None,
    endpoint: Annotated[
        str | None,
        typer.Option(
            help="Serving: the OpenAI base URL of a running server (e.g. "
            "http://127.0.0.1:8000/v1); measures it under load, steady-state window."
        ),
    ] = None,
    launch: Annotated[
        str | None,
        typer.Option(
            help="Serving: a command that starts the server, once per level, with {model}, "
            '{port} and {max_num_seqs} filled in (e.g. "vllm serve {model} --port {port} '
            '--max-num-seqs {max_num_seqs}").'
        ),
    ] = None,
    concurrency: Annotated[
        str, typer.Option(help="Serving: comma-separated concurrency levels (one record each).")
    ] = "8,64,256",
    num_requests: Annotated[
        int, typer.Option(help="Serving: requests per level (at least the level).")
    ] = 1024,
    request_rate: Annotated[
        str,
        typer.Option(help="Serving: 'inf' (all at once, capped by the level) or requests/s."),
    ] = "inf",
    burstiness: Annotated[
        float, typer.Option(help="Serving: gamma shape of arrival gaps (1.0: Poisson).")
    ] = 1.0,
    max_output_tokens: Annotated[
        int | None,
        typer.Option(help="Serving: max_tokens per request (default: --output-tokens)."),
    ] = None,
    ignore_eos: Annotated[
        bool, typer.Option("--ignore-eos", help="Serving: ask the server to ignore EOS.")
    ] = False,
    api: Annotated[str, typer.Option(help="Serving: 'chat' or 'completions'.")] = "chat",
    engine: Annotated[
        str | None,
        typer.Option(help="Serving: engine name and version when the server does not say it."),
    ] = None,
    server_pid: Annotated[
        int | None,
        typer.Option(
            help="Serving, attached: the server's process id, whose tree holds its GPUs (and "
            "its CPU, modelled, without counters); default: the process on the endpoint's port."
        ),
    ] = None,
    model_config: Annotated[
        str | None,
        typer.Option(help="Serving: a config.json, folder or hub id that describes --model."),
    ] = None,
    startup_timeout: Annotated[
        float, typer.Option(help="Serving: seconds a launched server may take to start.")
    ] = 600.0,
    request_timeout: Annotated[
        float,
        typer.Option(
            help="Serving: seconds to a request's first token, and at most between its tokens."
        ),
    ] = 600.0,
    runs: Annotated[
        int,
        typer.Option(
            help="Serving: measure each level this many times, each with a fresh launch (or "
            "attach), interleaved across levels; the interval comes from their spread."
        ),
    ] = 1,
    client_procs: Annotated[
        str,
        typer.Option(
            help="Serving: processes the client streams from; 'auto' adds them when one core "
            "would limit it."
        ),
    ] = "auto",
) -> None:
    """Measure prefill, decode and whole-request energy of models over batch sizes.

    With --endpoint or --launch: measure a serving engine under load instead, one record per
    concurrency level, energy over the steady-state window (docs/serve-benchmark.md).
    """
    footprint = footprint_from(carbon_intensity, region, price_kwh, pue)
    serving = endpoint is not None or launch is not None
    _check_repeat_options(serving, processes, runs)
    if serving:
        from mlenergy.commands.bench_serving import bench_serving

        bench_serving(
            models=model,
            endpoint=endpoint,
            launch=launch,
            concurrency=concurrency,
            num_requests=num_requests,
            request_rate=request_rate,
            burstiness=burstiness,
            prompts=prompts,
            input_tokens=input_tokens,
            max_output_tokens=max_output_tokens or output_tokens,
            ignore_eos=ignore_eos,
            api=api,
            engine=engine,
            server_pid=server_pid,
            gpu_indices=gpu_indices,
            model_config=model_config,
            cpu_tdp_w=cpu_tdp_w,
            seed=seed,
            idle_s=idle_s,
            task=task,
            startup_timeout_s=startup_timeout,
            request_timeout_s=request_timeout,
            runs=runs,
            client_procs=client_procs,
            json_out=json_out,
            store_dir=None if no_store else resolve_data_dir(data_dir),
        )
        return
    from rich.console import Console

    from mlenergy.workloads.bench import BenchOptions, run_bench
    from mlenergy.workloads.inference import InferenceSpec, parse_batch_sizes

    spec = InferenceSpec(
        batch_sizes=parse_batch_sizes(batch_sizes),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        repeats=repeats,
        warmup=warmup,
        prompts=prompts,
        seed=seed,
        dtype=dtype,
        device=device,
        idle_s=idle_s,
        task=task,
        generation=generation,
        experts_backend=experts_backend,
    )
    from mlenergy.measure.scope import parse_gpu_indices

    options = BenchOptions(
        cpu_tdp_w=cpu_tdp_w,
        threads=threads,
        power_timeline=power_timeline,
        gpu_indices=parse_gpu_indices(gpu_indices),
        interleave=interleave,
    )
    store_dir = None if no_store else resolve_data_dir(data_dir)
    emit = (lambda record: typer.echo(record.model_dump_json())) if json_out else None
    if processes > 1:
        from mlenergy.workloads.bench_processes import run_bench_processes

        records = run_bench_processes(
            model, spec, options, processes, data_dir=store_dir, on_record=emit,
            on_run=lambda i, m, _: typer.echo(f"run {i} of {processes} of {m}: done", err=True),
        )  # fmt: skip
    else:
        records = run_bench(model, spec, options, data_dir=store_dir, on_record=emit)
    console = Console(stderr=json_out)
    if not console.is_terminal:
        console = Console(stderr=json_out, width=160)
    console.print(summary_table(records))
    _print_generation(console, records)
    if footprint is not None:
        _print_footprint(console, records, footprint)
    if store_dir is not None:
        console.print(f"store: {store_dir}  ({len(records)} run(s) appended)")


def _check_repeat_options(serving: bool, processes: int, runs: int) -> None:
    """``--processes`` repeats static benches, ``--runs`` serving levels; refuse a mix-up."""
    from mlenergy.errors import UserError

    if serving and processes != 1:
        raise UserError(
            "--processes repeats a static bench; a serving bench repeats its levels with --runs",
            f"Pass --runs {processes} instead",
        )
    if not serving and runs != 1:
        raise UserError(
            "--runs repeats serving levels (--endpoint or --launch); a static bench repeats in "
            "fresh processes with --processes",
            f"Pass --processes {runs} instead",
        )
    if processes != 1:
        from mlenergy.workloads.bench_processes import check_processes

        check_processes(processes)


def _print_generation(console: Any, records: list) -> None:
    """How each run generated, and its warm-up and compilation time (outside every window)."""
    for r in records:
        g = r.generation
        if g is None:
            continue
        why = f" ({g.experts_backend_source})" if g.experts_backend_source else ""
        what = "warm-up and compilation" if g.compile_mode else "warm-up"
        warm = f"; {what} {g.warmup_s:.3g} s" if g.warmup_s is not None else ""
        console.print(
            f"{r.model.model_id} batch {r.workload.batch_size}: {g.label()}{why}{warm}, "
            "outside every window",
            markup=False,
            highlight=False,
        )


def _print_footprint(console: object, records: list, footprint: object) -> None:
    """Carbon per 1k and cost per 1M tokens of each run's headline phase (derived, not stored)."""
    from mlenergy.records.metrics import headline_phase

    for r in records:
        head = headline_phase(r)
        if head is None:
            continue
        figures = footprint.per_token(head.energy_per_token_j)  # type: ignore[attr-defined]
        shown = ", ".join(f"{k} {v:.4g}" for k, v in figures.items())
        only = "" if head.phase == HEADLINE_PHASE_NAME else f", {head.phase} only"
        where = f"{r.model.model_id} batch {r.workload.batch_size} ({r.energy_source}{only})"
        console.print(f"{where}: {shown}", markup=False, highlight=False)  # type: ignore[attr-defined]
    basis = footprint.basis()  # type: ignore[attr-defined]
    console.print(
        f"  derived with {basis}; records keep energy only", markup=False, highlight=False
    )  # type: ignore[attr-defined]


def _fmt(value: float | None, scale: float = 1.0, digits: int = 4) -> str:
    if value is None:
        return "-"
    return f"{value * scale:.{digits}g}"


HEADLINE_COLUMN = "headline mJ/tok"
"""The table's headline: energy per output token of the headline phase (whole request, as the
reference reports it; else decode, named in the cell), by
:func:`mlenergy.records.metrics.headline_phase`."""

_SUMMARY_COLUMNS = (
    ("model", "left"),
    ("batch", "right"),
    ("status", "left"),
    (HEADLINE_COLUMN, "right"),
    ("± 95%", "right"),
    ("interval", "left"),
    ("headline tok/s", "right"),
    ("prefill only mJ/tok", "right"),
    ("decode only mJ/tok", "right"),
    ("TTFT ms", "right"),
    ("ITL p50 ms", "right"),
    ("source", "left"),
)


def _headline_text(phase: Any) -> str:
    """The headline energy per token (mJ), naming its phase when it is not the whole request."""
    if phase is None:
        return "-"
    text = _fmt(phase.energy_per_token_j, 1e3)
    return text if phase.phase == HEADLINE_PHASE_NAME else f"{text} ({phase.phase} only)"


def summary_table(records: list[RunRecord]) -> Any:
    """A rich table: one row per record, the headline energy per token (mJ) first.

    The headline is the whole-request phase (prefill and decode together, as ML.ENERGY's
    reference and the report show it), else decode where only decode was measured (said in
    the cell); its 95% interval follows (``!``: wider than ±20%, too noisy to compare on its
    own) with what it comes from (``within-run, 3 repeats`` or ``between-runs, 3 processes``,
    :func:`mlenergy.records.interval_basis`), then its throughput. Prefill and decode follow as
    phase-only figures. The status says ``host-bound`` where the host-bound rule marks the run
    (:mod:`mlenergy.measure.host_bound`).
    """
    from rich.table import Table

    from mlenergy.records import interval_basis
    from mlenergy.records.metrics import headline_phase
    from mlenergy.workloads.bench import interval_text, status_text

    table = Table(
        title="mlenergy bench (energy per output token in millijoules; headline: the whole "
        "request, prefill and decode together)",
        caption="± 95%: interval of the headline figure; ! wider than ±20%. prefill only / "
        "decode only: one phase's energy per token, not the headline. interval: what the ± "
        "comes from, one run's repeats (within-run) or fresh processes (between-runs, "
        "--processes N), which also hold what changes from one process to the next. "
        "host-bound: the GPUs sat near idle most of the time (docs/measure.md).",
        show_lines=False,
    )
    for column, justify in _SUMMARY_COLUMNS:
        table.add_column(column, justify=justify, no_wrap=column in ("model", "interval"))  # type: ignore[arg-type]
    for r in records:
        pre, dec, req = r.phase("prefill"), r.phase("decode"), r.phase("request")
        head = headline_phase(r)
        basis = interval_basis(r)
        table.add_row(
            r.model.model_id,
            str(r.workload.batch_size),
            status_text(r),
            _headline_text(head),
            interval_text(head),
            basis.label() if basis is not None and interval_text(head) != "-" else "-",
            _fmt(head.throughput_tokens_per_s if head else None, digits=5),
            _fmt(pre.energy_per_token_j if pre else None, 1e3),
            _fmt(dec.energy_per_token_j if dec else None, 1e3),
            _fmt(req.ttft_s if req else None, 1e3),
            _fmt(req.itl_p50_s if req else None, 1e3),
            r.energy_source,
        )
    return table


def register(app: typer.Typer) -> None:
    """Add ``bench`` to the root app."""
    app.command("bench")(bench)
