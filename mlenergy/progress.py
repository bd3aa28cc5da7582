"""Progress that reads well in terminals, notebooks and logs alike.

Every long call (bench, studies, sweeps) reports progress through :func:`progress_bar`:

* on a terminal (its stream is a TTY) or in a Jupyter kernel, a live bar: ``tqdm.auto`` draws a
  text bar on the terminal's standard error and an HTML widget in a notebook (where
  ``ipywidgets`` is installed);
* anywhere else (output piped to a file, ``make`` under CI, a log), plain lines instead of a
  redrawn bar: one when the work starts, one each time another tenth of it is done (or
  :data:`LINE_EVERY_S` seconds have passed), one per :meth:`ProgressBar.stage`, and one when it
  ends, each saying what is running. A ``tqdm`` bar written to a file is one line per redraw
  (about a thousand for the demo); these are a dozen.

A disabled bar is a no-op with the same methods, so callers never branch on it.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, TextIO

LINE_EVERY_S = 60.0
"""Without a terminal, the longest silence between two progress lines, seconds."""

STEPS_PER_LINE = 10
"""Without a terminal, a line each time another 1/10 of the total is done."""


def in_jupyter_kernel() -> bool:
    """Whether this code runs inside a Jupyter kernel (not merely a process that imported one)."""
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    shell = get_ipython() if get_ipython is not None else None
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def interactive(stream: TextIO) -> bool:
    """Whether a live bar can be drawn: ``stream`` is a terminal, or this is a Jupyter kernel."""
    if in_jupyter_kernel():
        return True
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:  # a closed stream
        return False


class _Lines:
    """The bar as plain lines on a stream that is not a terminal."""

    def __init__(self, total: int | None, description: str, unit: str, stream: TextIO) -> None:
        self.total, self.title, self.unit, self.stream = total, description, unit, stream
        self.done = 0
        self.text = ""
        self.postfix = ""
        self.start = self.last = time.monotonic()
        self.shown_tenths = 0
        of = f" ({total} {unit}" + ("" if total == 1 else "s") + ")" if total else ""
        self._write(f"started{of}")

    def _write(self, what: str) -> None:
        print(f"{self.title}: {what}", file=self.stream, flush=True)
        self.last = time.monotonic()

    def _status(self) -> str:
        elapsed = time.monotonic() - self.start
        if self.total:
            count = f"{100 * self.done // self.total}% ({self.done}/{self.total} {self.unit}"
        else:
            count = f"{self.done} {self.unit}"
        parts = [f"{count}, {elapsed:.0f} s" + (")" if self.total else "")]
        parts += [p for p in (self.text, self.postfix) if p]
        return "  ".join(parts)

    def update(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        tenths = STEPS_PER_LINE * self.done // self.total if self.total else 0
        if tenths > self.shown_tenths or now - self.last >= LINE_EVERY_S:
            self.shown_tenths = max(tenths, self.shown_tenths)
            self._write(self._status())

    def describe(self, text: str) -> None:
        self.text = text

    def note(self, text: str) -> None:
        self.postfix = text

    def stage(self, text: str) -> None:
        self.text, self.postfix = text, ""
        self._write(f"{text} (at {time.monotonic() - self.start:.0f} s)")

    def close(self, ended: str = "done") -> None:
        elapsed = time.monotonic() - self.start
        count = f"{self.done}/{self.total}" if self.total else str(self.done)
        self._write(f"{ended}, {count} {self.unit} in {elapsed:.0f} s")


class ProgressBar:
    """One progress bar: ``advance`` after each finished item, ``note`` for the status text.

    Use it as a context manager so the bar is closed when the work ends or fails.
    """

    def __init__(
        self,
        total: int | None,
        description: str,
        *,
        unit: str = "it",
        enabled: bool = True,
        file: TextIO | None = None,
    ) -> None:
        self._bar: Any = None
        self._lines: _Lines | None = None
        if not enabled:
            return
        stream = file if file is not None else sys.stderr
        if interactive(stream):
            # lazy: tqdm.auto costs ~0.2 s at start-up; only a bar that is shown needs it
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=total,
                desc=description,
                unit=unit,
                file=stream,
                dynamic_ncols=True,
                leave=True,
            )
        else:
            self._lines = _Lines(total, description, unit, stream)

    def advance(self, count: int = 1) -> None:
        """Mark ``count`` more items as finished."""
        if self._bar is not None:
            self._bar.update(count)
        elif self._lines is not None:
            self._lines.update(count)

    def note(self, text: str = "", **fields: object) -> None:
        """Show ``text`` and ``key=value`` fields after the bar (e.g. ``done=3 failed=1``)."""
        parts = [text] if text else []
        parts += [f"{key}={value}" for key, value in fields.items()]
        if self._bar is not None:
            self._bar.set_postfix_str(" ".join(parts), refresh=True)
        elif self._lines is not None:
            self._lines.note(" ".join(parts))

    def describe(self, description: str) -> None:
        """Replace the text before the bar (e.g. the item now running)."""
        if self._bar is not None:
            self._bar.set_description_str(description, refresh=True)
        elif self._lines is not None:
            self._lines.describe(description)

    def stage(self, text: str) -> None:
        """Say that the work moved on to another stage (e.g. ``writing the report``).

        On a terminal it replaces the bar's text; without one it is a line of its own.
        """
        if self._bar is not None:
            self._bar.set_postfix_str("", refresh=False)
            self._bar.set_description_str(text, refresh=True)
        elif self._lines is not None:
            self._lines.stage(text)

    def close(self, failed: bool = False) -> None:
        """Close the bar (idempotent); ``failed``: the work stopped on an error."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._lines is not None:
            self._lines.close("stopped" if failed else "done")
            self._lines = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(failed=exc_type is not None)


def progress_bar(
    total: int | None,
    description: str,
    *,
    unit: str = "it",
    enabled: bool = True,
    file: TextIO | None = None,
) -> ProgressBar:
    """A progress bar over ``total`` items (``None``: unknown total); see the module's rules.

    Args:
        total: Number of items, or ``None`` when unknown.
        description: Text before the bar (and at the head of each plain line).
        unit: Name of one item (``run``, ``model``, ``step``).
        enabled: ``False`` returns a bar that draws nothing (``--quiet``, ``--json``).
        file: Stream for the bar or lines (default: standard error).
    """
    return ProgressBar(total, description, unit=unit, enabled=enabled, file=file)
