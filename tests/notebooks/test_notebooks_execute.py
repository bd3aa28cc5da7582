"""The notebooks execute top to bottom on reduced parameters (papermill-style injection)."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from mlenergy.testing.notebooks import assert_plots_render

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _inject(nb, overrides: dict) -> None:
    """Insert a cell after the one tagged ``parameters`` that overrides its values."""
    idx = next(
        i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])
    )
    src = "\n".join(f"{k} = {v!r}" for k, v in overrides.items())
    cell = nbformat.v4.new_code_cell(src)
    cell.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(idx + 1, cell)


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the kernel inherits the environment
    monkeypatch.setenv("MLENERGY_CACHE_DIR", str(tmp_path / "cache"))


def _run(name: str, overrides: dict, cwd: Path):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in nb.cells:  # outputs are stripped in git
        if cell.cell_type == "code":
            assert not cell.get("outputs"), f"{name}: outputs must be stripped"
            assert cell.get("execution_count") is None
    _inject(nb, overrides)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    ).execute()
    return nb


def _text(nb) -> str:
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            out.append(o.get("text", ""))
            out.extend(str(v) for v in o.get("data", {}).values())
    return "\n".join(out)


def test_measure_quickstart_executes(tmp_path):
    nb = _run(
        "01_measure_quickstart.ipynb",
        {
            "MODEL": "preset:tiny-dense",
            "BATCH_SIZES": (1, 2),
            "INPUT_TOKENS": 8,
            "OUTPUT_TOKENS": 4,
            "REPEATS": 1,
        },
        tmp_path,
    )
    assert assert_plots_render(nb, "01_measure_quickstart.ipynb") >= 1
    text = _text(nb)
    assert "energy_per_token_j" in text
    assert "modelled:cpu-tdp" in text or "measured:" in text
    assert "average power" in text  # the %%energy table
    assert "run record(s)" in text  # a list of records as an HTML table


@pytest.mark.slow  # over ~20 s on 2 shared cores; left out by `make test-fast`
def test_dense_vs_moe_notebook_executes(tmp_path):
    nb = _run(
        "02_dense_vs_moe.ipynb",
        {
            "SIZE": "test",
            "DATA_DIR": str(tmp_path / "data"),
            "REPORT_DIR": str(tmp_path / "report"),
        },
        tmp_path,
    )
    assert assert_plots_render(nb, "02_dense_vs_moe.ipynb") >= 1
    text = _text(nb)
    assert "Verdict" in text
    assert (tmp_path / "report" / "index.html").is_file()


def test_dense_vs_moe_measured_notebook_executes(tmp_path):
    from mlenergy.reference import reference_dir

    ref = reference_dir()
    nb = _run(
        "05_dense_vs_moe_measured.ipynb",
        {
            "DATA_DIR": str(tmp_path / "data"),
            "REFERENCE": str(ref),
            "GPU": "B200",
            "REPORT_DIR": str(tmp_path / "report"),
        },
        tmp_path,
    )
    assert assert_plots_render(nb, "05_dense_vs_moe_measured.ipynb") >= 1
    text = _text(nb)
    assert "energy_per_correct_j" in text
    assert "published:GPQA-Diamond" in text
    assert "measured:zeus-nvml" in text
    assert (tmp_path / "report" / "summary.csv").is_file()
    assert "Host-bound runs:" in text and "read from the shipped reference" in text
    images = [
        o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
        if "image/png" in o.get("data", {})
    ]  # fmt: skip
    assert len(images) == 3  # every figure renders


def test_reduce_energy_notebook_executes(tmp_path):
    nb = _run(
        "04_reduce_energy.ipynb",
        {"MICROBATCHES": 3, "TIME_UNIT": 0.01, "BUDGET_W": 50_000},
        tmp_path,
    )
    assert assert_plots_render(nb, "04_reduce_energy.ipynb") == 4  # its four figures
    text = _text(nb)
    assert "saves" in text and "measured:perseus" in text
    assert "estimated:mlenergy" in text


@pytest.mark.slow  # the estimator's cross-validation; tests/estimate runs it for its numbers
def test_estimator_notebook_shows_its_figures(tmp_path):
    nb = _run(
        "03_estimator.ipynb",
        {"FOLDS": 3, "BATCH_SIZES": [1, 64], "CLOCKS_MHZ": [600, 1200, 1980]},
        tmp_path,
    )
    assert assert_plots_render(nb, "03_estimator.ipynb") >= 3


def test_every_notebook_is_checked_for_figures():
    tests = Path(__file__).resolve().parents[1]
    text = "\n".join(p.read_text(encoding="utf-8") for p in tests.rglob("test_*.py"))
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        assert f'assert_plots_render(nb, "{path.name}")' in text, path.name
