"""The %%energy magic and the measured window, executed in a real Jupyter kernel (nbclient).

The cells of every test run in one kernel, started once for the module, each test's cells in
turn in a folder of their own (a kernel's start and mlenergy's import cost seconds); each test
reads the outputs of its own cells, and any error in them fails it.
"""

from __future__ import annotations

import pytest

from mlenergy.testing.notebooks import execute_cells

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does

CELLS: dict[str, list[str]] = {}
"""Test name -> the sources of its cells."""


def _cells(test: str, sources: list[str]) -> list[str]:
    CELLS[test] = sources
    return sources


def _text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        parts.append(o.get("text", ""))
        parts.extend(str(v) for v in o.get("data", {}).values())
    return "\n".join(parts)


@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> dict[str, list]:
    """Test name -> its cells, executed in the module's kernel."""
    root = tmp_path_factory.mktemp("kernel")
    sources: list[str] = []
    spans = {}
    for test, cells in CELLS.items():
        (root / test).mkdir()
        sources.append(f"import os\nos.chdir({str(root / test)!r})")
        spans[test] = (len(sources), len(sources) + len(cells))
        sources += cells
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")  # the kernel inherits the environment
        executed = execute_cells(sources, root)
    return {test: executed[a:b] for test, (a, b) in spans.items()}


def _run(executed: dict[str, list], test: str) -> list:
    cells = executed[test]
    errors = [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, "\n".join("\n".join(o.get("traceback", [])) for o in errors)
    return cells


MEASURED_WINDOW_CANNOT_BE_READ_INSIDE_ITS_BLOCK = _cells(
    "test_measured_window_cannot_be_read_inside_its_block",
    [
        "from mlenergy.notebook import measured_window\n"
        "w = measured_window('blk')\n"
        "with w:\n"
        "    try:\n"
        "        w.energy_j\n"
        "    except Exception as exc:\n"
        "        print('inside:', type(exc).__name__)\n"
        "    x = sum(range(100000))\n"
        "print('after:', w.energy_j > 0, w.energy_source)\n"
        "w",
    ],
)


def test_measured_window_cannot_be_read_inside_its_block(executed):
    cells = _run(executed, "test_measured_window_cannot_be_read_inside_its_block")
    text = _text(cells[0])
    assert "inside: WindowStillOpen" in text
    assert "after: True modelled:cpu-tdp" in text
    assert "average power" in text  # the window's rich display, with no extension loaded


ENERGY_MAGIC_SHOWS_TABLE_KEEPS_RESULT_AND_SAVES = _cells(
    "test_energy_magic_shows_table_keeps_result_and_saves",
    [
        "%load_ext mlenergy.notebook",
        "%%energy --var e\ntotal = sum(i * i for i in range(300000))",
        "print(type(e).__name__, e.duration_s > 0, e.energy_j > 0, e.energy_source, total > 0)",
        "from mlenergy.records import ModelInfo\n"
        "info = ModelInfo(model_id='m/x', config_fingerprint='0' * 16, architecture='llama',\n"
        "                 is_moe=False, total_params=10, active_params=10, dtype='float32',\n"
        "                 weights='random')",
        "%%energy --save --model info --tokens 32 --data-dir store --quiet\n_ = sum(range(1000))",
        "from mlenergy.store import RunStore\n"
        "runs = RunStore('store').runs()\n"
        "print(len(runs), runs[0].workload.task, runs[0].energy_source)\n"
        "runs",
        "try:\n    get_ipython().run_cell_magic('energy', '--save', 'pass')\n"
        "except Exception as exc:\n    print('usage:', exc)",
    ],
)


def test_energy_magic_shows_table_keeps_result_and_saves(executed):
    cells = _run(executed, "test_energy_magic_shows_table_keeps_result_and_saves")
    table = _text(cells[1])
    for needle in ("time", "energy cpu:modelled", "average power", "modelled:cpu-tdp", " J<"):
        assert needle in table
    assert "MeasuredWindow True True modelled:cpu-tdp True" in _text(cells[2])
    assert "saved run" in _text(cells[4])
    listing = _text(cells[5])
    assert "1 notebook-cell modelled:cpu-tdp" in listing
    assert "1 run record(s)" in listing  # the list of records shows as an HTML table
    assert "--save needs --model" in _text(cells[6])


ESTIMATE_SHOWS_AS_A_FIELD_TABLE = _cells(
    "test_estimate_shows_as_a_field_table",
    [
        "%load_ext mlenergy.notebook",
        "from mlenergy.estimate import estimate\n"
        "estimate('meta-llama/Llama-3.1-8B-Instruct', 'H100', batch_size=8,\n"
        "         output_tokens=64, input_tokens=128)",
    ],
)


def test_estimate_shows_as_a_field_table(executed):
    cells = _run(executed, "test_estimate_shows_as_a_field_table")
    html = cells[1].outputs[0]["data"]["text/html"]
    assert "Estimate - energy source estimated:" in html
    assert "energy_per_token_j" in html and "J/token" in html
