"""Ctrl-C in a real ``mlenergy sweep`` process, then a resume: the union is the whole sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlenergy.store import RunStore
from mlenergy.sweep import KEY_TAG, check_plan, load_plan

ROOT = Path(__file__).resolve().parents[2]


def _start(plan: Path, data: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    code = "from mlenergy.cli import run; run()"
    args = ["sweep", str(plan), "--data-dir", str(data), "--idle-s", "0", "--quiet"]
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _segments(data: Path) -> int:
    return len(list((data / "results").glob("runs-*.parquet")))


@pytest.mark.slow
def test_sigint_mid_sweep_then_resume_completes_without_duplicates(write_plan, tmp_path):
    plan = write_plan(batch_sizes=[1, 2, 3])
    data = tmp_path / "data"
    proc = _start(plan, data)
    deadline = time.monotonic() + 90
    while _segments(data) < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    interrupted = RunStore(data).count()
    if proc.returncode == 130:
        assert "interrupted: finished runs are stored" in err and 1 <= interrupted <= 3, err
    else:  # the sweep finished before the signal arrived: nothing to resume
        assert proc.returncode == 0 and interrupted == 3
    resumed = _start(plan, data)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert f"{interrupted} already stored, {3 - interrupted} ok" in out
    records = RunStore(data).runs()
    expected = sorted(r.key for r in check_plan(load_plan(plan)))
    assert sorted(r.tags[KEY_TAG] for r in records) == expected
    assert sorted(r.workload.batch_size for r in records) == [1, 2, 3]
    assert all(r.status == "ok" for r in records)
