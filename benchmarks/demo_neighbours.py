"""Does the demo's verdict follow the neighbours? `mlenergy demo` twice: quiet, then beside hogs.

Runs the toy dense-vs-MoE study exactly as ``make demo`` does (``mlenergy demo``, the
default ``tiny`` size, one seed), each time in a fresh temporary folder (its own store and
report): run A on the machine as it is, run B with two CPU-bound neighbour processes
(``while True: pass``) that this script starts before the run and stops by their process
ids afterwards. It then reads each report's ``verdicts.csv`` (every MoE/dense ratio the
conclusion calls, with its interval and its less / more / tie verdict) and prints one line
per ratio: the verdict and the ratio of A and of B, their relative difference
``max(A/B, B/A) - 1``, and PASS when both verdicts agree and the difference is at most 15%.
It exits 1 if any line fails. It also counts the verdicts each report says hold under the
load shift it knows (``holds_under_load``: :data:`mlenergy.studies.verdicts.CPU_LOAD_SHIFT`)
and how many of those agree: a verdict marked as holding that flips is a failure of that
rule, not only of the goal.

Run (10-20 minutes on 2 cores)::

    OMP_NUM_THREADS=1 timeout 2400 .venv/bin/python benchmarks/demo_neighbours.py

``--keep DIR`` keeps both runs' folders under ``DIR``; ``--from-reports A B`` compares two
report folders already written (no runs). On a shared machine run A is not quiet: the load
average printed beside each run says how busy the machine was.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

os.environ.setdefault("OMP_NUM_THREADS", "1")

TOLERANCE = 0.15
"""Largest relative difference of a ratio between the two runs that passes."""

KEYS = ["comparison", "variant", "baseline", "measure", "batch_size"]


def start_neighbours(count: int) -> list[subprocess.Popen]:
    """Start ``count`` busy-loop processes, each in its own session; they run until stopped."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", "while True: pass"],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]
    time.sleep(0.5)  # let them reach their loops
    return procs


def stop_neighbours(procs: list[subprocess.Popen]) -> None:
    """Stop the neighbours this script started, by their process ids, and reap them."""
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


def run_demo(folder: Path, timeout_s: float) -> dict:
    """Run ``mlenergy demo`` with its store and report in ``folder``; return run figures."""
    exe = Path(sys.executable).with_name("mlenergy")
    cmd = [str(exe), "demo", "--data-dir", str(folder / "data")]
    cmd += ["--report-dir", str(folder / "report")]
    load_before = os.getloadavg()[0]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(folder / "demo.log", "w", encoding="utf-8") as log:
        subprocess.run(
            cmd, cwd=folder, stdout=log, stderr=subprocess.STDOUT, check=True, timeout=timeout_s
        )
    wall = time.perf_counter() - t0
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return {
        "report": str(folder / "report"),
        "wall_s": wall,
        "cpu_s": cpu,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }


def read_verdicts(report: Path) -> pd.DataFrame:
    """The report's ``verdicts.csv``."""
    table = pd.read_csv(report / "verdicts.csv")
    table["batch_size"] = table["batch_size"].astype("Int64")
    return table


def compare(a: pd.DataFrame, b: pd.DataFrame, tolerance: float = TOLERANCE) -> pd.DataFrame:
    """Join two runs' verdict tables; ``diff`` is ``max(A/B, B/A) - 1``; ``ok`` the rule."""
    both = a.merge(b, on=KEYS, how="outer", suffixes=("_a", "_b"), indicator=True)
    both["diff"] = [
        max(x / y, y / x) - 1 if x > 0 and y > 0 else float("nan")
        for x, y in zip(both["ratio_a"], both["ratio_b"], strict=True)
    ]
    both["ok"] = (
        (both["_merge"] == "both")
        & (both["verdict_a"] == both["verdict_b"])
        & (both["diff"] <= tolerance)
    )
    return both.drop(columns="_merge")


