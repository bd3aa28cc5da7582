"""In a real kernel: a failed %%energy cell leaves no stale result; the study displays compactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlenergy.testing.notebooks import execute_cells

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does

STUDIES = Path(__file__).resolve().parent.parent / "studies"


def _text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        parts.append(o.get("text", ""))
        parts.append(o.get("ename", ""))
        parts.extend(str(v) for v in o.get("data", {}).values())
    return "\n".join(parts)


def test_failed_cell_replaces_the_result_and_study_shows_a_summary(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    cells = execute_cells(
        [
            "%load_ext mlenergy.notebook",
            "%%energy --quiet\nx = sum(range(100000))",
            "print('first:', energy_result.energy_j > 0)",
            "%%energy --quiet\n1 / 0",
            "try:\n    energy_result.energy_j\nexcept Exception as exc:\n"
            "    print('after failure:', type(exc).__name__)",
            f"import sys\nsys.path.append({str(STUDIES)!r})\n"
            "from measured_fixture import fixture_runs, write_quality\n"
            "from pathlib import Path\nfrom mlenergy.store import RunStore\n"
            "RunStore('data').append(fixture_runs())\n"
            "from mlenergy.studies.measured_study import run_measured_study\n"
            "result = run_measured_study('data', quality_file=write_quality(Path('q.csv')),\n"
            "                            report_dir='report', progress=False,\n"
            "                            include_reference=False)\n"
            "result",
        ],
        tmp_path,
    )
    assert "first: True" in _text(cells[2])
    assert "ZeroDivisionError" in _text(cells[3])
    assert "no energy is kept" in _text(cells[3])
    assert "after failure: WindowFailed" in _text(cells[4])
    shown = cells[5].outputs[-1]["data"]
    assert shown["text/plain"].startswith("MeasuredStudyResult(")
    assert len(shown["text/plain"]) < 400  # not every table of the result
    html = shown["text/html"]
    assert "model x GPU x task rows" in html and "energy_per_correct_j" in html
    assert "measured:zeus-nvml" in html and "published:GPQA-Diamond" in html
