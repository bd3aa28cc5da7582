"""``mlenergy bench``: measure the inference energy of models over a batch-size sweep.

Every input is checked before anything runs or the store is touched: bad batch sizes or token
counts, unknown presets, missing or malformed config files, hub ids that cannot be resolved,
an unwritable data directory or a damaged store file each end with one ``error:`` line and
exit code 2.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mlenergy.commands.options import DataDirOption, resolve_data_dir
from mlenergy.errors import StoreError, UserError

if TYPE_CHECKING:
    from mlenergy.records import RunRecord


def _check_writable(data_dir: Path) -> None:
    """Fail early if the store folder cannot be created or written (creates nothing)."""
    probe = data_dir
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise StoreError(
            f"data directory {data_dir} cannot be created: {probe} is a file",
            "Pass --data-dir pointing to a folder you can write (or set MLENERGY_DATA_DIR)",
        )
    target = data_dir / "results" if (data_dir / "results").is_dir() else probe
    if not os.access(target, os.W_OK | os.X_OK):
        raise StoreError(
            f"data directory {data_dir} is not writable",
            "Pass --data-dir pointing to a folder you can write (or fix its permissions)",
        )


def open_store(data_dir: Path) -> Any:
    """Open the run store and check it is readable and writable before any run.

    Raises:
        StoreError: If the folder is unusable or a store file is damaged.
    """
    from mlenergy.store import RunStore

    store = RunStore(data_dir)
    _check_writable(data_dir)
    store.ensure_writable()  # really creates a temp file: root passes os.access checks
    if store.results_dir.is_dir():
        store.check()
    return store


def _fmt(value: float | None, scale: float = 1.0, digits: int = 4) -> str:
    if value is None:
        return "-"
    return f"{value * scale:.{digits}g}"


def summary_table(records: list[RunRecord]) -> Any:
    """A rich table: one row per record with energy per token and throughput."""
    from rich.table import Table

    table = Table(title="mlenergy bench (energy per token in millijoules)", show_lines=False)
    for column, justify in (
        ("model", "left"),
        ("batch", "right"),
        ("status", "left"),
        ("prefill mJ/tok", "right"),
        ("decode mJ/tok", "right"),
        ("request mJ/tok", "right"),
        ("decode tok/s", "right"),
        ("TTFT ms", "right"),
        ("ITL p50 ms", "right"),
        ("source", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for r in records:
        pre, dec, req = r.phase("prefill"), r.phase("decode"), r.phase("request")
        table.add_row(
            r.model.model_id,
            str(r.workload.batch_size),
            "ok" if r.status == "ok" else f"failed: {(r.error or '')[:40]}",
            _fmt(pre.energy_per_token_j if pre else None, 1e3),
            _fmt(dec.energy_per_token_j if dec else None, 1e3),
            _fmt(req.energy_per_token_j if req else None, 1e3),
            _fmt(dec.throughput_tokens_per_s if dec else None, digits=5),
            _fmt(req.ttft_s if req else None, 1e3),
            _fmt(req.itl_p50_s if req else None, 1e3),
            r.energy_source,
        )
    return table


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
) -> None:
    """Measure prefill, decode and whole-request energy of models over batch sizes."""
    from rich.console import Console

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
    ).validate()
    if cpu_tdp_w is not None and not cpu_tdp_w > 0:
        raise UserError(f"--cpu-tdp-w {cpu_tdp_w} must be positive", "Pass e.g. --cpu-tdp-w 65")
    if threads is not None and threads < 1:
        raise UserError(f"--threads {threads} must be at least 1", "Pass e.g. --threads 1")
    records = _run(
        model,
        spec,
        cpu_tdp_w,
        threads,
        json_out,
        None if no_store else resolve_data_dir(data_dir),
        power_timeline,
    )
    console = Console(stderr=json_out)
    if not console.is_terminal:
        console = Console(stderr=json_out, width=160)
    console.print(summary_table(records))
    if not no_store:
        console.print(f"store: {resolve_data_dir(data_dir)}  ({len(records)} run(s) appended)")


def _run(
    models: list[str],
    spec: Any,
    cpu_tdp_w: float | None,
    threads: int | None,
    json_out: bool,
    data_dir: Path | None,
    power_timeline: bool = False,
) -> list[RunRecord]:
    """Validate every source, open the store, then run each model's sweep."""
    from mlenergy.models.loading import (
        canonical_dtype,
        check_buildable,
        check_device,
        resolve_source,
    )
    from mlenergy.workloads.inference import check_context_length
    from mlenergy.workloads.prompts import PromptSource, load_texts

    if not models:
        raise UserError("no --model given", "Pass e.g. --model preset:tiny-dense")
    canonical_dtype(spec.dtype)
    check_device(spec.device)
    prompt_source = PromptSource.parse(spec.prompts)
    # The store is probed before any config is read or model built: an unwritable
    # --data-dir must not cost a whole measurement.
    store = open_store(data_dir) if data_dir is not None else None
    resolved = [resolve_source(m) for m in dict.fromkeys(models)]
    for source in resolved:
        check_context_length(source.config, spec, source.model_id)
        if not source.pretrained:
            check_buildable(source.config, spec.dtype, source.model_id)
    if prompt_source.kind != "synthetic":
        load_texts(prompt_source, limit=1)  # unreadable or text-less prompts fail here

    import torch

    from mlenergy.measure import EnergyMeter
    from mlenergy.models import load_model
    from mlenergy.workloads.inference import run_inference_sweep

    if threads is not None:
        torch.set_num_threads(threads)

    def emit(record: RunRecord) -> None:
        if json_out:
            typer.echo(record.model_dump_json())

    records: list[RunRecord] = []
    meter = EnergyMeter(cpu_tdp_w=cpu_tdp_w, power_timeline=power_timeline)
    try:
        for source in resolved:
            loaded = load_model(source, spec.dtype, spec.device, spec.seed)
            records += run_inference_sweep(
                loaded, spec, meter, store=store, progress=True, on_record=emit, reuse_idle=True
            )
            del loaded
    finally:
        close = getattr(meter, "close", None)
        if callable(close):
            close()
    return records


def register(app: typer.Typer) -> None:
    """Add ``bench`` to the root app."""
    app.command("bench")(bench)
