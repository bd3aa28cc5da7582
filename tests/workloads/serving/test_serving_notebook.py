"""Notebook 06 runs top to bottom on a tiny launched server, and every plot renders."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from mlenergy.testing.notebooks import assert_plots_render

NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "06_serving_energy.ipynb"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_serving_notebook_executes_and_plots(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MLENERGY_CACHE_DIR", str(tmp_path / "cache"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None
    idx = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    # one level: the notebook launches a fresh server per level (tens of seconds each here)
    small = 'MODEL_KIND = "dense"\nLEVELS = (2,)\nNUM_REQUESTS = 12\nMAX_OUTPUT_TOKENS = 24'
    nb.cells.insert(idx + 1, nbformat.v4.new_code_cell(small))
    NotebookClient(nb, timeout=500, kernel_name="python3").execute(cwd=str(tmp_path))
    assert assert_plots_render(nb, "06_serving_energy.ipynb") >= 1
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 1  # the figure with its three panels
    text = "\n".join(str(o.get("data", {}).get("text/plain", "")) for c in nb.cells
                     for o in c.get("outputs", []))  # fmt: skip
    assert "steady mJ/token" in text
