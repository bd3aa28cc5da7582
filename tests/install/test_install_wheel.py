"""A plain (non-editable) install carries every file the package reads at run time."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does

ROOT = Path(__file__).resolve().parents[2]
# Files read next to the modules, by Path(__file__).parent: missing from a wheel, the
# leaderboard loses its style sheet and the estimator its coefficients and catalogs.
PACKAGE_DATA = (
    "mlenergy/leaderboard/leaderboard.css",
    "mlenergy/estimate/coefficients.json",
    "mlenergy/estimate/coefficients.report.json",
    "mlenergy/estimate/engines.json",
    "mlenergy/estimate/model_families.json",
    "mlenergy/estimate/task_defaults.json",
)
REFERENCE = "mlenergy/reference/"
"""The shipped reference data: every file under it must be in the wheel (checked below)."""


def _tracked_data_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "mlenergy"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return [
        f
        for f in out.stdout.split()
        if not f.endswith((".py", ".md")) and not f.startswith(REFERENCE)
    ]


def test_every_non_python_file_of_the_package_is_known_package_data():
    assert sorted(_tracked_data_files()) == sorted(PACKAGE_DATA)


def test_the_wheel_holds_every_module_and_the_package_data(tmp_path):
    src = tmp_path / "src"
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "mlenergy", src / "mlenergy", ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    out = subprocess.run(
        [*cmd, "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("mlenergy_lab-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {str(p.relative_to(src)) for p in (src / "mlenergy").rglob("*.py")}
    assert modules <= names, sorted(modules - names)[:10]
    assert set(PACKAGE_DATA) <= names, sorted(set(PACKAGE_DATA) - names)
    reference = {str(p.relative_to(src)) for p in (src / REFERENCE).rglob("*") if p.is_file()}
    assert reference <= names, sorted(reference - names)[:10]
    assert not any(n.startswith("mlenergy/__init__") for n in names)  # stays a namespace package
