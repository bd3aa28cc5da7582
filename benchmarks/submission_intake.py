"""Time and peak memory of validating large or hostile result bundles.

Each case runs in a fresh child process (so peak RSS is its own) and prints the wall time of
``validate_bundle``, the child's peak resident memory (``peak MB``, imports included; ``after
import`` is the peak before validating) and the Python heap the validation itself allocates
at its peak (``heap MB``, the validation repeated under ``tracemalloc``). The target: validating a
20 MB file stays under 500 MB.

Cases:
    20mb-bundle       a 20 MB Submission (one run, a 2.4-million-point power timeline):
                      refused at the 5 MB limit after reading 5 MB.
    4.9mb-timeline    the same shape just under the limit (a 580k-point timeline): parsed and
                      checked in full.
    4.9mb-bad-runs    4.9 MB of runs each with a schema error: problems capped.
    4.9mb-jsonl-junk  4.9 MB of JSON Lines, every line broken: problems capped.
    deep-nesting      100,000 nested arrays.
    huge-integer      a 100,000-digit integer.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/submission_intake.py``
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

TARGET_MB = 500.0


def _run(seed: int = 1) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "store"))
    from conftest import make_run  # the store tests' realistic record factory

    return make_run(seed=seed).model_dump(mode="json")


def _timeline_bundle(target_bytes: int) -> bytes:
    run = _run()

    def build(n: int) -> bytes:
        run["power_timeline"] = {
            "t_s": [round(i * 0.001, 6) for i in range(n)],
            "power_w": [450.123456] * n,
            "energy_source": "measured:zeus-nvml",
        }
        return json.dumps({"submitter": "Bench Lab", "runs": [run]}).encode()

    n = 1000
    for _ in range(4):  # scale the point count until the size is within 1% below the target
        size = len(build(n))
        n = int(n * target_bytes / size * 0.995)
    return build(n)


def _bad_runs_bundle(target_bytes: int) -> bytes:
    run = _run()
    run["colour"] = "red"
    one = len(json.dumps(run)) + 2
    runs = [run] * max(1, target_bytes // one)
    return json.dumps({"submitter": "Bench Lab", "runs": runs}).encode()


def _junk_lines(target_bytes: int) -> bytes:
    first = json.dumps(_run()).encode() + b"\n"  # one good line: the bundle is JSON Lines
    line = b'{"record_type": "run", "broken": }\n'
    return first + line * ((target_bytes - len(first)) // len(line))


def _case_bytes(name: str) -> bytes:
    mb = 1_000_000
    if name == "20mb-bundle":
        return _timeline_bundle(20 * mb)
    if name == "4.9mb-timeline":
        return _timeline_bundle(int(4.9 * mb))
    if name == "4.9mb-bad-runs":
        return _bad_runs_bundle(int(4.9 * mb))
    if name == "4.9mb-jsonl-junk":
        return _junk_lines(int(4.9 * mb))
    if name == "deep-nesting":
        return b"[" * 100_000 + b"]" * 100_000
    if name == "huge-integer":
        return b'{"submitter": "x", "runs": [' + b"9" * 100_000 + b"]}"
    raise ValueError(name)


CASES = (
    "20mb-bundle",
    "4.9mb-timeline",
    "4.9mb-bad-runs",
    "4.9mb-jsonl-junk",
    "deep-nesting",
    "huge-integer",
)


def _child(path: str) -> None:
    """Validate one file; print seconds, problems, and the outcome as JSON."""
    from mlenergy.store.validation import validate_bundle

    imported_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    report = validate_bundle(Path(path), submitter="Bench Lab")
    seconds = time.perf_counter() - start
    tracemalloc.start()  # the validation repeated, traced: the Python heap it needs
    validate_bundle(Path(path), submitter="Bench Lab")
    heap_mb = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    first = report.problems[0][:90] if report.problems else "ok"
    print(
        json.dumps(
            {
                "s": seconds,
                "peak_mb": peak_mb,
                "base_mb": imported_mb,
                "heap_mb": heap_mb,
                "n": len(report.problems),
                "first": first,
            }
        )
    )


def main() -> int:
    """Run every case in a child process and print one line per case."""
    print(
        f"{'case':<18} {'size MB':>8} {'time s':>7} {'peak MB':>8} {'after import':>12} "
        f"{'heap MB':>8} "
        f"{'problems':>8}  first"
    )
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name in CASES:
            path = Path(tmp) / f"{name}.json"
            path.write_bytes(_case_bytes(name))
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(path)],
                capture_output=True,
                text=True,
                check=True,
                timeout=600,
            ).stdout
            res = json.loads(out.strip().splitlines()[-1])
            worst = max(worst, res["peak_mb"])
            size = path.stat().st_size / 1e6
            print(
                f"{name:<18} {size:>8.1f} {res['s']:>7.2f} {res['peak_mb']:>8.0f} "
                f"{res['base_mb']:>12.0f} {res['heap_mb']:>8.1f} {res['n']:>8}  {res['first']}"
            )
    verdict = "under" if worst < TARGET_MB else "OVER"
    print(
        f"peak memory of the worst case: {worst:.0f} MB ({verdict} the {TARGET_MB:.0f} MB target)"
    )
    return 0 if worst < TARGET_MB else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        _child(sys.argv[2])
    else:
        sys.exit(main())
