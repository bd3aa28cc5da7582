"""Fixtures of the measured study's tests (the data are in ``measured_fixture``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from measured_fixture import fixture_runs, write_quality

from mlenergy.store import RunStore


@pytest.fixture
def measured_store(tmp_path) -> Path:
    data = tmp_path / "data"
    RunStore(data).append(fixture_runs())
    return data


@pytest.fixture
def quality_file(tmp_path) -> Path:
    return write_quality(tmp_path / "quality.csv")
