"""``mlenergy estimate``: predict energy, throughput and power before running anything.

``mlenergy estimate --model M --gpu G --batch-size B --output-tokens O`` prints one estimate;
``--sweep axis=values ...`` a what-if table (and ``--plot`` a figure); ``--batch in.csv --out
out.csv`` many at once; ``estimate calibrate`` refits the coefficients; ``estimate validate``
reports grouped cross-validated error.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import click
import typer
from typer.core import TyperGroup

from mlenergy import strict_json
from mlenergy.commands import estimate_fit
from mlenergy.commands.options import (
    CarbonIntensityOption,
    DataDirOption,
    PriceKwhOption,
    PueOption,
    RegionOption,
    footprint_from,
    resolve_data_dir,
)
from mlenergy.errors import UserError

# The library is imported inside each command, not here: every ``mlenergy`` call imports this
# module, and the estimator's numpy/pandas stack would slow ``mlenergy --help`` several-fold.


class _SweepGroup(TyperGroup):
    """Lets ``--sweep a=1,2 b=3:9:3`` take several axes after one flag."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
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


@app.callback(invoke_without_command=True)
def estimate_cmd(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option(help="config.json path or model id.")] = None,
    gpu: Annotated[str | None, typer.Option(help="Catalog GPU name/alias or spec YAML.")] = None,
    batch_size: Annotated[float | None, typer.Option(help="Sequences decoding together.")] = None,
    input_tokens: Annotated[float | None, typer.Option(help="Mean prompt tokens.")] = None,
    output_tokens: Annotated[float | None, typer.Option(help="Mean output tokens.")] = None,
    task: Annotated[
        str | None,
        typer.Option(
            help="Task label (default prompt length and engine; image-chat and video-chat "
            "prompts are visual tokens)."
        ),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            help="Engine profile (mlenergy estimate engines); default: the task's, else "
            "leaderboard-v3-server."
        ),
    ] = None,
    precision: Annotated[str | None, typer.Option(help="bfloat16|float16|fp8|mxfp4|nvfp4")] = None,
    num_gpus: Annotated[
        int | None, typer.Option(help="GPUs: max(tp*pp*dp, ep); default derived.")
    ] = None,
    tensor_parallel: Annotated[int, typer.Option(help="Tensor-parallel degree.")] = 1,
    expert_parallel: Annotated[int, typer.Option(help="Expert-parallel degree.")] = 1,
    data_parallel: Annotated[int, typer.Option(help="Data-parallel replicas.")] = 1,
    pipeline_parallel: Annotated[int, typer.Option(help="Pipeline stages.")] = 1,
    mode: Annotated[
        str | None,
        typer.Option(
            help="serving (steady state, default) or offline (--batch-size requests started "
            "together, the batch shrinking as they end)."
        ),
    ] = None,
    max_output_tokens: Annotated[
        float | None,
        typer.Option(help="Offline: generation cap (>= --output-tokens); some stop early."),
    ] = None,
    max_num_seqs: Annotated[
        int | None,
        typer.Option(
            help="The engine's concurrency cap (all replicas); offline: more requests queue "
            "(default: vLLM's offline default on the GPU, 1024 or 256 per replica)."
        ),
    ] = None,
    sm_clock: Annotated[float | None, typer.Option(help="Locked SM clock (MHz).")] = None,
    power_limit: Annotated[float | None, typer.Option(help="Power limit per GPU (W).")] = None,
    sweep: Annotated[
        list[str] | None, typer.Option(help="Axes: batch-size=1,8,64 sm-clock=900:1980:90")
    ] = None,
    plot: Annotated[Path | None, typer.Option(help="Write a sweep plot (PNG) here.")] = None,
    train_seq_len: Annotated[
        int | None,
        typer.Option(help="Training mode: one optimizer step of --batch-size x this many tokens."),
    ] = None,
    microbatches: Annotated[
        int | None,
        typer.Option(
            help="Training with --pipeline-parallel: microbatches per data-parallel replica "
            "(default: microbatch size 1)."
        ),
    ] = None,
    batch: Annotated[Path | None, typer.Option(help="Batch input CSV.")] = None,
    out: Annotated[Path | None, typer.Option(help="Batch output CSV.")] = None,
    configs_dir: Annotated[Path | None, typer.Option(help="Folder of <org>__<name>.json.")] = None,
    coefficients: Annotated[Path | None, typer.Option(help="Coefficients JSON.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    save: Annotated[bool, typer.Option(help="Save estimates as records in the store.")] = False,
    data_dir: DataDirOption = None,
    carbon_intensity: CarbonIntensityOption = None,
    region: RegionOption = None,
    price_kwh: PriceKwhOption = None,
    pue: PueOption = None,
) -> None:
    """Estimate energy per output token, energy per request, throughput and power."""
    if ctx.invoked_subcommand is not None:
        return
    footprint = footprint_from(carbon_intensity, region, price_kwh, pue)
    if footprint is not None and (batch is not None or train_seq_len is not None):
        raise UserError(
            "--carbon-intensity, --region, --price-kwh and --pue apply to serving estimates, "
            f"not to {'--batch' if batch is not None else '--train-seq-len'}",
            "drop them, or estimate one serving configuration",
        )
    from mlenergy.estimate.coefficients import Coefficients

    coef = Coefficients.load(coefficients) if coefficients else None
    if batch is not None:
        _estimate_batch(batch, out, configs_dir, coef, resolve_data_dir(data_dir) if save else None)
        return
    if model is None and gpu is None and batch_size is None and not sweep:
        typer.echo(ctx.get_help())
        return
    for name, value in (("--model", model), ("--gpu", gpu), ("--batch-size", batch_size)):
        if value is None and not (sweep and name == "--batch-size"):
            raise UserError(f"{name} is required", "See mlenergy estimate --help")
    if train_seq_len is not None:
        _estimate_training(
            model,  # type: ignore[arg-type]
            gpu,  # type: ignore[arg-type]
            int(batch_size),  # type: ignore[arg-type]
            train_seq_len,
            num_gpus=num_gpus,
            tensor_parallel=tensor_parallel,
            data_parallel=data_parallel,
            pipeline_parallel=pipeline_parallel,
            microbatches=microbatches,
            precision=precision,
            sm_clock=sm_clock,
            configs_dir=configs_dir,
            coef=coef,
            as_json=as_json,
        )
        return
    if output_tokens is None:
        raise UserError("--output-tokens is required", "Give the mean output length in tokens")
    base: dict[str, Any] = dict(
        model=model,
        gpu=gpu,
        batch_size=batch_size,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        task=task,
        precision=precision,
        num_gpus=num_gpus,
        tensor_parallel=tensor_parallel,
        expert_parallel=expert_parallel,
        data_parallel=data_parallel,
        pipeline_parallel=pipeline_parallel,
        sm_clock_mhz=sm_clock,
        power_limit_w=power_limit,
        engine=engine,
        configs_dir=configs_dir,
        coefficients=coef,
        mode=mode,
        max_output_tokens=max_output_tokens,
        max_num_seqs=max_num_seqs,
    )
    estimates = _estimate_serving(base, sweep or [], plot, as_json, footprint)
    if save:
        _save(estimates, configs_dir, resolve_data_dir(data_dir))


def _estimate_serving(
    base: dict[str, Any], sweep: list[str], plot: Path | None, as_json: bool, footprint: Any = None
) -> list[Any]:
    """Print one estimate of ``base``, or the table of a sweep over ``sweep``'s axes.

    With a ``footprint`` (carbon and cost settings) each estimate also gets
    ``carbon_g_per_1k_tokens`` and ``cost_per_m_tokens``, derived here and never stored.

    Returns:
        The estimates made (a sweep's failed points left out).
    """
    from mlenergy.commands.estimate_report import (
        format_estimate,
        format_table,
        plot_sweep,
        sweep_table,
    )
    from mlenergy.commands.estimate_sweep import parse_sweep_axis
    from mlenergy.estimate.api import estimate
    from mlenergy.estimate.api import sweep as run_sweep

    if sweep:
        axes = dict(parse_sweep_axis(s) for s in sweep)
        results = run_sweep(base, axes)
        rows = sweep_table(results, axes)
        if footprint is not None:
            for row in rows:
                if row.get("energy_per_token_j") is not None:
                    row.update(footprint.per_token(row["energy_per_token_j"]))
            typer.echo(_footprint_note(footprint), err=True)
        typer.echo(strict_json.dumps(rows, indent=1) if as_json else format_table(rows))
        if plot is not None:
            typer.echo(f"plot -> {plot_sweep(rows, axes, plot)}", err=True)
        return [r for r in results if not isinstance(r, str)]
    est = estimate(**base)
    if as_json:
        payload = est.to_dict()
        if footprint is not None:
            payload.update(footprint.per_token(est.energy_per_token_j))
            payload["footprint"] = footprint.describe()
        typer.echo(strict_json.dumps(payload, indent=1))
    else:
        typer.echo(format_estimate(est))
        if footprint is not None:
            for line in footprint.per_token_lines(est.energy_per_token_j, "output tokens"):
                typer.echo(f"  {line}")
    return [est]


def _footprint_note(footprint: Any) -> str:
    """One line saying how the carbon and cost columns were derived."""
    from mlenergy.footprint import PER_TOKEN_COLUMNS

    return f"{', '.join(PER_TOKEN_COLUMNS)} derived with {footprint.basis()}"


def _estimate_batch(
    batch: Path, out: Path | None, configs_dir: Path | None, coef: Any, target: Path | None
) -> None:
    """Estimate every row of a batch CSV into ``out``; save them to the store ``target``."""
    from mlenergy.estimate.batch import estimate_csv, row_estimates

    if out is None:
        raise UserError("--batch needs --out", "Give the output CSV path with --out")
    result = estimate_csv(batch, out, configs_dir, coef)
    bad = int((result["error"] != "").sum())
    typer.echo(f"estimated {len(result) - bad} of {len(result)} rows -> {out}", err=True)
    if target is None:
        return
    estimates = row_estimates(result, configs_dir, coef)  # the same path: every row estimated
    _save(estimates, configs_dir, target)


def _estimate_training(
    model: str,
    gpu: str,
    batch_size: int,
    seq_len: int,
    *,
    num_gpus: int | None,
    tensor_parallel: int,
    data_parallel: int,
    pipeline_parallel: int,
    microbatches: int | None,
    precision: str | None,
    sm_clock: float | None,
    configs_dir: Path | None,
    coef: Any,
    as_json: bool,
) -> None:
    """Estimate and print one optimizer step of ``batch_size`` x ``seq_len`` tokens."""
    from mlenergy.commands.estimate_report import format_training
    from mlenergy.estimate.training import estimate_training, format_pipeline

    est = estimate_training(
        model,
        gpu,
        batch_size,
        seq_len,
        num_gpus=num_gpus,
        tensor_parallel=tensor_parallel,
        data_parallel=data_parallel if num_gpus is None else None,
        precision=precision,
        sm_clock_mhz=sm_clock,
        configs_dir=configs_dir,
        coefficients=coef,
        pipeline_parallel=pipeline_parallel,
        microbatches=microbatches,
    )
    text = format_training(est, model)
    if est.pipeline_parallel > 1:
        text += "\n" + format_pipeline(est)
    typer.echo(strict_json.dumps(est.to_dict(), indent=1) if as_json else text)


def _save(estimates: list[Any], configs_dir: Path | None, target: Path) -> None:
    """Append the estimates as ``estimated:`` records to the store (one append)."""
    from mlenergy.estimate.to_record import to_run_record
    from mlenergy.store import RunStore

    res = RunStore(target).append([to_run_record(e, configs_dir) for e in estimates])
    typer.echo(f"saved {res.added} estimate record(s) to {target}", err=True)


def engines_cmd(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False):
    """List the engine profiles: the setup each models and what it includes."""
    from dataclasses import asdict

    from mlenergy.estimate.engines import CURRENT_ENGINE, PROFILES

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
