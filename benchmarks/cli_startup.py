"""Wall time of ``mlenergy`` commands that do no heavy work, and what their imports cost.

Each command runs in a fresh interpreter (the installed console script's code path,
``mlenergy.cli.main``) ``--repeats`` times; the minimum and median wall times are printed,
then, per command, the heaviest top-level packages from ``python -X importtime``. The store
that ``runs list`` and the dry run read is filled first, from the shipped estimate plan.

    python benchmarks/cli_startup.py [--repeats 3] [--top 5]

Commands doing no heavy work should finish in under 2 s on an idle 2-core machine; on a
shared machine compare the figures of one run with each other rather than with that target.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "gradio", "pandas", "duckdb", "zeus", "sklearn", "lowtime")


def light_commands(data: Path) -> list[list[str]]:
    """The commands measured (arguments after ``mlenergy``)."""
    return [
        ["--help"],
        ["--version"],
        ["reference"],
        ["reference", "--regions"],
        ["estimate", "--help"],
        ["bench", "--help"],
        ["runs", "list", "--data-dir", str(data)],
        [
            "optimize",
            "power-limit",
            "--profile",
            str(ROOT / "examples/power-limit-profile.estimated.csv"),
        ],
        ["sweep", str(ROOT / "examples/sweep-estimate.yaml"), "--dry-run", "--data-dir", str(data)],
        ["sweep", str(ROOT / "examples/sweep-tiny.yaml"), "--dry-run", "--data-dir", str(data)],
    ]


def _code(argv: list[str], report_modules: bool = False) -> str:
    tail = (
        f"; import sys, json; print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)),"
        " file=sys.stderr)"
        if report_modules
        else ""
    )
    return f"from mlenergy.cli import main; main({argv!r}){tail}"


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def wall_s(argv: list[str]) -> float:
    """Seconds one fresh interpreter takes to run the command."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", _code(argv)], cwd=ROOT, env=_env(), capture_output=True, check=False
    )
    return time.perf_counter() - start


def import_offenders(argv: list[str], top: int) -> tuple[list[tuple[str, float]], str]:
    """The ``top`` packages by import time (own time of their modules, s); heavy ones loaded."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _code(argv, report_modules=True)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    totals: dict[str, float] = defaultdict(float)
    loaded = ""
    for line in proc.stderr.splitlines():
        if line.startswith("["):
            loaded = line
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        totals[name.strip().split(".")[0]] += int(own) / 1e6
    ranked = sorted(totals.items(), key=lambda kv: kv[1], reverse=True)[:top]
    return ranked, loaded


def fill_store(data: Path) -> None:
    """Four estimate records in ``data`` (the shipped estimate plan), for ``runs list``."""
    plan = ROOT / "examples/sweep-estimate.yaml"
    argv = ["sweep", str(plan), "--data-dir", str(data), "--quiet"]
    subprocess.run(
        [sys.executable, "-c", _code(argv)], cwd=ROOT, env=_env(), check=True, capture_output=True
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        fill_store(data)
        print(f"{'command':72s} {'min s':>6s} {'median s':>8s}  heavy packages loaded")
        details = []
        for argv in light_commands(data):
            times = [wall_s(argv) for _ in range(args.repeats)]
            offenders, loaded = import_offenders(argv, args.top)
            label = " ".join(a.replace(str(ROOT) + "/", "").replace(tmp, "TMP") for a in argv)
            print(
                f"mlenergy {label:63s} {min(times):6.2f} {statistics.median(times):8.2f}  {loaded}"
            )
            details.append((label, offenders))
        print("\nimport time by package (own time of its modules, s; one -X importtime run each):")
        for label, offenders in details:
            shown = ", ".join(f"{name} {s:.2f}" for name, s in offenders)
            print(f"  mlenergy {label}: {shown}")


if __name__ == "__main__":
    main()
