"""Run the measured dense-versus-MoE study end to end: read, match, compare, report.

``mlenergy study dense-vs-moe --measured`` calls :func:`run_measured_study`; so does notebook
05. Bad input (no measured run, an unknown GPU, a deadline no configuration meets, a benchmark
absent from the quality file, a malformed quality file) raises
:class:`~mlenergy.errors.UserError` before anything is written.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from mlenergy.errors import UserError
from mlenergy.footprint import Footprint
from mlenergy.progress import ProgressBar, progress_bar
from mlenergy.quality.published import (
    benchmarks,
    published_quality_path,
    read_published_quality,
    unmatched_model_ids,
)
from mlenergy.records.metrics import DEFAULT_ITL_LIMIT_MS, task_benchmarks
from mlenergy.reference import reference_dir
from mlenergy.store import RunStore
from mlenergy.studies import measured as m
from mlenergy.studies import measured_analysis as ma
from mlenergy.studies.measured_conclusion import measured_conclusion
from mlenergy.studies.measured_report import write_measured_report
from mlenergy.studies.measured_result import Findings, MeasuredStudyResult

DEFAULT_REPORT_DIR = Path("reports/dense-vs-moe-measured")


def _reference_dir(reference: str | Path | None) -> Path:
    if reference is not None:
        return Path(reference)

    return reference_dir()


def _check_inputs(itl_limit_ms: float, quality_path: Path, benchmark: str, scores: list) -> None:
    if not itl_limit_ms > 0:
        raise UserError(f"--itl-limit-ms must be positive (got {itl_limit_ms:g})")
    names = benchmarks(scores)
    if benchmark.lower() not in {b.lower() for b in names}:
        raise UserError(
            f"benchmark {benchmark!r} is not in {quality_path.name}",
            f"pass --benchmark with one of: {', '.join(names)}",
        )


def _warnings(
    rows: pd.DataFrame, scores: list, names: list[str], quality_records: list | None = None
) -> list[str]:
    used = {b.lower() for b in names}
    pool = [s for s in scores if s.benchmark.lower() in used]
    out = []
    unmatched = unmatched_model_ids(pool, rows["model_id"])
    if unmatched:
        out.append(
            f"quality rows of {len(unmatched)} model(s) match no measured model, not used: "
            + ", ".join(unmatched)
        )
    out += m.unused_store_quality(quality_records or [], set(rows["model_id"]), names)
    unmapped = sorted(set(rows.loc[rows["quality_benchmark"] == "", "task"]))
    if unmapped:
        out.append("tasks with no quality benchmark (energy tables only): " + ", ".join(unmapped))
    left_out = rows[(rows["quality_reason"] != "") & (rows["quality_benchmark"] != "")]
    for _, r in left_out.iterrows():
        out.append(
            f"{r['model_id']} ({r['task']}, {r['gpu']}) left out of quality comparisons: "
            f"{r['quality_reason']}"
        )
    for _, r in rows[rows["note"] != ""].iterrows():
        out.append(f"{r['model_id']} ({r['task']}, {r['gpu']}): {r['note']}")
    return out


def _energy_note(configs: pd.DataFrame) -> str:
    pairs = configs[["energy_source", "measured_by"]].drop_duplicates()
    who = "; ".join(f"{s} (measured by {b})" for s, b in pairs.itertuples(index=False))
    return f"Energy: {who}: GPU energy of real runs, not estimated or modelled."


def run_measured_study(
    data_dir: str | Path = "data",
    reference: str | Path | None = None,
    *,
    include_reference: bool = True,
    quality_file: str | Path | None = None,
    gpu: str | None = None,
    itl_limit_ms: float = DEFAULT_ITL_LIMIT_MS,
    benchmark: str = m.DEFAULT_BENCHMARK,
    report_dir: str | Path = DEFAULT_REPORT_DIR,
    progress: bool = True,
    footprint: Footprint | None = None,
) -> MeasuredStudyResult:
    """The measured study: the reference layer and the store's runs, quality, report.

    Args:
        data_dir: Store folder (read only).
        reference: Reference folder (default: ``$MLENERGY_REFERENCE_DIR``, else the shipped
            one).
        include_reference: Read the reference's measurements beside the store's (they are
            never imported into it).
        quality_file: Published-quality CSV (default: the reference's).
        gpu: Keep only this GPU (``B200``, ``H100``); default all.
        itl_limit_ms: Deadline on the median inter-token latency, milliseconds.
        benchmark: Quality benchmark of the reasoning task (``gpqa``).
        report_dir: Report folder.
        progress: Show a progress bar.
        footprint: Carbon and cost settings: the headline table, ``summary.md``,
            ``summary.csv`` and ``index.html`` add g CO2e and cost per response and per
            correct answer (``None``: joules only).

    Raises:
        UserError: Bad input or nothing to compute (the message says which).
    """
    t0 = time.perf_counter()
    ref = _reference_dir(reference)
    qpath = Path(quality_file) if quality_file is not None else published_quality_path(ref)
    scores = read_published_quality(qpath)
    _check_inputs(itl_limit_ms, qpath, benchmark, scores)
    task_bench = task_benchmarks(benchmark)
    report_dir = Path(report_dir)
    result = MeasuredStudyResult(
        report_dir=report_dir,
        report_path=report_dir / "index.html",
        summary_path=report_dir / "summary.md",
        csv_path=report_dir / "summary.csv",
        data_dir=Path(data_dir),
        quality_path=qpath,
        itl_limit_ms=itl_limit_ms,
        gpu=gpu,
        benchmarks_text=", ".join(f"{t}: {b}" for t, b in task_bench.items()),
        footprint=footprint,
    )
    with progress_bar(5, "measured study", unit="step", enabled=progress) as bar:
        bar.describe("reading measurements")
        runs, result.from_reference = m.load_measured_runs(Path(data_dir), ref, include_reference)
        quality_records = _read_quality_records(
            result, runs, gpu, itl_limit_ms, task_bench, scores, bar
        )
        bar.describe("comparing")
        _compare(result, scores, quality_records, task_bench)
        bar.advance()
        bar.describe("writing report")
        write_measured_report(result)
        bar.advance()
    result.elapsed_s = time.perf_counter() - t0
    return result


def _read_quality_records(
    result: MeasuredStudyResult,
    runs: list,
    gpu: str | None,
    itl_limit_ms: float,
    task_bench: dict[str, str],
    scores: list,
    bar: ProgressBar,
) -> list:
    """Fill ``configs`` and ``rows`` (best configurations with quality) and the warnings.

    Returns:
        The store's quality records.
    """
    configs = m.measured_frame(runs, gpu)
    if configs.empty:
        _no_measured_run(result, runs, gpu)
    bar.advance(2)
    store = RunStore(result.data_dir)
    quality_records = store.quality() if store.results_dir.is_dir() else []
    best = m.best_configurations(configs, itl_limit_ms)
    if not best["energy_per_response_j"].notna().any():
        _no_configuration_within(configs, itl_limit_ms)
    result.configs = configs
    result.rows = m.attach_quality(best, scores, quality_records, task_bench)
    if not result.rows["quality_score"].notna().any():
        _no_quality_match(result, scores, task_bench)
    result.warnings = _warnings(
        result.rows, scores, sorted(set(task_bench.values())), quality_records
    )
    result.energy_note = _energy_note(configs)
    bar.advance()
    return quality_records


def _no_measured_run(result: MeasuredStudyResult, runs: list, gpu: str | None) -> None:
    """Raise: no measured run (on ``gpu``); name the GPUs that were measured."""
    everywhere = m.measured_frame(runs)
    if gpu and not everywhere.empty:
        raise UserError(
            f"no measured GPU inference run on GPU {gpu!r} in the store {result.data_dir}",
            f"pick --gpu from the measured GPUs: {', '.join(sorted(set(everywhere['gpu'])))}",
        )
    raise UserError(
        f"no measured GPU inference run in the store {result.data_dir}",
        "import measurements (mlenergy import mlenergy-benchmark), or drop "
        "--without-reference to read the shipped reference",
    )


def _no_configuration_within(configs: pd.DataFrame, itl_limit_ms: float) -> None:
    """Raise: no configuration meets the deadline; name the fastest, or say none has a latency."""
    timed = configs[configs["median_itl_ms"].notna()]
    if timed.empty:
        raise UserError(
            f"none of the {len(configs)} measured configuration(s) records a median "
            "inter-token latency, so none can be judged against --itl-limit-ms",
            "import runs that record latencies (mlenergy import mlenergy-benchmark; Zeus logs "
            "and optimum-benchmark reports carry none)",
        )
    fastest = timed.sort_values("median_itl_ms").iloc[0]
    raise UserError(
        f"no measured configuration meets --itl-limit-ms {itl_limit_ms:g} (the fastest "
        f"median ITL is {fastest['median_itl_ms']:.1f} ms: {fastest['model_id']} on "
        f"{fastest['gpu']}, {fastest['task']})",
        "raise --itl-limit-ms",
    )


def _no_quality_match(result: MeasuredStudyResult, scores: list, task_bench: dict) -> None:
    """Raise: no measured model has a quality figure, so nothing can be compared."""
    used = {b.lower() for b in task_bench.values()}
    rows = [s for s in scores if s.benchmark.lower() in used]
    listed = ", ".join(f"line {s.line} ({s.model_id})" for s in rows[:5])
    more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
    raise UserError(
        f"no measured model matches a quality row of {result.quality_path.name} on "
        f"{', '.join(sorted(set(task_bench.values())))}"
        + (f": {listed}{more} name no measured model" if rows else ""),
        "use the measured models' ids (as in the store) in the quality file",
    )


def findings(
    configs: pd.DataFrame,
    itl_limit_ms: float,
    scores: list,
    quality_records: list,
    task_bench: dict[str, str],
) -> Findings:
    """Best configurations with quality, pairs, fits and the sparse claim of ``configs``."""
    rows = m.attach_quality(
        m.best_configurations(configs, itl_limit_ms), scores, quality_records, task_bench
    )
    return Findings(
        rows=rows,
        pairs=ma.matched_pairs(rows, configs, itl_limit_ms),
        fits=ma.parameter_fits(rows),
        claim=ma.sparse_claim(rows),
    )


def _compare(result: MeasuredStudyResult, scores: list, quality_records: list, task_bench) -> None:
    rows = result.rows
    result.frontier = ma.quality_frontier(rows)
    result.pairs = ma.matched_pairs(rows, result.configs, result.itl_limit_ms)
    result.fits = ma.parameter_fits(rows)
    result.claim = ma.sparse_claim(rows)
    flagged = result.configs["host_bound"].astype(bool)
    result.stalled = result.configs[flagged].reset_index(drop=True)
    clean = result.configs[~flagged].reset_index(drop=True)
    if flagged.any() and not clean.empty:
        result.unstalled = findings(clean, result.itl_limit_ms, scores, quality_records, task_bench)
    limits = (*ma.DEADLINES_MS, result.itl_limit_ms)
    result.deadlines = ma.deadline_table(result.configs, rows, limits)
    everything = Findings(rows, result.pairs, result.fits, result.claim)
    result.conclusion = measured_conclusion(
        everything, result.unstalled, result.stalled, result.configs
    )
