"""Time and peak memory of validating large or hostile result bundles, and what is refused.

Each case runs in a fresh child process (so peak RSS is its own) and prints the wall time of
``validate_bundle``, the child's peak resident memory (``peak MB``, imports included; ``after
import`` is the peak before validating) and the Python heap the validation itself allocates
at its peak (``heap MB``, the validation repeated under ``tracemalloc``), with the first
problem (the refusal). The target: validating any bundle stays under 500 MB.

Then the ``mlenergy submit`` command itself runs on the 4.8 MB bundle of 1.6 million empty
records (JSON Lines, an array, a Submission) and on an empty bundle (its start-up: imports,
reading the store and the queue), each in a child whose peak RSS is read from ``wait4``. The
target: under 300 MB.

Cases:
    20mb-bundle       a 20 MB Submission (one run, a 2.4-million-point power timeline):
                      refused at the 5 MB limit after reading 5 MB.
    4.9mb-timeline    the same shape just under the limit (a 580k-point timeline): parsed and
                      checked in full.
    4.9mb-bad-runs    4.9 MB of runs each with a schema error: checking stops at 200 problems.
    4.9mb-jsonl-junk  4.9 MB of JSON Lines, every line broken: likewise.
    4.8mb-empty-*     1.6 million empty records as JSON Lines, an array or a Submission.
    1m-objects-in-run one run whose phases hold a million empty objects: refused unbuilt.
    deep-nesting      100,000 nested arrays.
    huge-integer      a 100,000-digit integer.
    lookalike-name    submitter "МL.ENERGY Leaderboard v3" (Cyrillic М).
    hidden-name       a right-to-left override rendering as a reserved name.
    future-run        a run created in 2999.
    reversed-run      a run that ends 400,000 days before it starts.
    request-energies  a serving run whose requests add up to 4e6 J.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/submission_intake.py``
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

TARGET_MB = 500.0
COMMAND_TARGET_MB = 300.0
EMPTY_RECORDS = 1_600_000


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


def _hostile(name: str) -> bytes:
    """One run with the hostile change ``name`` made (see the module docstring)."""
    from datetime import UTC, datetime, timedelta

    run = _run(seed=7)
    submitter = "Bench Lab"
    if name == "lookalike-name":
        submitter = "\u041cL.ENERGY Leaderboard v3"
    elif name == "hidden-name":
        submitter = "\u202e3v draobredaeL YGRENE.LM"
    elif name == "future-run":
        run["created_at"] = "2999-01-01T00:00:00Z"
    elif name == "reversed-run":
        start = datetime(2026, 11, 1, tzinfo=UTC)
        run["started_at"] = start.isoformat()
        run["ended_at"] = (start - timedelta(days=400_000)).isoformat()
    elif name == "request-energies":
        req = next(p for p in run["phases"] if p["phase"] == "request")
        run["workload"]["method"] = "serving-steady-state"
        run["serving"] = {
            "endpoint_api": "chat",
            "concurrency": 8,
            "max_output_tokens": 256,
            "ignore_eos": True,
            "requests_completed": 4,
            "input_tokens_total": 2048,
            "output_tokens_total": req["tokens"],
            "window_start_s": 0.0,
            "window_end_s": req["duration_s"],
            "window_output_tokens": req["tokens"],
            "achieved_concurrency": 8.0,
            "run_duration_s": req["duration_s"] * 1.2,
            "run_energy_j": req["energy_j"] * 1.2,
            "request_energies_j": [1e6] * 4,
            "request_output_tokens": [req["tokens"] // 4] * 4,
            "split_energy_j": 4e6,
        }
    return json.dumps({"submitter": submitter, "runs": [run]}).encode()


HOSTILE = ("lookalike-name", "hidden-name", "future-run", "reversed-run", "request-energies")


def _empty_records(form: str) -> bytes:
    if form == "jsonl":
        return b"{}\n" * EMPTY_RECORDS
    items = b"{}," * (EMPTY_RECORDS - 1) + b"{}"
    if form == "array":
        return b"[" + items + b"]"
    return b'{"submitter": "Bench Lab", "runs": [' + items + b"]}"


def _case_bytes(name: str) -> bytes:
    mb = 1_000_000
    if name.startswith("4.8mb-empty-"):
        return _empty_records(name.removeprefix("4.8mb-empty-"))
    if name == "1m-objects-in-run":
        return b'{"submitter": "x", "runs": [{"phases": [' + b"{}," * 1_000_000 + b"{}]}]}"
    if name in HOSTILE:
        return _hostile(name)
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
    "4.8mb-empty-jsonl",
    "4.8mb-empty-array",
    "4.8mb-empty-submission",
    "1m-objects-in-run",
    "deep-nesting",
    "huge-integer",
    *HOSTILE,
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
    first = report.problems[0][:110] if report.problems else "ok"
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


_CLI = "import sys; from mlenergy.cli import main; sys.exit(main(sys.argv[1:]))"


def _command_peak(bundle: Path, data_dir: Path) -> tuple[float, float, int, str]:
    """``mlenergy submit`` on ``bundle``: (peak RSS MB, seconds, exit status, last line)."""
    argv = [sys.executable, "-c", _CLI, "submit", str(bundle), "--submitter", "Bench Lab"]
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*argv, "--data-dir", str(data_dir)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    last = out.strip().splitlines()[-1].strip() if out.strip() else ""
    return usage.ru_maxrss / 1024, seconds, proc.returncode, last


def _commands(tmp: Path) -> float:
    """Print the command's peak on the empty-records bundles beside its start-up."""
    print(f"\n{'mlenergy submit on':<24} {'peak MB':>8} {'time s':>7} {'exit':>4}  last line")
    empty = tmp / "empty.json"
    empty.write_bytes(b"")
    worst = 0.0
    for label, path in [("an empty file (start-up)", empty)] + [
        (f"4.8mb-empty-{form}", tmp / f"4.8mb-empty-{form}.json")
        for form in ("jsonl", "array", "submission")
    ]:
        if not path.exists():
            path.write_bytes(_case_bytes(label))
        peak, seconds, code, last = _command_peak(path, tmp / "data")
        if path != empty:
            worst = max(worst, peak)
        print(f"{label:<24} {peak:>8.0f} {seconds:>7.1f} {code:>4}  {last[:90]}")
    return worst


def main() -> int:
    """Run every case in a child process and print one line per case."""
    print(
        f"{'case':<22} {'size MB':>8} {'time s':>7} {'peak MB':>8} {'after import':>12} "
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
                f"{name:<22} {size:>8.1f} {res['s']:>7.2f} {res['peak_mb']:>8.0f} "
                f"{res['base_mb']:>12.0f} {res['heap_mb']:>8.1f} {res['n']:>8}  {res['first']}"
            )
        command = _commands(Path(tmp))
    verdict = "under" if worst < TARGET_MB else "OVER"
    print(
        f"peak memory of the worst case: {worst:.0f} MB ({verdict} the {TARGET_MB:.0f} MB target)"
    )
    verdict = "under" if command < COMMAND_TARGET_MB else "OVER"
    print(
        f"peak of mlenergy submit on 1.6 million empty records: {command:.0f} MB ({verdict} the "
        f"{COMMAND_TARGET_MB:.0f} MB target)"
    )
    return 0 if worst < TARGET_MB and command < COMMAND_TARGET_MB else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        _child(sys.argv[2])
    else:
        sys.exit(main())
