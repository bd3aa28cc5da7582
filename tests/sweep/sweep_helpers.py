"""Helpers of the sweep tests: the tiny plan and the CLI run in-process."""

from __future__ import annotations

import contextlib
import io

TINY = {
    "name": "tiny",
    "models": ["preset:tiny-dense"],
    "batch_sizes": [1, 2],
    "input_tokens": [2],
    "output_tokens": [2],
    "repeats": 1,
    "devices": ["cpu"],
}


def run_cli(*args: str) -> tuple[int, str, str]:
    """Run ``mlenergy <args>`` in this process; return exit code, stdout and stderr."""
    from mlenergy.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()
