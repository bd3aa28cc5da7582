"""Which spread a record's 95% intervals come from: repeats inside one run, or fresh runs.

A run's repeats share one process: one model load, one CUDA context, one meter, one server.
Their spread misses whatever changes from one process or server launch to the next; on a GPU
those changes were the larger part (docs/measure.md, *The spread between runs*). So every
interval says its basis:

* ``within-run``: the Student-t interval over the ``n`` repeats of one run;
* ``between-runs``: the Student-t interval over ``n`` fresh runs (``mlenergy bench --processes
  N``, a fresh process per run; serving ``--runs N``, a fresh launch or attach per run).

:func:`mlenergy.records.run.interval_basis` reads it from a record (records made before the
field existed carry within-run intervals when their phases have one); :func:`interval_label`
words it the same way in every view (the bench table, ``mlenergy runs``, the leaderboard, the
notebook plots).
"""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from mlenergy.records.base import FrozenModel, NonNegFloat, PosInt

IntervalKind = Literal["within-run", "between-runs"]
FreshRun = Literal["process", "launch", "attach"]

_FRESH_WORDS = {"process": "processes", "launch": "launches", "attach": "attaches"}


class IntervalBasis(FrozenModel):
    """Which spread a record's 95% intervals come from: one run's repeats, or fresh runs.

    Attributes:
        kind: ``within-run``: the Student-t interval over the repeats of one run (one process,
            one model load, one meter), which misses what changes from one process or server
            launch to the next; ``between-runs``: the Student-t interval over ``n`` fresh runs,
            each run's repeats averaged first.
        n: How many values the interval comes from: repeats of the run (within-run) or runs
            (between-runs).
        fresh: What each run started anew (between-runs): ``process`` (a static bench in a new
            Python process: model, CUDA context and meter made again), ``launch`` (a serving
            level against a newly launched server) or ``attach`` (a serving level measured
            again against the running server with a new client and meter); ``None`` within a
            run.
        repeats_per_run: Measured repeats inside each run of a between-runs static bench.
        run_energy_per_token_j: Each run's headline energy per output token in joules per
            token, in the order run (between-runs).
        kept_run: Serving between-runs records keep one run whole (its steady-state window,
            latencies and per-request energies, which cannot be averaged across windows): the
            1-based run whose energy per token is nearest the runs' mean. ``None`` otherwise.
    """

    kind: IntervalKind
    n: PosInt
    fresh: FreshRun | None = None
    repeats_per_run: PosInt | None = None
    run_energy_per_token_j: tuple[NonNegFloat, ...] = ()
    kept_run: PosInt | None = None

    @model_validator(mode="after")
    def _consistent(self) -> IntervalBasis:
        if self.kind == "between-runs":
            if self.fresh is None:
                raise ValueError("a between-runs interval needs `fresh` (process/launch/attach)")
            if self.run_energy_per_token_j and len(self.run_energy_per_token_j) != self.n:
                raise ValueError("run_energy_per_token_j needs one value per run")
            if self.kept_run is not None and self.kept_run > self.n:
                raise ValueError(f"kept_run {self.kept_run} is beyond the {self.n} runs")
        elif self.fresh is not None or self.run_energy_per_token_j or self.kept_run is not None:
            raise ValueError("a within-run interval has no fresh runs")
        return self

    def label(self) -> str:
        """The basis in words, e.g. ``between-runs, 3 processes`` (:func:`interval_label`)."""
        return interval_label(self.kind, self.n, self.fresh)


def interval_label(kind: str | None, n: int | float | None, fresh: str | None = None) -> str:
    """One wording of an interval's basis for every view.

    Args:
        kind: ``within-run`` or ``between-runs`` (``None`` or blank: no interval).
        n: Repeats (within-run) or runs (between-runs).
        fresh: ``process``, ``launch`` or ``attach`` (between-runs).

    Returns:
        ``within-run, 3 repeats``, ``between-runs, 3 processes``... or ``""`` without a kind.
    """
    if not kind:
        return ""
    count = int(n) if n is not None and n == n else None
    if kind == "within-run":
        return f"within-run, {count} repeats" if count else "within-run"
    unit = _FRESH_WORDS.get(fresh or "", "runs")
    return f"between-runs, {count} {unit}" if count else "between-runs"
