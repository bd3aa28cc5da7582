"""Execute notebooks/03_estimator.ipynb on small parameters (nbclient)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "03_estimator.ipynb"


def test_notebook_03_runs(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "strip outputs"
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    params.source += "\nFOLDS = 3\nBATCH_SIZES = [1, 64]\nCLOCKS_MHZ = [600, 1200, 1980]\n"
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    text = "".join(
        o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
    )
    assert "energy_median" in text and "H100-2xBW" in text
