"""No orphan servers: however ``mlenergy bench --launch`` ends, the server it started ends too.

Each test runs the real command in a subprocess, launching the fake server of
:mod:`mlenergy.testing.hostile_openai` (50 ms per token), and stops the command with a signal
once the first level is stored: Ctrl-C and SIGTERM end it with one line and exit status
128 + signal, the finished level kept; SIGKILL leaves the server to the watchdog, which stops it.
SIGHUP takes SIGTERM's path (see ``test_serving_engine.py`` for the handler itself).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from mlenergy.store import RunStore

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

LAUNCH = f"{sys.executable} -m mlenergy.testing.hostile_openai --port {{port}} --mode slow"


def _start(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    err = tmp_path / "stderr.txt"
    argv = [
        sys.executable, "-m", "mlenergy.cli", "bench", "--launch", LAUNCH, "--model", "m",
        "--model-config", "preset:tiny-dense", "--concurrency", "8,1", "--num-requests", "8",
        "--max-output-tokens", "16", "--idle-s", "0", "--startup-timeout", "120",
        "--data-dir", str(tmp_path / "data"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    with err.open("wb") as sink:
        # a session of its own, as a terminal would give it (SIGINT is not ignored there)
        process = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=sink, env=env, start_new_session=True
        )
    return process, err


def _servers(process: subprocess.Popen[bytes]) -> list[psutil.Process]:
    try:
        children = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        return []
    return [c for c in children if "hostile_openai" in " ".join(_cmdline(c))]


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            continue
    return out


def _wait_for(predicate, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def _second_level_running(process, err: Path) -> list[psutil.Process]:
    """Wait until level 8 is stored and level 1's server runs; return that server."""
    assert _wait_for(lambda: "level 8:" in err.read_text(errors="replace"), 150), err.read_text(
        errors="replace"
    )[-2000:]
    servers: list[psutil.Process] = []

    def up() -> bool:
        servers[:] = _servers(process)
        return bool(servers)

    assert _wait_for(up, 60)
    time.sleep(1.5)  # into the probe or the load (8 requests one at a time: 6 s)
    return servers


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stores_finished_levels_stops_the_server_and_says_one_line(
    signum, status, tmp_path
):
    process, err = _start(tmp_path)
    try:
        servers = _second_level_running(process, err)
        process.send_signal(signum)
        assert process.wait(timeout=60) == status
    finally:
        if process.poll() is None:
            process.kill()
    lines = [x for x in err.read_text().splitlines() if x.strip() and "torch_dtype" not in x]
    assert lines[-1].startswith("interrupted: ")
    assert "1 finished level(s) stored" in lines[-1]
    assert [x for x in lines if not x.startswith("level 8:")] == [lines[-1]]  # nothing else
    assert _alive(servers) == []
    (record,) = RunStore(tmp_path / "data").runs()
    assert record.workload.batch_size == 8 and record.status == "ok"


def test_a_killed_benchmark_leaves_no_server_behind(tmp_path):
    process, err = _start(tmp_path)
    try:
        servers = _second_level_running(process, err)
        process.kill()  # SIGKILL: nothing of mlenergy runs after this
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert _wait_for(lambda: not _alive(servers), 40), [p.pid for p in _alive(servers)]
