"""``mlenergy estimate calibrate | validate | compare``: fit the estimator and check it.

The commands of :mod:`mlenergy.calibrate`, added to the ``estimate`` group by
:func:`mlenergy.commands.estimate.register`: ``calibrate`` refits the coefficients,
``validate`` reports grouped cross-validated error, ``compare`` puts a store's measured runs
beside their estimates.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from mlenergy import strict_json
from mlenergy.calibrate.accuracy_markdown import validation_markdown
from mlenergy.calibrate.compare import compare_runs
from mlenergy.calibrate.crossval import (
    HOLD_OUT,
    TARGETS,
    CrossValidation,
    cross_validate,
    validation_tables,
)
from mlenergy.calibrate.refit import calibrate_all
from mlenergy.commands.estimate_report import format_table
from mlenergy.commands.options import DataDirOption, resolve_data_dir
from mlenergy.errors import UserError
from mlenergy.estimate.coefficients import Coefficients, default_coefficients
from mlenergy.estimate.host_bound import host_bound_label
from mlenergy.reference import configs_next_to
from mlenergy.reference.measurements import load_reference, own_measurements
from mlenergy.store import RunStore


def calibrate_cmd(
    reference: Annotated[
        Path | None,
        typer.Option(
            help="Reference folder (default: the shipped one, or $MLENERGY_REFERENCE_DIR)."
        ),
    ] = None,
    store: Annotated[
        Path | None, typer.Option(help="Also fit on GPU measurements of this data dir.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Coefficients file to write (required); use it with "
            "`mlenergy estimate --coefficients FILE`."
        ),
    ] = None,
    configs_dir: Annotated[Path | None, typer.Option(help="Folder of model configs.")] = None,
    no_v2: Annotated[bool, typer.Option("--no-v2", help="Skip the 2024 v2 tables.")] = False,
    folds: Annotated[int, typer.Option(help="CV folds for the prediction interval.")] = 10,
) -> None:
    """Fit the estimator's global coefficients on measurements and write them to --out."""
    if out is None:
        raise UserError(
            "--out is required: calibrate never rewrites the installed package's coefficients",
            "Give a file, e.g. --out my-coefficients.json, then estimate with "
            "--coefficients my-coefficients.json",
        )
    if folds == 1 or folds < 0:
        raise UserError(
            f"--folds must be >= 2 (or 0: keep the current interval), got {folds}",
            "Give 2 or more cross-validation folds",
        )
    runs = None
    if store is not None:
        try:
            runs = RunStore(store).runs()
        except Exception as exc:  # no store there yet, or not readable: skip it, say so
            typer.echo(f"note: no stored measurements used from {store} ({exc})", err=True)
    configs_dir = configs_next_to(reference, configs_dir)
    coef, path, n = calibrate_all(
        reference, runs, out=out, configs_dir=configs_dir, include_v2=not no_v2, folds=folds
    )
    typer.echo(f"fitted on {n} rows; coefficients -> {path}")
    typer.echo(f"use them with: mlenergy estimate --coefficients {path} ...")
    width = max(len(name) for name in coef.FITTED)
    for name in coef.FITTED:
        typer.echo(f"  {name:{width}s} {getattr(coef, name):.4g}")


