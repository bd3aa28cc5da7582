"""Several trainings in turns, one meter window each (A B C A B C ...).

The dense-vs-MoE study trains its models this way so that a drift of the machine's load falls
on every model alike: window ``k`` of every model is measured in round ``k``. One training runs
at a time (each in its own thread, the others waiting), so no window holds another model's
work; a training holds the turn from one ``begin`` of its meter window to its next (the
window plus the evaluation after it).
"""

from __future__ import annotations

import threading
from typing import Any


class Aborted(Exception):
    """Raised in a training's thread when another one failed or the study was interrupted."""


class Turns:
    """Lets several trainings run one at a time, in turn: A B C A B C ...

    Each training holds the turn from one ``begin`` of its meter window to its next (a window
    plus the evaluation after it), then hands it on.
    """

    def __init__(self, count: int) -> None:
        self._cond = threading.Condition()
        self._queue = list(range(count))
        self._aborted = False

    def wait(self, i: int) -> None:
        """Block until it is ``i``'s turn.

        Raises:
            Aborted: If :meth:`abort` was called.
        """
        with self._cond:
            self._cond.wait_for(lambda: self._aborted or self._queue[0] == i)
            if self._aborted:
                raise Aborted

    def pass_on(self, i: int) -> None:
        """Hand the turn to the next training and wait for ``i``'s next turn."""
        with self._cond:
            self._queue.remove(i)
            self._queue.append(i)
            self._cond.notify_all()
        self.wait(i)

    def leave(self, i: int) -> None:
        """Take ``i`` out of the rotation (its training ended)."""
        with self._cond:
            if i in self._queue:
                self._queue.remove(i)
            self._cond.notify_all()

    def abort(self) -> None:
        """Make every waiting training raise :class:`Aborted`."""
        with self._cond:
            self._aborted = True
            self._cond.notify_all()


class TurnMeter:
    """The study's meter as one training sees it: every window after the first waits its turn."""

    def __init__(self, meter: Any, turns: Turns, index: int, on_turn: Any = None) -> None:
        self._meter, self._turns, self._index, self._on_turn = meter, turns, index, on_turn
        self._started = False

    def begin(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Wait for this training's turn (after its first window), then open the window."""
        if self._started:
            self._turns.pass_on(self._index)
        self._started = True
        if self._on_turn is not None:
            self._on_turn()
        return self._meter.begin(name, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._meter, name)


def train_in_turns(jobs: list[Any]) -> list[Any]:
    """Run trainings in turns, one meter window each; return their results in order.

    Args:
        jobs: Callables ``job(wrap)``; ``wrap(meter, on_turn)`` gives the meter the job must
            train with (its windows wait their turn; ``on_turn`` is called as each begins).

    Raises:
        The first error of a job (in job order), or ``KeyboardInterrupt`` from this thread,
        after every job has stopped.
    """
    turns = Turns(len(jobs))
    results: list[Any] = [None] * len(jobs)
    errors: list[BaseException | None] = [None] * len(jobs)

    def work(i: int) -> None:
        try:
            turns.wait(i)
            results[i] = jobs[i](lambda m, on_turn=None: TurnMeter(m, turns, i, on_turn))
        except Aborted:
            pass
        except BaseException as exc:  # re-raised in the calling thread
            errors[i] = exc
            turns.abort()
        finally:
            turns.leave(i)

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(jobs))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except BaseException:
        turns.abort()
        for t in threads:
            t.join()
        raise
    for exc in errors:
        if exc is not None:
            raise exc
    return results
