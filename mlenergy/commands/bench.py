"""``mlenergy bench``: measure the inference energy of models over a batch-size sweep.

The workflow lives in :mod:`mlenergy.workloads.bench`; this module parses the options.
"""

from __future__ import annotations

from typing import Annotated

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
            help="GPUs to measure, e.g. 0,1 (none: no GPU); default: the GPUs the model occupies."
        ),
    ] = None,
    interleave: Annotated[
        bool,
        typer.Option(
            help="Measure repeats of every model and batch size in turn (A B A B); "
            "stores the records when the last round ends."
        ),
    ] = False,
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
) -> None:
    """Measure prefill, decode and whole-request energy of models over batch sizes."""
    footprint = footprint_from(carbon_intensity, region, price_kwh, pue)
    from rich.console import Console

    from mlenergy.workloads.bench import BenchOptions, run_bench, summary_table
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
    records = run_bench(model, spec, options, data_dir=store_dir, on_record=emit)
    console = Console(stderr=json_out)
    if not console.is_terminal:
        console = Console(stderr=json_out, width=160)
    console.print(summary_table(records))
    if footprint is not None:
        _print_footprint(console, records, footprint)
    if store_dir is not None:
        console.print(f"store: {store_dir}  ({len(records)} run(s) appended)")


def _print_footprint(console: object, records: list, footprint: object) -> None:
    """Carbon per 1k and cost per 1M whole-request tokens of each run (derived, not stored)."""
    for r in records:
        req = r.phase("request")
        if req is None or req.energy_per_token_j is None:
            continue
        figures = footprint.per_token(req.energy_per_token_j)  # type: ignore[attr-defined]
        shown = ", ".join(f"{k} {v:.4g}" for k, v in figures.items())
        where = f"{r.model.model_id} batch {r.workload.batch_size} ({r.energy_source})"
        console.print(f"{where}: {shown}", markup=False, highlight=False)  # type: ignore[attr-defined]
    basis = footprint.basis()  # type: ignore[attr-defined]
    console.print(
        f"  derived with {basis}; records keep energy only", markup=False, highlight=False
    )  # type: ignore[attr-defined]


def register(app: typer.Typer) -> None:
    """Add ``bench`` to the root app."""
    app.command("bench")(bench)
