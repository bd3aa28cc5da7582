"""Serving ``--runs N``: every level measured N times, fresh each time, interleaved by level.

Round ``r`` measures every level once with the existing runner
(:func:`~mlenergy.workloads.serving.runner.run_serving_bench`): against a freshly launched
server per level with ``--launch``, or, attached, with a new client, meter and idle baseline
per level against the running server. Rounds follow each other (levels 8 64 256, 8 64 256,
...), so a drift of the machine falls on every level alike. Once the last round has measured a
level, its ``N`` records become the one stored
(:func:`~mlenergy.workloads.run_spread.combine_serving`: the run nearest the mean kept whole,
the interval from the spread of the runs). A level that failed in any run is stored as failed.
Launched servers' logs go to the store's ``server-logs`` folder, as without ``--runs``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from mlenergy.errors import Interrupted, UserError
from mlenergy.records.interval import FreshRun
from mlenergy.store.preflight import open_store_for_append
from mlenergy.workloads.run_spread import combine_serving
from mlenergy.workloads.serving.runner import run_serving_bench, server_log_dir

if TYPE_CHECKING:
    from mlenergy.records import RunRecord
    from mlenergy.workloads.serving.spec import ServingSpec

MAX_RUNS = 100
"""Most runs per level one serving bench may ask for."""


def check_runs(runs: int) -> int:
    """Refuse a run count below 1 or above :data:`MAX_RUNS`; return it.

    Raises:
        UserError: Naming the bad count.
    """
    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= MAX_RUNS:
        raise UserError(
            f"--runs {runs!r} must be between 1 and {MAX_RUNS}",
            "Pass e.g. --runs 3 (an interval needs at least two runs)",
        )
    return runs


def run_serving_runs(
    spec: ServingSpec,
    runs: int,
    *,
    data_dir: Path | None = None,
    on_record: Callable[[RunRecord], None] | None = None,
    on_run: Callable[[int, RunRecord], None] | None = None,
) -> list[RunRecord]:
    """Measure every level ``runs`` times (fresh each time); store one record per level.

    Args:
        spec: The benchmark (its levels are measured in order, once per round).
        runs: Rounds (1: the plain runner, records stored as each level ends).
        data_dir: Store folder, or ``None`` to store nothing.
        on_record: Called with each stored (combined) record.
        on_run: Called with ``(round from 1, the level's record of that round)``.

    Returns:
        One record per level, in order.

    Raises:
        UserError: Bad input before anything runs, or a failure that stops the runner.
        Interrupted: On Ctrl-C; levels whose last run had ended are stored.
    """
    check_runs(runs)
    if runs == 1:
        return run_serving_bench(spec, data_dir=data_dir, on_record=on_record)
    spec.validate()
    store = open_store_for_append(data_dir) if data_dir is not None else None
    logs = server_log_dir(data_dir) if spec.launch is not None else None
    fresh: FreshRun = "launch" if spec.launch is not None else "attach"
    per_level: dict[int, list[RunRecord]] = {level: [] for level in spec.levels}
    out: list[RunRecord] = []

    def finish(round_no: int, record: RunRecord) -> None:
        per_level[record.workload.batch_size].append(record)
        if on_run is not None:
            on_run(round_no, record)
        if round_no < runs:
            return
        combined = combine_serving(per_level[record.workload.batch_size], fresh)
        if store is not None:
            store.append([combined])
        out.append(combined)
        if on_record is not None:
            on_record(combined)

    try:
        for r in range(1, runs + 1):
            run_serving_bench(
                spec, data_dir=None, keep_going=True, log_dir=logs,
                on_record=functools.partial(finish, r),
            )  # fmt: skip
    except (KeyboardInterrupt, Interrupted) as exc:  # the runner turns Ctrl-C into Interrupted
        kept = f"{len(out)} level(s) stored" if store is not None else "nothing stored"
        raise Interrupted(f"{kept}; any launched server was stopped") from exc
    return out
