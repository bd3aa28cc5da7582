"""Commands that do no heavy work load no deep-learning or web-UI stack.

Start-up time is measured by ``benchmarks/cli_startup.py``; this test holds the cause in
place: each light command runs in a fresh interpreter, which then reports whether torch,
transformers or gradio were imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("torch", "transformers", "gradio")
PROFILE = ROOT / "examples" / "power-limit-profile.estimated.csv"
ESTIMATE_PLAN = ROOT / "examples" / "sweep-estimate.yaml"
BENCH_PLAN = ROOT / "examples" / "sweep-tiny.yaml"


def _loaded_after(argv: list[str], cwd: Path) -> tuple[int, list[str], str]:
    code = (
        "import json, sys\n"
        "from mlenergy.cli import main\n"
        f"rc = main({argv!r})\n"
        f"print(json.dumps([rc, sorted(m for m in {FORBIDDEN!r} if m in sys.modules)]))\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    rc, loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    return rc, loaded, proc.stderr


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A store with the four estimates of the shipped estimate plan."""
    from mlenergy.cli import main

    data = tmp_path_factory.mktemp("light") / "data"
    assert main(["sweep", str(ESTIMATE_PLAN), "--data-dir", str(data), "--quiet"]) == 0
    return data


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["reference"],
        ["reference", "--regions"],
        ["estimate", "--help"],
        ["bench", "--help"],
        ["leaderboard", "--help"],
        ["runs", "list", "--data-dir", "{store}"],
        ["optimize", "power-limit", "--profile", str(PROFILE)],
        ["optimize", "power-limit", "--profile", str(PROFILE), "--json"],
        ["sweep", str(ESTIMATE_PLAN), "--dry-run", "--data-dir", "{store}"],
        ["sweep", str(BENCH_PLAN), "--dry-run", "--data-dir", "{store}"],
        [
            "estimate",
            "--model",
            "meta-llama/Llama-3.1-8B-Instruct",
            "--gpu",
            "H100",
            "--batch-size",
            "8",
            "--output-tokens",
            "100",
            "--region",
            "FRA",
        ],
    ],
    ids=lambda argv: " ".join(a for a in argv if not a.startswith(("/", "{"))),
)
def test_light_command_imports_no_heavy_stack(argv, store, tmp_path):
    argv = [a.replace("{store}", str(store)) for a in argv]
    rc, loaded, err = _loaded_after(argv, tmp_path)
    assert rc == 0, err
    assert loaded == [], f"mlenergy {' '.join(argv)} imported {loaded}"
