"""``mlenergy bench``: measure the inference energy of models over a batch-size sweep.

The workflow lives in :mod:`mlenergy.workloads.bench`; this module parses the options and
prints the table, whose headline is the whole request (:mod:`mlenergy.records.metrics`).
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from mlenergy.commands.bench_options import (
    BenchTarget,
    ServingBench,
    StaticBench,
    check_repeat_options,
)
from mlenergy.commands.bench_serving import bench_serving
from mlenergy.commands.options import FootprintOptions
from mlenergy.commands.typed import typed_command
from mlenergy.footprint import Footprint
from mlenergy.records import PhaseResult, RunRecord, interval_basis
from mlenergy.records.metrics import headline_phase
from mlenergy.workloads.bench import interval_text, run_bench, status_text
from mlenergy.workloads.bench_processes import run_bench_processes

HEADLINE_PHASE_NAME = "request"
"""The phase the headline is meant to come from (a :class:`mlenergy.records.Phase` value)."""


@typed_command
def bench(
    target: BenchTarget, static: StaticBench, serving: ServingBench, site: FootprintOptions
) -> None:
    """Measure prefill, decode and whole-request energy of models over batch sizes.

    With --endpoint or --launch: measure a serving engine under load instead, one record per
    concurrency level, energy over the steady-state window (docs/serve-benchmark.md).
    """
    footprint = site.footprint()
    check_repeat_options(serving, static)
    if serving.asked:
        bench_serving(target, serving, static.output_tokens)
        return
    spec, options = static.spec(target), static.options(target)
    store_dir = target.store_dir()
    emit = (lambda record: typer.echo(record.model_dump_json())) if target.json_out else None
    if static.processes > 1:
        n = static.processes
        records = run_bench_processes(
            target.model, spec, options, n, data_dir=store_dir, on_record=emit,
            on_run=lambda i, m, _: typer.echo(f"run {i} of {n} of {m}: done", err=True),
        )  # fmt: skip
    else:
        records = run_bench(target.model, spec, options, data_dir=store_dir, on_record=emit)
    console = Console(stderr=target.json_out)
    if not console.is_terminal:
        console = Console(stderr=target.json_out, width=160)
    console.print(summary_table(records))
    _print_generation(console, records)
    if footprint is not None:
        _print_footprint(console, records, footprint)
    if store_dir is not None:
        console.print(f"store: {store_dir}  ({len(records)} run(s) appended)")


def _print_generation(console: Console, records: list[RunRecord]) -> None:
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


def _print_footprint(console: Console, records: list[RunRecord], footprint: Footprint) -> None:
    """Carbon per 1k and cost per 1M tokens of each run's headline phase (derived, not stored)."""
    for r in records:
        head = headline_phase(r)
        if head is None or head.energy_per_token_j is None:
            continue
        figures = footprint.per_token(head.energy_per_token_j)
        shown = ", ".join(f"{k} {v:.4g}" for k, v in figures.items())
        only = "" if head.phase == HEADLINE_PHASE_NAME else f", {head.phase} only"
        where = f"{r.model.model_id} batch {r.workload.batch_size} ({r.energy_source}{only})"
        console.print(f"{where}: {shown}", markup=False, highlight=False)
    basis = footprint.basis()
    console.print(
        f"  derived with {basis}; records keep energy only", markup=False, highlight=False
    )


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


def _headline_text(phase: PhaseResult | None) -> str:
    """The headline energy per token (mJ), naming its phase when it is not the whole request."""
    if phase is None:
        return "-"
    text = _fmt(phase.energy_per_token_j, 1e3)
    return text if phase.phase == HEADLINE_PHASE_NAME else f"{text} ({phase.phase} only)"


def summary_table(records: list[RunRecord]) -> Table:
    """A rich table: one row per record, the headline energy per token (mJ) first.

    The headline is the whole-request phase (prefill and decode together, as ML.ENERGY's
    reference and the report show it), else decode where only decode was measured (said in
    the cell); its 95% interval follows (``!``: wider than ±20%, too noisy to compare on its
    own) with what it comes from (``within-run, 3 repeats`` or ``between-runs, 3 processes``,
    :func:`mlenergy.records.interval_basis`), then its throughput. Prefill and decode follow as
    phase-only figures. The status says ``host-bound`` where the host-bound rule marks the run
    (:mod:`mlenergy.measure.host_bound`).
    """
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
