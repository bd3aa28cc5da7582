"""Two drivers on one plan and one store: every point stored once, each says what it stored."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
import yaml

from mlenergy.store import RunStore
from mlenergy.sweep import KEY_TAG, LocalExecutor, check_plan, parse_plan, run_sweep

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does

PLAN = {
    "name": "est12",
    "kind": "estimate",
    "models": ["meta-llama/Llama-3.1-8B-Instruct"],
    "batch_sizes": [1, 2, 4, 8, 16, 32],
    "input_tokens": 512,
    "output_tokens": [128, 256],
    "devices": ["H100"],
}


class _Lockstep(LocalExecutor):
    """Yields each outcome only when the other driver has its outcome for the same point too.

    Both drivers then check "is this key stored?" at the same moment: without the check and
    the append under one lock, both store the point.
    """

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__()
        self.barrier = barrier

    def run(self, specs, on_start):
        for outcome in super().run(specs, on_start):
            self.barrier.wait(timeout=60)
            yield outcome


def test_two_drivers_in_lockstep_store_each_point_once(tmp_path):
    runs = check_plan(parse_plan(PLAN))
    barrier = threading.Barrier(2)
    summaries = []

    def drive() -> None:
        store = RunStore(tmp_path / "data")
        summaries.append(run_sweep(runs, store, _Lockstep(barrier), progress=False))

    threads = [threading.Thread(target=drive) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    keys = Counter(r.tags[KEY_TAG] for r in RunStore(tmp_path / "data").runs())
    assert len(keys) == 12 and set(keys.values()) == {1}
    assert sum(s.ok for s in summaries) == 12
    assert sum(s.stored_elsewhere for s in summaries) == 12
    assert all(s.ok + s.skipped == 12 for s in summaries)


def test_two_driver_processes_on_one_plan(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump(PLAN), encoding="utf-8")
    data = tmp_path / "data"
    cli = [sys.executable, "-m", "mlenergy.cli", "sweep", str(plan), "--data-dir", str(data)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen([*cli, "--quiet"], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    keys = Counter(r.tags[KEY_TAG] for r in RunStore(data).runs())
    assert len(keys) == 12 and set(keys.values()) == {1}
    ok = [int(re.search(r"(\d+) ok", out).group(1)) for out in outs]
    assert sum(ok) == 12, outs
    assert Path(data / "results").is_dir()
