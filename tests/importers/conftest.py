"""Shared fixtures of the importer tests: the writers' files and model configs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

from importer_fixtures import MODEL_CONFIGS


@pytest.fixture
def configs_dir(tmp_path: Path) -> Path:
    """A folder of ``<org>__<name>.json`` model configs for the fixtures' models."""
    folder = tmp_path / "model-configs"
    folder.mkdir()
    for name, config in MODEL_CONFIGS.items():
        (folder / name).write_text(json.dumps(config))
    return folder


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A store folder that does not exist yet."""
    return tmp_path / "data"
