"""Fixtures of the measured study's tests (the data are in ``measured_fixture``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from measured_fixture import fixture_runs, write_quality

from mlenergy.store import RunStore
from mlenergy.studies.measured_study import run_measured_study


@pytest.fixture
def measured_store(tmp_path) -> Path:
    data = tmp_path / "data"
    RunStore(data).append(fixture_runs())
    return data


@pytest.fixture
def quality_file(tmp_path) -> Path:
    return write_quality(tmp_path / "quality.csv")


@pytest.fixture(scope="session")
def reference_study(tmp_path_factory):
    """The measured study of the shipped reference alone (a store folder that does not exist).

    Built once per session: it reads every reference table and bootstraps every fit (about a
    minute on 2 cores), and several tests read it without changing it.
    """
    tmp = tmp_path_factory.mktemp("study")
    return run_measured_study(tmp / "data", report_dir=tmp / "rep", progress=False)
