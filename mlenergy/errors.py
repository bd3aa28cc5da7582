"""Errors that mean "the user asked for something wrong", shown as one line with exit code 2.

Every layer raises :class:`UserError` (or a subclass) for bad input; the CLI prints
``error: <what was wrong>. <how to fix it>`` and exits with status 2. Anything else is a bug
and keeps its traceback. Text that came from outside (a submitter's name, a problem that
quotes a file) is printed through :func:`terminal_text`. This module imports nothing else of
mlenergy.
"""

from __future__ import annotations

import re
import unicodedata


class UserError(Exception):
    """Bad input from the user: what was wrong and how to fix it.

    Args:
        problem: What was wrong, naming the offending field or value.
        fix: How to fix it (optional, but say it whenever you can).
    """

    exit_code = 2

    def __init__(self, problem: str, fix: str | None = None) -> None:
        self.problem = problem.rstrip(".")
        self.fix = fix
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """The one-line message shown to the user."""
        return f"{self.problem}. {self.fix}" if self.fix else f"{self.problem}."


class StoreError(UserError):
    """The data store cannot be read or written (unwritable folder, corrupted file)."""


_FIELD_PROBLEM = re.compile(r"^(?:line \d+|[\w\[\]]+)(?:\.[A-Za-z_][\w\[\]]*)+: ")
"""A problem that names a field: ``runs[0].workload.batch_size: must be positive``."""


class ValidationFailed(UserError):
    """A submission or record failed validation; ``problems`` lists every reason.

    The hint says "Fix the listed fields" only when a problem names a field
    (``where.field: ...``); otherwise it asks to fix the problems listed.

    Args:
        problems: One human-readable line per failed rule.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        names_field = any(_FIELD_PROBLEM.match(p) for p in self.problems)
        super().__init__(
            f"{len(self.problems)} validation problem(s): " + "; ".join(self.problems),
            "Fix the listed fields and submit again"
            if names_field
            else "Fix the problems listed and submit again",
        )

    @property
    def summary(self) -> str:
        """The headline without the problems, for when they are shown one per line."""
        return (
            f"{len(self.problems)} validation problem(s), listed below. Fix them and submit again"
        )


class Interrupted(Exception):
    """Ctrl-C during a long job, with a one-line account of what was kept.

    The job raises it from its ``except KeyboardInterrupt`` once it has cleaned up; the CLI
    prints ``interrupted: <summary>`` and exits with status 130. (It is not itself a
    ``KeyboardInterrupt``: the command-line framework would swallow that silently.)

    Args:
        summary: What was kept (e.g. how many points were stored, and where).
    """

    exit_code = 130

    def __init__(self, summary: str) -> None:
        self.summary = summary.rstrip(".")
        super().__init__(self.summary)


def first_line(exc: BaseException, limit: int | None = None) -> str:
    """The first line of an exception's message (its type name if empty), for one-line errors.

    Args:
        exc: The exception.
        limit: Cut the line to at most this many characters (``None``: whole line).
    """
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:limit] if limit is not None else line


def terminal_text(text: object, max_len: int = 200) -> str:
    """Return ``text`` safe for a terminal: control characters (ANSI escapes) made visible."""
    out = "".join(
        ch if unicodedata.category(ch)[0] != "C" else f"\\x{ord(ch):02x}" for ch in str(text)
    )
    return out if len(out) <= max_len else out[: max_len - 1] + "…"
