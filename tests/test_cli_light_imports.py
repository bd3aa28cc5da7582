"""Commands that do no heavy work load no deep-learning or web-UI stack.

Start-up time is measured by ``benchmarks/cli_startup.py``; this test holds the cause in
place: the light commands run in turn in one fresh interpreter, which reports after each one
whether torch, transformers or gradio were imported. An interpreter's modules only ever add
up, so the first command after which one of them is loaded is the one that loads it (and every
command after it fails too, naming that first one).
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
MARK = "@@light-command "


def _loaded_after_each(argvs: list[list[str]], cwd: Path) -> list[tuple[int, list[str]]]:
    """(exit code, forbidden modules loaded so far) after each command, in one fresh process."""
    code = (
        "import json, sys\n"
        "from mlenergy.cli import main\n"
        f"for argv in {argvs!r}:\n"
        "    rc = main(argv)\n"
        f"    loaded = sorted(m for m in {FORBIDDEN!r} if m in sys.modules)\n"
        f"    print({MARK!r} + json.dumps([rc, loaded]), flush=True)\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    lines = [x[len(MARK) :] for x in proc.stdout.splitlines() if x.startswith(MARK)]
    assert len(lines) == len(argvs), proc.stderr
    return [tuple(json.loads(x)) for x in lines]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A store with the four estimates of the shipped estimate plan."""
    from mlenergy.cli import main

    data = tmp_path_factory.mktemp("light") / "data"
    assert main(["sweep", str(ESTIMATE_PLAN), "--data-dir", str(data), "--quiet"]) == 0
    return data


ARGVS = [
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
]
"""The light commands (``{store}``: the module's store)."""


def _id(argv: list[str]) -> str:
    return " ".join(a for a in argv if not a.startswith(("/", "{")))


@pytest.fixture(scope="module")
def loaded(store, tmp_path_factory) -> list[tuple[int, list[str]]]:
    """(exit code, forbidden modules loaded once it has run) of each command of ARGVS."""
    argvs = [[a.replace("{store}", str(store)) for a in argv] for argv in ARGVS]
    return _loaded_after_each(argvs, tmp_path_factory.mktemp("light-run"))


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(ARGVS)), ids=[_id(a) for a in ARGVS])
def test_light_command_imports_no_heavy_stack(index, loaded):
    command = f"mlenergy {' '.join(ARGVS[index])}"
    rc, modules = loaded[index]
    assert rc == 0, f"{command} exited {rc}"
    first = next((ARGVS[i] for i, (_, mods) in enumerate(loaded) if mods), None)
    assert modules == [], f"{command}: {modules} loaded, first after mlenergy {first}"
