"""``mlenergy estimate``: predict energy, throughput and power before running anything.

``mlenergy estimate --model M --gpu G --batch-size B --output-tokens O`` prints one estimate;
``--sweep axis=values ...`` a what-if table (and ``--plot`` a figure); ``--batch in.csv --out
out.csv`` many at once; ``--train-seq-len`` one training step. The request's options are the
fields of :class:`~mlenergy.estimate.request_types.EstimateRequest`; ``estimate calibrate``
refits the coefficients, ``estimate validate`` reports grouped cross-validated error.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from mlenergy import strict_json
from mlenergy.commands import estimate_fit
from mlenergy.commands.estimate_report import (
    format_estimate,
    format_table,
    format_training,
    plot_sweep,
    sweep_table,
)
from mlenergy.commands.estimate_sweep import parse_sweep_axis
from mlenergy.commands.options import DataDirOption, FootprintOptions, resolve_data_dir
from mlenergy.commands.typed import Given, typed_command
from mlenergy.errors import UserError
from mlenergy.estimate.api import Estimate, estimate, sweep
from mlenergy.estimate.batch import estimate_csv, row_estimates
from mlenergy.estimate.coefficients import Coefficients
from mlenergy.estimate.engines import CURRENT_ENGINE, PROFILES
from mlenergy.estimate.request_types import EstimateRequest, GpuSettings, ParallelLayout
from mlenergy.estimate.to_record import to_run_record
from mlenergy.estimate.training import estimate_training, format_pipeline
from mlenergy.footprint import PER_TOKEN_COLUMNS, Footprint
from mlenergy.store import RunStore


class _SweepGroup(TyperGroup):
    """Lets ``--sweep a=1,2 b=3:9:3`` take several axes after one flag."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        out: list[str] = []
        state = 0  # 0: normal, 1: expecting a --sweep value, 2: just after a sweep value
        for arg in args:
            if state == 1:
                out.append(arg)
                state = 2
            elif arg == "--sweep":
                out.append(arg)
                state = 1
            elif arg.startswith("--sweep="):
                out.append(arg)
                state = 2
            elif state == 2 and "=" in arg and not arg.startswith("-"):
                out += ["--sweep", arg]
            else:
                out.append(arg)
                state = 0
        return super().parse_args(ctx, out)


app = typer.Typer(
    name="estimate",
    cls=_SweepGroup,
    help="Predict energy per token, throughput and power of LLM serving on any GPU.",
    no_args_is_help=False,
)


@dataclass(frozen=True)
class EstimateJob:
    """What to estimate beyond one request, with which model files, and where results go."""

    sweep: list[str] | None = None
    """Axes: batch-size=1,8,64 sm-clock=900:1980:90."""
    plot: Path | None = None
    """Write a sweep plot (PNG) here."""
    train_seq_len: int | None = None
    """Training mode: one optimizer step of --batch-size x this many tokens."""
    microbatches: int | None = None
    """Training with --pipeline-parallel: microbatches per data-parallel replica (default:
    microbatch size 1)."""
    batch: Path | None = None
    """Batch input CSV."""
    out: Path | None = None
    """Batch output CSV."""
    configs_dir: Path | None = None
    """Folder of <org>__<name>.json."""
    coefficients: Path | None = None
    """Coefficients JSON."""
    as_json: bool = field(default=False, metadata={"cli": {"flags": ("--json",)}})
    """Print JSON."""
    save: bool = False
    """Save estimates as records in the store."""
    data_dir: DataDirOption = None


@app.callback(invoke_without_command=True)
@typed_command
def estimate_cmd(
    ctx: typer.Context,
    request: Given[EstimateRequest],
    job: EstimateJob,
    site: FootprintOptions,
) -> None:
    """Estimate energy per output token, energy per request, throughput and power."""
    if ctx.invoked_subcommand is not None:
        return
    footprint = site.footprint()
    if footprint is not None and (job.batch is not None or job.train_seq_len is not None):
        raise UserError(
            "--carbon-intensity, --region, --price-kwh and --pue apply to serving estimates, "
            f"not to {'--batch' if job.batch is not None else '--train-seq-len'}",
            "drop them, or estimate one serving configuration",
        )
    coef = Coefficients.load(job.coefficients) if job.coefficients else None
    if job.batch is not None:
        estimates = _estimate_batch(job, coef)
    elif not job.sweep and len(request.missing("model", "gpu", "batch_size")) == 3:
        typer.echo(ctx.get_help())
        return
    elif job.train_seq_len is not None:
        _estimate_training(request, job.train_seq_len, job, coef)
        return
    else:
        estimates = _estimate_serving(request, job, coef, footprint)
    if job.save:
        _save(estimates, job.configs_dir, resolve_data_dir(job.data_dir))


def _check_required(request: Given[EstimateRequest], swept: bool) -> None:
    """``--model`` and ``--gpu``, and ``--batch-size`` unless it is swept, must be given."""
    missing = request.missing(*(("model", "gpu") if swept else ("model", "gpu", "batch_size")))
    if missing:
        raise UserError(f"{missing[0]} is required", "See mlenergy estimate --help")


