"""``mlenergy import``: results of the tools people already use, as mlenergy records."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from mlenergy.commands.options import DataDirOption, resolve_data_dir
from mlenergy.errors import UserError
from mlenergy.importers.deliver import ImportBatch, deliver
from mlenergy.importers.lmeval_results import LmEvalOptions, read_results, results_files
from mlenergy.importers.mlenergy_benchmark import HarnessOptions, find_runs, read_run
from mlenergy.importers.optimum_benchmark import OptimumOptions, read_report
from mlenergy.importers.zeus_log import ZeusLogOptions, read_log
from mlenergy.records import ENERGY_SOURCE_PATTERN

import_app = typer.Typer(
    name="import",
    help="Import results of other tools (ML.ENERGY benchmark, lm-eval, optimum-benchmark, Zeus).",
    no_args_is_help=True,
)

SubmitOption = Annotated[
    bool,
    typer.Option(
        "--submit",
        help="Queue the records for review (the validation of `mlenergy submit`) instead of "
        "adding them to the store.",
    ),
]
SubmitterOption = Annotated[
    str | None, typer.Option(help="Your name or lab (required with --submit).")
]
BundleOption = Annotated[
    Path | None,
    typer.Option(
        help="Append the records to this JSON Lines file for `mlenergy submit` instead of the "
        "store (energy runs and lm-eval quality of one model in one submission).",
    ),
]
ConfigsDirOption = Annotated[
    Path | None,
    typer.Option(
        help="Folder of model config.json files named <org>__<name>.json "
        "(default: the reference model-configs)."
    ),
]
DtypeOption = Annotated[
    str | None, typer.Option(help="Weight dtype, when the files do not name it.")
]
ZeusVersionOption = Annotated[
    str | None, typer.Option(help="Zeus version that measured the runs (not in the files).")
]


def _deliver(
    batches: list[ImportBatch],
    data_dir: Path | None,
    submit: bool,
    submitter: str | None,
    bundle: Path | None,
) -> None:
    deliver(
        batches,
        resolve_data_dir(data_dir),
        submit=submit,
        submitter=submitter,
        bundle=bundle,
        echo=typer.echo,
    )


def _need_submitter(submit: bool, submitter: str | None) -> None:
    if submit and not (submitter or "").strip():
        raise UserError("--submit needs --submitter NAME", "pass your name or lab")


@import_app.command("mlenergy-benchmark")
def mlenergy_benchmark(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(help="Run folders .../results/{org}/{model}/{gpu}/num_gpus+N+... "),
    ],
    recursive: Annotated[
        bool, typer.Option("--recursive", help="Import every run folder below the folders.")
    ] = False,
    harness_configs: Annotated[
        Path | None,
        typer.Option(help="The harness's configs/vllm folder (parallelism, dtype, model info)."),
    ] = None,
    task: Annotated[
        str | None, typer.Option(help="Task, when the folder does not show it.")
    ] = None,
    gpu: Annotated[
        str | None, typer.Option(help="GPU name, overriding results.json's gpu_model.")
    ] = None,
    engine: Annotated[
        str | None, typer.Option(help="Serving engine, e.g. 'vllm 0.11.1' (else driver.log).")
    ] = None,
    harness_version: Annotated[
        str | None, typer.Option(help="mlenergy.benchmark version that measured the runs.")
    ] = None,
    zeus_version: ZeusVersionOption = None,
    dtype: DtypeOption = None,
    configs_dir: ConfigsDirOption = None,
    data_dir: DataDirOption = None,
    submit: SubmitOption = False,
    submitter: SubmitterOption = None,
    bundle: BundleOption = None,
) -> None:
    """Import ML.ENERGY benchmark (v3 harness) run folders: GPU energy of the steady state."""
    _need_submitter(submit, submitter)
    opts = HarnessOptions(
        configs_dir=configs_dir,
        harness_configs=harness_configs,
        task=task,
        dtype=dtype,
        engine=engine,
        harness_version=harness_version,
        zeus_version=zeus_version,
        gpu=gpu,
    )
    _deliver(
        [read_run(d, opts) for d in find_runs(run_dirs, recursive=recursive)],
        data_dir,
        submit,
        submitter,
        bundle,
    )


@import_app.command("lm-eval")
def lm_eval(
    files: Annotated[
        list[Path],
        typer.Argument(help="lm-eval results_*.json files, or folders holding them."),
    ],
    model: Annotated[
        str | None, typer.Option(help="Model id, overriding the file's model_name.")
    ] = None,
    dtype: DtypeOption = None,
    configs_dir: ConfigsDirOption = None,
    data_dir: DataDirOption = None,
    submit: SubmitOption = False,
    submitter: SubmitterOption = None,
    bundle: BundleOption = None,
) -> None:
    """Import lm-evaluation-harness results: one quality record per task x metric."""
    _need_submitter(submit, submitter)
    opts = LmEvalOptions(configs_dir=configs_dir, model=model, dtype=dtype)
    batches = [read_results(f, opts) for f in results_files(files)]
    _deliver(batches, data_dir, submit, submitter, bundle)


@import_app.command("optimum-benchmark")
def optimum_benchmark(
    files: Annotated[list[Path], typer.Argument(help="optimum-benchmark benchmark.json files.")],
    gpu: Annotated[
        str | None, typer.Option(help="GPU name, overriding config.environment.gpu.")
    ] = None,
    task: Annotated[str | None, typer.Option(help="Workload label.")] = None,
    configs_dir: ConfigsDirOption = None,
    data_dir: DataDirOption = None,
    submit: SubmitOption = False,
    submitter: SubmitterOption = None,
    bundle: BundleOption = None,
) -> None:
    """Import optimum-benchmark text-generation reports (CodeCarbon energy, kWh -> J)."""
    _need_submitter(submit, submitter)
    opts = OptimumOptions(configs_dir=configs_dir, gpu=gpu, task=task)
    _deliver([read_report(f, opts) for f in files], data_dir, submit, submitter, bundle)


def _tokens(values: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for value in values:
        name, sep, count = value.partition("=")
        if not sep or not name.strip() or not count.strip().isdigit():
            raise UserError(
                f"--tokens {value!r} is not WINDOW=N",
                "e.g. --tokens decode=4096 --tokens prefill=2048",
            )
        out[name.strip()] = int(count)
    return out


@import_app.command("zeus-log")
def zeus_log(
    log: Annotated[Path, typer.Argument(help="CSV written by ZeusMonitor(log_file=...).")],
    model: Annotated[str, typer.Option(help="Model id the log measured.")],
    gpu: Annotated[str, typer.Option(help="GPU name (the log names none), e.g. H100.")],
    task: Annotated[str | None, typer.Option(help="Workload label (default: window name).")] = None,
    kind: Annotated[str, typer.Option(help="inference or training.")] = "inference",
    tokens: Annotated[
        list[str] | None,
        typer.Option(help="WINDOW=N: tokens a window processed, summed over the batch."),
    ] = None,
    batch_size: Annotated[int, typer.Option(min=1, help="Sequences per window.")] = 1,
    energy_source: Annotated[
        str, typer.Option(help="Label of the log's energy figures.")
    ] = "measured:zeus-nvml",
    torch_version: Annotated[
        str | None, typer.Option(help="torch version of the measured program.")
    ] = None,
    zeus_version: ZeusVersionOption = None,
    dtype: DtypeOption = None,
    configs_dir: ConfigsDirOption = None,
    data_dir: DataDirOption = None,
    submit: SubmitOption = False,
    submitter: SubmitterOption = None,
    bundle: BundleOption = None,
) -> None:
    """Import a Zeus window log: one run record per window name, repeats with a 95% CI."""
    _need_submitter(submit, submitter)
    if not re.match(ENERGY_SOURCE_PATTERN, energy_source):
        raise UserError(
            f"--energy-source {energy_source!r} is not a source label",
            "use e.g. measured:zeus-nvml",
        )
    opts = ZeusLogOptions(
        model=model,
        gpu=gpu,
        task=task,
        kind=kind,
        dtype=dtype,
        batch_size=batch_size,
        tokens=_tokens(tokens or []),
        energy_source=energy_source,
        configs_dir=configs_dir,
        torch_version=torch_version,
        zeus_version=zeus_version,
    )
    _deliver([read_log(log, opts)], data_dir, submit, submitter, bundle)


def register(app: typer.Typer) -> None:
    """Add the ``import`` group to the root app."""
    app.add_typer(import_app, name="import")
