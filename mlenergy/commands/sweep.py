"""``mlenergy sweep plan.yaml``: run a plan's grid of measured runs or estimates into the store.

The whole plan is checked before any run starts or the store is touched: a bad key or value,
an unknown model, GPUs on a machine with none (without ``--ray``) end with one ``error:`` line
naming the key and value, exit code 2, nothing written. Runs whose key is already stored are
always skipped, so ``--resume`` after a crash or Ctrl-C is the same command.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mlenergy.commands.options import DataDirOption, resolve_data_dir
from mlenergy.errors import UserError
from mlenergy.records.metrics import headline_phase
from mlenergy.store import RunStore
from mlenergy.sweep import LocalExecutor, check_plan, dry_run_lines, load_plan, run_sweep
from mlenergy.sweep.plan import Plan
from mlenergy.sweep.ray_executor import RayExecutor
from mlenergy.sweep.spec import KEY_TAG, RunSpec


def _open_store(data_dir: Path, dry_run: bool) -> RunStore:
    store = RunStore(data_dir)
    if not dry_run:
        store.ensure_writable()
    if store.results_dir.is_dir():
        store.check()
    return store


def sweep(
    plan_file: Annotated[Path, typer.Argument(help="The plan (YAML grid of runs).")],
    data_dir: DataDirOption = None,
    use_ray: Annotated[
        bool, typer.Option("--ray", help="Run each point as a Ray task (own worker process).")
    ] = False,
    address: Annotated[
        str | None,
        typer.Option(help="With --ray: join this cluster (auto or HOST:PORT); default: local."),
    ] = None,
    ray_cpus: Annotated[
        int, typer.Option(help="With --ray and no --address: CPUs of the local cluster.")
    ] = 2,
    resume: Annotated[
        bool,
        typer.Option(help="Skip runs already stored (always done; kept for clarity)."),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="List the runs and how many are done; run nothing.")
    ] = False,
    idle_s: Annotated[
        float, typer.Option(help="Seconds of idle power measured before each bench run.")
    ] = 0.5,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
) -> None:
    """Run the grid of a sweep plan, in-process or on Ray, skipping runs already stored."""
    _check_executor_options(use_ray, address, ray_cpus, idle_s)
    plan = load_plan(plan_file)
    runs = check_plan(plan, str(plan_file), use_ray=use_ray, dry_run=dry_run)
    store = _open_store(resolve_data_dir(data_dir), dry_run)
    if dry_run:
        _print_dry_run(plan, runs, store)
        return
    executor: LocalExecutor | RayExecutor = (
        RayExecutor(address, num_cpus=ray_cpus, idle_s=idle_s)
        if use_ray
        else LocalExecutor(idle_s=idle_s)
    )
    try:
        summary = run_sweep(runs, store, executor, progress=not quiet)
    except KeyboardInterrupt:
        typer.echo(
            f"interrupted: finished runs are stored; run `mlenergy sweep {plan_file} --resume` "
            "to do the rest",
            err=True,
        )
        raise
    finally:
        executor.close()
    for line in summary.errors:
        typer.echo(f"not ok: {line}", err=True)
    typer.echo(
        f"{plan.name}: {summary.planned} run(s): {summary.skipped} already stored, "
        f"{summary.ok} ok, {summary.failed} stored as failed, {summary.unstored} not stored "
        f"({executor.name} executor, store {store.data_dir})"
    )
    for line in _estimate_lines(runs, store) if plan.kind == "estimate" else []:
        typer.echo(line)
    if summary.unstored:
        raise typer.Exit(1)


def _check_executor_options(
    use_ray: bool, address: str | None, ray_cpus: int, idle_s: float
) -> None:
    """Refuse ``--address`` without ``--ray``, no CPUs, an idle time out of range."""
    if address is not None and not use_ray:
        raise UserError(f"--address {address!r} needs --ray", "Add --ray, or drop --address")
    if ray_cpus < 1:
        raise UserError(f"--ray-cpus {ray_cpus} must be at least 1", "Pass e.g. --ray-cpus 2")
    if not 0 <= idle_s <= 600:
        raise UserError(f"--idle-s {idle_s} is out of range", "Use 0 to 600 seconds")


def _print_dry_run(plan: Plan, runs: list[RunSpec], store: RunStore) -> None:
    """Each run of the plan and whether it is stored already; nothing runs."""
    lines, done = dry_run_lines(runs, store)
    for line in lines:
        typer.echo(line)
    typer.echo(f"{plan.name}: {len(lines)} run(s), {done} done, {len(lines) - done} to run")
    if plan.kind == "bench" and any(m.startswith("preset:") for m in plan.models):
        typer.echo(
            "note: a dry run checks presets by name; the sweep itself checks their "
            "context length before any run starts",
            err=True,
        )


def _estimate_lines(runs: list[RunSpec], store: RunStore) -> list[str]:
    """The plan's stored estimates (this sweep's and earlier ones), one aligned line each."""
    keys = {run.key for run in runs}
    if not store.results_dir.is_dir():
        return []
    records = [r for r in store.runs() if r.tags.get(KEY_TAG) in keys]
    if not records:
        return []
    header = ("model", "gpu", "batch", "in", "out", "J/token", "tokens/s", "W", "source")
    rows = []
    for r in records:
        phase = headline_phase(r) or (r.phases[0] if r.phases else None)
        rows.append(
            (
                r.model.model_id,
                r.hardware.accelerator_model or "-",
                str(r.workload.batch_size),
                str(r.workload.input_tokens),
                str(r.workload.output_tokens),
                _fmt(phase.energy_per_token_j if phase else None),
                _fmt(phase.throughput_tokens_per_s if phase else None),
                _fmt(phase.avg_power_w if phase else None),
                r.energy_source,
            )
        )
    rows.sort(key=lambda row: (row[0], row[1], int(row[2])))
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    ]


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def register(app: typer.Typer) -> None:
    """Add ``sweep`` to the root app."""
    app.command("sweep")(sweep)
