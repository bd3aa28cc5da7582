"""SIGTERM and SIGHUP handled as Ctrl-C, so that a benchmark ends the same way whatever stops it.

``kill``, ``timeout``, Slurm and Ray stop a job with SIGTERM; a closed terminal sends SIGHUP.
Left to their defaults, both end Python at once and a launched server (which may hold GPUs)
outlives it. Inside :func:`signals_as_interrupt`, either signal calls the Ctrl-C handler in force
(Python's, or the one :func:`asyncio.run` installs to cancel its main task cleanly), so the same
cleanup runs: finished levels stay stored, the server's process group is stopped. The caller then
raises :func:`interrupted`, whose exit status is ``128 + signal`` (130 Ctrl-C, 143 SIGTERM,
129 SIGHUP).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

from mlenergy.errors import Interrupted

FORWARDED = (signal.SIGTERM, signal.SIGHUP)
"""Signals handled as Ctrl-C."""


@dataclass
class Caught:
    """Which signal ended the job (``None``: Ctrl-C itself, or none)."""

    signum: int | None = None


@contextmanager
def signals_as_interrupt() -> Iterator[Caught]:
    """Inside, SIGTERM and SIGHUP interrupt like Ctrl-C; ``Caught.signum`` says which came.

    Only the main thread can set handlers: elsewhere (a notebook's worker thread) nothing is
    changed. A signal ignored on purpose (SIGHUP under ``nohup``) stays ignored; an ignored
    SIGINT (a shell's background job) interrupts inside, so that the signals forwarded to it
    reach the cleanup. The handlers in force before are restored on exit.
    """
    caught = Caught()
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        if caught.signum is None:
            caught.signum = signum
        ctrl_c = signal.getsignal(signal.SIGINT)
        if callable(ctrl_c):
            ctrl_c(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    previous = {}
    for signum in FORWARDED:
        if signal.getsignal(signum) != signal.SIG_IGN:  # ignored on purpose (nohup): kept
            previous[signum] = signal.signal(signum, handler)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:  # a background job: interruptible now
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield caught
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def interrupted(summary: str, caught: Caught) -> Interrupted:
    """The one-line interruption to raise, with the exit status of the signal that came."""
    if caught.signum is None:
        return Interrupted(summary)
    name = signal.Signals(caught.signum).name
    error = Interrupted(f"{name} received; {summary}")
    error.exit_code = 128 + caught.signum
    return error
