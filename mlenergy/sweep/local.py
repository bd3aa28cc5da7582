"""The in-process executor: runs one after another in the driver's own process (the default).

A run that raises is run again up to ``retries`` times, then reported as failed. A run past
``timeout_s`` is interrupted by a ``SIGALRM`` timer (main thread, POSIX only; elsewhere the
limit is not enforced in-process) and reported as timed out. A hard crash (a CUDA fault, the
OOM killer) ends the whole process here: use the Ray executor to confine those to one run.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence

from mlenergy.errors import UserError
from mlenergy.sweep.outcome import Outcome, first_line
from mlenergy.sweep.runs import execute_run
from mlenergy.sweep.spec import RunSpec


class RunTimeout(Exception):
    """Raised inside a run when its ``timeout_s`` has passed."""


@contextlib.contextmanager
def _alarm(timeout_s: float | None) -> Iterator[None]:
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if timeout_s is None or not usable:
        yield
        return

    def _expire(_signum: int, _frame: object) -> None:
        raise RunTimeout(f"run exceeded its timeout of {timeout_s:g} s")

    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, float(timeout_s))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class LocalExecutor:
    """Run every spec sequentially in this process.

    Args:
        idle_s: Seconds of idle power measured before each bench run (0: skip).
    """

    name = "local"

    def __init__(self, idle_s: float = 0.0) -> None:
        self.idle_s = idle_s

    def run(
        self, specs: Sequence[RunSpec], on_start: Callable[[RunSpec], None]
    ) -> Iterator[Outcome]:
        """Run each spec in turn, yielding its outcome when it ends."""
        for spec in specs:
            on_start(spec)
            yield self._run_one(spec)

    def _run_one(self, spec: RunSpec) -> Outcome:
        attempts = 0
        while True:
            attempts += 1
            try:
                with _alarm(spec.timeout_s):
                    records = execute_run(spec, self.idle_s)
                return Outcome(spec, "ok", records, attempts=attempts)
            except RunTimeout as exc:
                return Outcome(spec, "timed out", error=str(exc), attempts=attempts)
            except UserError as exc:  # deterministic: running it again would not help
                return Outcome(spec, "failed", error=exc.message, attempts=attempts)
            except Exception as exc:
                if attempts > spec.retries:
                    return Outcome(spec, "failed", error=first_line(exc), attempts=attempts)

    def close(self) -> None:
        """Nothing to release."""
