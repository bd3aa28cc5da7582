"""Fixtures of the sweep tests: no real devices, tiny plans written as YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from sweep_helpers import TINY

from mlenergy.measure.emulated import install_no_devices

torch.set_num_threads(1)


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
