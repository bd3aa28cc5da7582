"""Shared helpers of the sweep tests: tiny plans written as YAML, the CLI run in-process."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
import torch
import yaml

from mlenergy.measure.emulated import install_no_devices

torch.set_num_threads(1)

TINY = {
    "name": "tiny",
    "models": ["preset:tiny-dense"],
    "batch_sizes": [1, 2],
    "input_tokens": [2],
    "output_tokens": [2],
    "repeats": 1,
    "devices": ["cpu"],
}


@pytest.fixture(autouse=True)
def _no_devices():
    """Hide real GPUs and RAPL: every bench run uses the CPU power model on any machine."""
    with install_no_devices():
        yield


@pytest.fixture
def write_plan(tmp_path):
    """Write ``TINY`` updated with ``changes`` (a key set to ``None`` is removed) to a file."""

    def _write(name: str = "plan.yaml", **changes) -> Path:
        data = {**TINY, **changes}
        data = {k: v for k, v in data.items() if v is not None}
        path = tmp_path / name
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        return path

    return _write


def run_cli(*args: str) -> tuple[int, str, str]:
    """Run ``mlenergy <args>`` in this process; return exit code, stdout and stderr."""
    from mlenergy.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue(), err.getvalue()
