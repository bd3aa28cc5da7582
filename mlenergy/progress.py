"""Progress bars that render in terminals and in Jupyter notebooks alike.

Every long call (bench, studies, sweeps) reports progress through :func:`progress_bar`. It is a
thin layer over ``tqdm.auto``, which draws a text bar on a terminal's standard error and an HTML
widget in a notebook (where ``ipywidgets`` is installed; a text bar otherwise). A disabled bar
is a no-op with the same methods, so callers never branch on it.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any, TextIO


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
        if enabled:
            # lazy: tqdm.auto costs ~0.2 s at start-up; only a bar that is shown needs it
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=total,
                desc=description,
                unit=unit,
                file=file if file is not None else sys.stderr,
                dynamic_ncols=True,
                leave=True,
            )

    def advance(self, count: int = 1) -> None:
        """Mark ``count`` more items as finished."""
        if self._bar is not None:
            self._bar.update(count)

    def note(self, text: str = "", **fields: object) -> None:
        """Show ``text`` and ``key=value`` fields after the bar (e.g. ``done=3 failed=1``)."""
        if self._bar is not None:
            parts = [text] if text else []
            parts += [f"{key}={value}" for key, value in fields.items()]
            self._bar.set_postfix_str(" ".join(parts), refresh=True)

    def describe(self, description: str) -> None:
        """Replace the text before the bar (e.g. the item now running)."""
        if self._bar is not None:
            self._bar.set_description_str(description, refresh=True)

    def close(self) -> None:
        """Close the bar (idempotent)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def progress_bar(
    total: int | None,
    description: str,
    *,
    unit: str = "it",
    enabled: bool = True,
    file: TextIO | None = None,
) -> ProgressBar:
    """A progress bar over ``total`` items (``None``: unknown total), on stderr or in a notebook.

    Args:
        total: Number of items, or ``None`` when unknown.
        description: Text before the bar.
        unit: Name of one item (``run``, ``model``, ``step``).
        enabled: ``False`` returns a bar that draws nothing (``--quiet``, ``--json``).
        file: Stream for the text bar (default: standard error).
    """
    return ProgressBar(total, description, unit=unit, enabled=enabled, file=file)
