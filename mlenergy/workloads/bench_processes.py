"""``mlenergy bench --processes N``: every model's sweep in N fresh processes, interleaved.

On a GPU the spread between processes was wider than any run's own interval (docs/measure.md,
*The spread between runs*): a fresh process loads the model, opens a CUDA context and makes a
meter again, and the decode step moved between 17 and 24 ms with it. Repeating the bench in
fresh processes puts that spread into the interval:

* each run is one model's whole sweep in a new Python interpreter
  (:func:`run_in_fresh_process`, ``python -m mlenergy.workloads.bench_child``), which measures
  idle power, warms up and measures its repeats as a plain ``bench`` would;
* runs are interleaved across models (A B A B ... for ``--processes 2``), so a slow drift of
  the machine falls on every model alike;
* once a model's last run ends, each of its points is combined into one record whose interval
  comes from the runs' spread (:func:`mlenergy.workloads.run_spread.combine_static`) and
  stored; the runs' own records are not stored.

Every input is checked in this process before the first child starts. A child that fails (its
exit status is not 0) stops the bench with its status; nothing of the unfinished models is
stored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from mlenergy.errors import Interrupted, UserError
from mlenergy.records import RunRecord
from mlenergy.workloads.bench import preflight
from mlenergy.workloads.bench_child import RECORD_PREFIX
from mlenergy.workloads.run_spread import combine_static

if TYPE_CHECKING:
    from mlenergy.store import RunStore
    from mlenergy.workloads.bench import BenchOptions
    from mlenergy.workloads.inference import InferenceSpec

CHILD_MODULE = "mlenergy.workloads.bench_child"
"""The module a fresh process runs (``python -m``)."""
MAX_PROCESSES = 100
"""Most fresh processes per model one bench may ask for."""


def check_processes(processes: int) -> int:
    """Refuse a run count below 2 or above :data:`MAX_PROCESSES`; return it.

    Raises:
        UserError: Naming the bad count.
    """
    if isinstance(processes, bool) or not isinstance(processes, int) or processes < 2:
        raise UserError(
            f"--processes {processes!r} must be at least 2 (an interval needs two runs)",
            "Pass e.g. --processes 3, or leave it out for one run",
        )
    if processes > MAX_PROCESSES:
        raise UserError(f"--processes {processes} is above {MAX_PROCESSES}", "Pass fewer")
    return processes


def _child_env() -> dict[str, str]:
    """The environment of a child: this one, with this checkout first on ``PYTHONPATH``."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([root, *[p for p in paths if p != root]])
    return env


def job_text(model: str, spec: InferenceSpec, options: BenchOptions) -> str:
    """The JSON a child reads on stdin: one model, the sweep and the options."""
    opts = asdict(options)
    opts.update(progress=False, interleave=False)
    if opts.get("gpu_indices") is not None:
        opts["gpu_indices"] = list(opts["gpu_indices"])
    return json.dumps({"model": model, "spec": asdict(spec), "options": opts})


def run_in_fresh_process(
    model: str, spec: InferenceSpec, options: BenchOptions, *, label: str = ""
) -> list[RunRecord]:
    """Run one model's sweep in a new Python process; return its records (nothing stored).

    The child's progress and messages go to this process's stderr.

    Args:
        model: The model source, as given to ``bench``.
        spec: The sweep.
        options: Meter and torch settings (progress bar and interleaving off in the child).
        label: Names the run in an error message (e.g. ``run 2 of 3``).

    Raises:
        UserError: The child exited with a non-zero status or printed no record.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", CHILD_MODULE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=_child_env(),
        text=True,
    )
    try:
        out, _ = proc.communicate(job_text(model, spec, options))
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    where = f"{label} of {model}" if label else model
    if proc.returncode != 0:
        raise UserError(
            f"the fresh process of {where} ended with exit status {proc.returncode}; nothing "
            "of its model was stored",
            "See its message above",
        )
    records = []
    for line in out.splitlines():
        if line.startswith(RECORD_PREFIX):
            records.append(RunRecord.model_validate_json(line[len(RECORD_PREFIX) :]))
        elif line.strip():
            print(line, file=sys.stderr)  # a library's message, not a record
    if not records:
        raise UserError(f"the fresh process of {where} printed no record", "See its output above")
    return records


def run_bench_processes(
    models: list[str],
    spec: InferenceSpec,
    options: BenchOptions,
    processes: int,
    *,
    data_dir: Path | None = None,
    on_record: Callable[[RunRecord], None] | None = None,
    on_run: Callable[[int, str, list[RunRecord]], None] | None = None,
) -> list[RunRecord]:
    """Measure every model in ``processes`` fresh processes, interleaved; store the combined.

    Args:
        models: Model sources (as ``bench --model``).
        spec: The sweep every run measures.
        options: Meter and torch settings (``interleave`` is refused: the runs interleave).
        processes: Fresh runs per model (at least 2).
        data_dir: Store folder, or ``None`` to store nothing.
        on_record: Called with each combined record once stored.
        on_run: Called after each run with ``(run number from 1, model, its records)``.

    Returns:
        One combined record per model and batch size, in order.

    Raises:
        UserError: Bad input (before any process starts), or a run that failed.
        Interrupted: On Ctrl-C; models whose runs had all ended are stored.
    """
    check_processes(processes)
    opts = options.validate()
    if opts.interleave:
        raise UserError(
            "--processes already interleaves the models (one fresh process each, in turn)",
            "Drop --interleave",
        )
    sources = list(dict.fromkeys(models))
    _, store = preflight(sources, spec, data_dir)
    runs: dict[str, list[list[RunRecord]]] = {m: [] for m in sources}
    out: dict[str, list[RunRecord]] = {}
    try:
        for i in range(processes):
            for model in sources:
                records = run_in_fresh_process(
                    model, spec, opts, label=f"run {i + 1} of {processes}"
                )
                runs[model].append(records)
                if on_run is not None:
                    on_run(i + 1, model, records)
                if i + 1 == processes:
                    out[model] = _finish(runs[model], store, on_record)
    except KeyboardInterrupt as exc:
        kept = sum(len(v) for v in out.values())
        raise Interrupted(
            f"{kept} combined point(s) stored; the runs of the other models were not"
            if store is not None
            else "nothing was stored (--no-store)"
        ) from exc
    return [r for model in sources for r in out[model]]


def _finish(
    per_run: list[list[RunRecord]],
    store: RunStore | None,
    on_record: Callable[[RunRecord], None] | None,
) -> list[RunRecord]:
    """Combine one model's runs point by point; store and report the combined records."""
    counts = {len(records) for records in per_run}
    if len(counts) != 1:
        raise UserError("the fresh runs of one model measured different points", "Run it again")
    combined = [combine_static(list(point)) for point in zip(*per_run, strict=True)]
    if store is not None:
        store.append(combined)
    if on_record is not None:
        for record in combined:
            on_record(record)
    return combined