def validate_cmd(
    reference: Annotated[Path | None, typer.Option(help="Reference folder.")] = None,
    group_by: Annotated[
        list[str] | None, typer.Option(help="Extra grouping: model, gpu, kind, task, source.")
    ] = None,
    folds: Annotated[int | None, typer.Option(help="Folds (default: leave-one-out).")] = None,
    store: Annotated[
        Path | None,
        typer.Option(help="Also cross-validate the measured GPU runs of this data dir."),
    ] = None,
    hold_out: Annotated[
        str,
        typer.Option(
            help="What a fold holds out: architecture (no model in both fit and test), "
            "family (no model line, e.g. every Qwen3 or Llama model, in both) or gpu (the "
            "held-out GPU is predicted from its datasheet alone)."
        ),
    ] = "architecture",
    configs_dir: Annotated[Path | None, typer.Option(help="Folder of model configs.")] = None,
    no_v2: Annotated[bool, typer.Option("--no-v2", help="Skip the 2024 v2 tables.")] = False,
    out: Annotated[Path | None, typer.Option(help="Write out-of-fold predictions (CSV).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    markdown: Annotated[
        bool,
        typer.Option("--markdown", help="Print the report as Markdown (docs include it)."),
    ] = False,
) -> None:
    """Grouped cross-validation (no model in both fit and test): error report."""
    if folds is not None and folds < 2:
        raise UserError(
            f"--folds must be >= 2, got {folds}",
            "Give 2 or more folds, or omit --folds for leave-one-architecture-out",
        )
    if hold_out not in HOLD_OUT:
        raise UserError(f"unknown --hold-out '{hold_out}'", f"Use one of {', '.join(HOLD_OUT)}")
    df = load_reference(reference, include_v2=not no_v2)
    configs = configs_next_to(reference, configs_dir)
    if store is not None:
        own = own_measurements(RunStore(store).runs(), configs)
        note = f"{len(own)} measured GPU serving run(s) from {store} (source 'store')"
        typer.echo(note, err=True)
        df = pd.concat([df, own], ignore_index=True) if len(own) else df
    cv = cross_validate(df, folds=folds, configs_dir=configs, group_by=hold_out, show_progress=True)
    tables = validation_tables(cv, group_by)
    if out is not None:
        cv.rows.to_csv(out, index=False)
    rule = host_bound_label(default_coefficients().host_bound_rule)
    if markdown:
        command = _validate_command(hold_out, folds, no_v2, group_by)
        checks = cv.target_checks(held_out_gpu=hold_out == "gpu")
        text = validation_markdown(command, cv, tables, checks, cv.energy_tail(), rule)
        typer.echo(text, nl=False)
    elif as_json:
        typer.echo(strict_json.dumps(_validation_json(cv, tables, hold_out), indent=1))
    else:
        _echo_validation(cv, hold_out, tables, rule)


def _validate_command(
    hold_out: str, folds: int | None, no_v2: bool, group_by: list[str] | None
) -> str:
    """The command that makes this Markdown report (the docs quote it above the report)."""
    words = ["mlenergy estimate validate"]
    words += [] if hold_out == "architecture" else ["--hold-out", hold_out]
    words += [] if folds is None else ["--folds", str(folds)]
    words += ["--no-v2"] if no_v2 else []
    words += [f"--group-by {g}" for g in group_by or []]
    return " ".join([*words, "--markdown"])


def _validation_json(cv: CrossValidation, tables: dict[str, Any], hold_out: str) -> dict:
    """The cross-validation report as JSON: tables, targets, checks, the energy tail."""
    held_out_gpu = hold_out == "gpu"
    clean = cv.without_stalled()
    payload = {k: json.loads(v.to_json(orient="index")) for k, v in tables.items()}
    payload["targets_percent"] = TARGETS
    payload["meets_targets"] = cv.meets_targets()
    payload["target_checks"] = [asdict(c) for c in cv.target_checks(held_out_gpu=held_out_gpu)]
    payload["energy_tail"] = asdict(cv.energy_tail())
    payload["target_checks_without_stalled"] = [
        asdict(c)
        for c in (clean.target_checks(held_out_gpu=held_out_gpu) if len(clean.rows) else [])
    ]
    return payload


def _echo_validation(cv: CrossValidation, hold_out: str, tables: dict, rule: str) -> None:
    """Print the cross-validation report as text: tables, targets, the energy tail.

    Args:
        cv: The cross-validation.
        hold_out: What a fold held out.
        tables: Table name to frame of absolute percentage errors.
        rule: The host-bound rule, in words.
    """
    checks = cv.target_checks(held_out_gpu=hold_out == "gpu")
    clean = cv.without_stalled()
    clean_checks = clean.target_checks(held_out_gpu=hold_out == "gpu") if len(clean.rows) else []
    typer.echo(
        f"grouped cross-validation (held out: {hold_out}): {cv.folds} folds, "
        f"{len(cv.rows)} rows; APE in %"
    )
    for name, table in tables.items():
        typer.echo(f"\n== by {name}")
        typer.echo(table.round(1).to_string())
    typer.echo(f"\nhost-bound rule: {rule}")
    missed = sum(not c.met for c in checks)
    typer.echo(f"\ntargets: {len(checks) - missed} of {len(checks)} met (all rows, in %)")
    for c in checks:
        typer.echo(f"  {c.describe()}")
    typer.echo(f"\n{cv.energy_tail().describe()}")
    if clean_checks:
        missed = sum(not c.met for c in clean_checks)
        typer.echo(
            f"\ntargets on the {len(clean.rows)} rows that did not stall (outside the host-bound "
            f"rule and data-parallel attention with expert parallelism): "
            f"{len(clean_checks) - missed} of {len(clean_checks)} met"
        )
        for c in clean_checks:
            typer.echo(f"  {c.describe()}")


def compare_cmd(
    data_dir: DataDirOption = None,
    configs_dir: Annotated[Path | None, typer.Option(help="Folder of model configs.")] = None,
    coefficients: Annotated[Path | None, typer.Option(help="Coefficients JSON.")] = None,
    out: Annotated[Path | None, typer.Option(help="Write the compared runs (CSV).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Every measured GPU serving run in the store beside its estimate, errors by half."""
    data = resolve_data_dir(data_dir)
    coef = Coefficients.load(coefficients) if coefficients else None
    result = compare_runs(RunStore(data).runs(), configs_dir, coef)
    if out is not None:
        result.rows.to_csv(out, index=False)
    if as_json:
        payload = {
            "runs": json.loads(result.rows.to_json(orient="records")),
            "summary": json.loads(result.summary().to_json(orient="index")),
            "skipped": [{"run_id": r, "reason": why} for r, why in result.skipped],
        }
        typer.echo(strict_json.dumps(payload, indent=1))
        return
    if result.rows.empty:
        typer.echo(f"no measured GPU serving run in {data} could be compared", err=True)
    else:
        rows = result.rows.to_dict("records")
        typer.echo(format_table([{str(k): v for k, v in row.items()} for row in rows]))
        typer.echo("\nerrors by half (percent; signed: predicted / measured - 1)")
        typer.echo(result.summary().round(1).to_string())
    for run_id, why in result.skipped:
        typer.echo(f"skipped {run_id}: {why}", err=True)