def _estimate_serving(
    request: Given[EstimateRequest], job: EstimateJob, coef: Coefficients | None, footprint: Any
) -> list[Estimate]:
    """Print one estimate, or the table of a sweep over ``job.sweep``'s axes.

    With a ``footprint`` (carbon and cost settings) each estimate also gets
    ``carbon_g_per_1k_tokens`` and ``cost_per_m_tokens``, derived here and never stored.

    Returns:
        The estimates made (a sweep's failed points left out).
    """
    _check_required(request, swept=bool(job.sweep))
    fix = "Give the mean output length in tokens"
    if request.missing("output_tokens"):
        raise UserError("--output-tokens is required", fix)
    if not job.sweep:
        est = estimate(request.build(fix), configs_dir=job.configs_dir, coefficients=coef)
        _print_estimate(est, job.as_json, footprint)
        return [est]
    axes = dict(parse_sweep_axis(s) for s in job.sweep)
    results = sweep(request.values, axes, configs_dir=job.configs_dir, coefficients=coef)
    rows = sweep_table(results, axes)
    if footprint is not None:
        for row in rows:
            if row.get("energy_per_token_j") is not None:
                row.update(footprint.per_token(row["energy_per_token_j"]))
        typer.echo(f"{', '.join(PER_TOKEN_COLUMNS)} derived with {footprint.basis()}", err=True)
    typer.echo(strict_json.dumps(rows, indent=1) if job.as_json else format_table(rows))
    if job.plot is not None:
        typer.echo(f"plot -> {plot_sweep(rows, axes, job.plot)}", err=True)
    return [r for r in results if not isinstance(r, str)]


def _print_estimate(est: Estimate, as_json: bool, footprint: Footprint | None) -> None:
    """One estimate as text or JSON, with carbon and cost per token beside it if asked."""
    if as_json:
        payload = est.to_dict()
        if footprint is not None:
            payload.update(footprint.per_token(est.energy_per_token_j))
            payload["footprint"] = footprint.describe()
        typer.echo(strict_json.dumps(payload, indent=1))
        return
    typer.echo(format_estimate(est))
    if footprint is not None:
        for line in footprint.per_token_lines(est.energy_per_token_j, "output tokens"):
            typer.echo(f"  {line}")


def _estimate_batch(job: EstimateJob, coef: Coefficients | None) -> list[Estimate]:
    """Estimate every row of the batch CSV into ``--out``; the rows estimated when saving."""
    if job.out is None:
        raise UserError("--batch needs --out", "Give the output CSV path with --out")
    assert job.batch is not None
    result = estimate_csv(job.batch, job.out, job.configs_dir, coef)
    bad = int((result["error"] != "").sum())
    typer.echo(f"estimated {len(result) - bad} of {len(result)} rows -> {job.out}", err=True)
    if not job.save:
        return []
    return row_estimates(result, job.configs_dir, coef)  # the same path: every row estimated


def _estimate_training(
    request: Given[EstimateRequest], seq_len: int, job: EstimateJob, coef: Coefficients | None
) -> None:
    """Estimate and print one optimizer step of ``--batch-size`` x ``seq_len`` tokens."""
    _check_required(request, swept=False)
    model, gpu = request.values["model"], request.values["gpu"]
    layout = request.part(ParallelLayout)
    est = estimate_training(
        model,
        gpu,
        int(request.values["batch_size"]),
        seq_len,
        num_gpus=layout.num_gpus,
        tensor_parallel=layout.tensor_parallel,
        data_parallel=layout.data_parallel if layout.num_gpus is None else None,
        precision=request.values["precision"],
        sm_clock_mhz=request.part(GpuSettings).sm_clock_mhz,
        configs_dir=job.configs_dir,
        coefficients=coef,
        pipeline_parallel=layout.pipeline_parallel,
        microbatches=job.microbatches,
    )
    text = format_training(est, model)
    if est.pipeline_parallel > 1:
        text += "\n" + format_pipeline(est)
    typer.echo(strict_json.dumps(est.to_dict(), indent=1) if job.as_json else text)


def _save(estimates: list[Estimate], configs_dir: Path | None, target: Path) -> None:
    """Append the estimates as ``estimated:`` records to the store (one append)."""
    res = RunStore(target).append([to_run_record(e, configs_dir) for e in estimates])
    typer.echo(f"saved {res.added} estimate record(s) to {target}", err=True)


def engines_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the engine profiles: the setup each models and what it includes."""
    if as_json:
        typer.echo(strict_json.dumps([asdict(p) for p in PROFILES], indent=1))
        return
    for p in PROFILES:
        default = " (default)" if p.name == CURRENT_ENGINE else ""
        typer.echo(f"{p.name}{default}: {p.setup}")
        typer.echo(f"  includes: {p.includes}")
        typer.echo(f"  software: {p.software}; also accepted as: {', '.join(p.aliases)}")
    typer.echo(
        "A vLLM version alias names a leaderboard's server setup, not every job run with that "
        "release: an estimate given one says so in its warning."
    )


# The sub-commands, in the order help lists them; fitting and checking are in estimate_fit.
app.command("calibrate")(estimate_fit.calibrate_cmd)
app.command("validate")(estimate_fit.validate_cmd)
app.command("engines")(engines_cmd)
app.command("compare")(estimate_fit.compare_cmd)


def register(root: typer.Typer) -> None:
    """Add the ``estimate`` sub-group to the root app."""
    root.add_typer(app, name="estimate")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