def interval(row: pd.Series, side: str) -> str:
    """``0.93-1.07`` from the ratio's interval, ``band`` when it has none."""
    lo, hi = row[f"low_{side}"], row[f"high_{side}"]
    return f"{lo:.2f}-{hi:.2f}" if pd.notna(lo) and pd.notna(hi) else "band"


def print_table(both: pd.DataFrame) -> None:
    """One line per ratio: verdicts, ratios, intervals, difference, PASS/FAIL."""
    head = (
        f"{'comparison':<15}{'MoE':<23}{'dense':<11}{'measure':<13}"
        f"{'verdict A':>10}{'verdict B':>10}{'ratio A':>9}{'ratio B':>9}"
        f"{'interval A':>12}{'interval B':>12}{'diff':>7}  result"
    )
    print(head)
    print("-" * len(head))
    for _, r in both.iterrows():
        measure = "training" if r["measure"] == "training" else f"J/tok b={r['batch_size']}"
        print(
            f"{r['comparison']:<15}{r['variant']:<23}{r['baseline']:<11}{measure:<13}"
            f"{r['verdict_a']!s:>10}{r['verdict_b']!s:>10}{r['ratio_a']:>9.3f}"
            f"{r['ratio_b']:>9.3f}{interval(r, 'a'):>12}{interval(r, 'b'):>12}"
            f"{100 * r['diff']:>6.1f}%  {'PASS' if r['ok'] else 'FAIL'}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--neighbours", type=int, default=2, help="busy loops beside run B")
    parser.add_argument("--keep", type=Path, help="keep both runs' folders under this folder")
    parser.add_argument(
        "--from-reports", nargs=2, type=Path, metavar=("A", "B"), help="compare two reports"
    )
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="per demo run")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)

    runs: dict[str, dict] = {}
    if args.from_reports:
        reports = list(args.from_reports)
    else:
        base = args.keep or Path(tempfile.mkdtemp(prefix="demo-neighbours-"))
        cleanup = args.keep is None
        base.mkdir(parents=True, exist_ok=True)
        try:
            for name, hogs in (("A", 0), ("B", args.neighbours)):
                folder = Path(tempfile.mkdtemp(prefix=f"run-{name}-", dir=base))
                procs = start_neighbours(hogs) if hogs else []
                try:
                    runs[name] = {"neighbours": hogs, **run_demo(folder, args.timeout_s)}
                finally:
                    stop_neighbours(procs)
                print(
                    f"run {name}: {hogs} neighbour(s), {runs[name]['wall_s']:.0f} s wall, "
                    f"{runs[name]['cpu_s']:.0f} s CPU, load average "
                    f"{runs[name]['load_before']:.1f} before / {runs[name]['load_after']:.1f} "
                    f"after; report {runs[name]['report']}",
                    flush=True,
                )
            reports = [Path(runs["A"]["report"]), Path(runs["B"]["report"])]
            both = compare(read_verdicts(reports[0]), read_verdicts(reports[1]))
        finally:
            if cleanup:
                import shutil

                shutil.rmtree(base, ignore_errors=True)
    if args.from_reports:
        both = compare(read_verdicts(reports[0]), read_verdicts(reports[1]))
    print(
        f"\nA: the machine as it was (not quiet when others share it); B: with "
        f"{args.neighbours} CPU-bound neighbours. PASS: same verdict and ratios within "
        f"{TOLERANCE:.0%} (diff = max(A/B, B/A) - 1).\n"
    )
    print_table(both)
    failed = int((~both["ok"]).sum())
    print(f"\n{len(both) - failed} of {len(both)} pass; {'FAIL' if failed else 'PASS'}")
    if {"holds_under_load_a", "holds_under_load_b"} <= set(both.columns):
        held = both[(both["holds_under_load_a"] == True) & (both["holds_under_load_b"] == True)]  # noqa: E712
        agree = int((held["verdict_a"] == held["verdict_b"]).sum())
        print(
            f"verdicts both reports say hold under the measured load shift: {len(held)}; "
            f"of those, {agree} agree"
        )
    if args.json:
        out = {"runs": runs, "rows": json.loads(both.to_json(orient="records"))}
        args.json.write_text(json.dumps(out, indent=2), encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
