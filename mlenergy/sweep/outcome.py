"""What an executor reports for each finished run, and the interface both executors share."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from mlenergy.records import QualityResult, RunRecord
from mlenergy.sweep.spec import RunSpec

Record = RunRecord | QualityResult
OutcomeStatus = Literal["ok", "failed", "crashed", "timed out"]


@dataclass
class Outcome:
    """The end of one run.

    Attributes:
        spec: The run.
        status: ``ok`` (records made; a bench point may still be a failed record, e.g. out of
            memory), ``failed`` (the run raised), ``crashed`` (its worker process died on every
            attempt) or ``timed out`` (cancelled after ``timeout_s``).
        records: The records the run made (empty unless ``ok``).
        error: What went wrong, one line (``None`` when ``ok``).
        attempts: How many times the run was started.
    """

    spec: RunSpec
    status: OutcomeStatus
    records: list[Record] = field(default_factory=list)
    error: str | None = None
    attempts: int = 1


class Executor(Protocol):
    """Runs specs and yields each :class:`Outcome` as soon as that run ends."""

    name: str

    def run(
        self, specs: Sequence[RunSpec], on_start: Callable[[RunSpec], None]
    ) -> Iterator[Outcome]:
        """Run every spec; call ``on_start`` when one starts; yield outcomes as they end."""
        ...

    def close(self) -> None:
        """Release what the executor holds (a Ray connection); idempotent."""
        ...


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message`` of an exception (at most 500 characters)."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {line}"[:500] if line else type(exc).__name__
