"""Errors that mean "the user asked for something wrong", shown as one line with exit code 2.

Every layer raises :class:`UserError` (or a subclass) for bad input; the CLI prints
``error: <what was wrong>. <how to fix it>`` and exits with status 2. Anything else is a bug
and keeps its traceback. This module imports nothing else of mlenergy.
"""

from __future__ import annotations

import re


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
