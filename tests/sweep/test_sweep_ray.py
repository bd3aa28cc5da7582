"""The Ray executor on a real local cluster (127.0.0.1): one worker process per run."""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest
from sweep_helpers import TINY, run_cli

from mlenergy.store import RunStore
from mlenergy.sweep import KEY_TAG, check_plan, parse_plan, run_sweep

pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster started the way ``mlenergy sweep --ray`` starts it."""
    from mlenergy.sweep.ray_executor import RayExecutor

    owner = RayExecutor(num_cpus=2)
    assert ray.is_initialized()
    yield owner
    owner.close()
    assert not ray.is_initialized()


class _Recording:
    """Wraps an executor and keeps every outcome it yields."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.outcomes = inner, inner.name, []

    def run(self, specs, on_start):
        for outcome in self.inner.run(specs, on_start):
            self.outcomes.append(outcome)
            yield outcome

    def close(self) -> None:
        self.inner.close()


def _executor():
    from mlenergy.sweep.ray_executor import RayExecutor

    return _Recording(RayExecutor())  # joins the module's cluster


def _runs(**changes):
    return check_plan(parse_plan({**TINY, **changes}), use_ray=True)


def _worker_pids() -> list[int]:
    pids = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if "_run_in_worker" in cmdline and proc.info["pid"] != os.getpid():
            pids.append(proc.info["pid"])
    return pids


def test_ray_sweep_stores_every_run_exactly_once(cluster, tmp_path):
    store = RunStore(tmp_path / "data")
    executor = _executor()
    runs = _runs(models=["preset:tiny-dense", "preset:tiny-moe"], batch_sizes=[1])
    summary = run_sweep(runs, store, executor, progress=False)
    assert (summary.ok, summary.failed) == (2, 0)
    records = store.runs()
    assert sorted(r.tags[KEY_TAG] for r in records) == sorted(r.key for r in runs)
    assert {r.model.model_id for r in records} == {"preset:tiny-dense", "preset:tiny-moe"}
    assert all(o.attempts == 1 for o in executor.outcomes)
    again = run_sweep(runs, store, _executor(), progress=False)
    assert again.skipped == 2 and store.count() == 2


def test_killed_worker_is_retried_and_nothing_is_lost_or_duplicated(cluster, tmp_path):
    killed: list[int] = []
    stop = threading.Event()

    def kill_first_worker() -> None:
        while not stop.is_set() and not killed:
            for pid in _worker_pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue
                killed.append(pid)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_first_worker, daemon=True)
    killer.start()
    store = RunStore(tmp_path / "data")
    executor = _executor()
    runs = _runs(resources={"retries": 1})
    try:
        summary = run_sweep(runs, store, executor, progress=False)
    finally:
        stop.set()
        killer.join(timeout=5)
    assert killed, "no worker process was found to kill"
    assert (summary.ok, summary.failed) == (2, 0), summary.errors
    assert sorted(o.attempts for o in executor.outcomes) == [1, 2]
    keys = [r.tags[KEY_TAG] for r in store.runs()]
    assert sorted(keys) == sorted(r.key for r in runs) and len(set(keys)) == len(keys)


def test_run_past_its_timeout_is_cancelled_and_stored_as_timed_out(cluster, tmp_path):
    store = RunStore(tmp_path / "data")
    runs = _runs(batch_sizes=[1], resources={"timeout_s": 0.5})
    started = time.monotonic()
    summary = run_sweep(runs, store, _executor(), progress=False)
    assert time.monotonic() - started < 30
    (record,) = store.runs()
    assert summary.failed == 1 and record.status == "failed"
    assert record.tags["sweep_failure"] == "timed out" and "cancelled" in record.error
    assert record.hardware.cpu_model is None  # the node of a cancelled worker is not known


def test_gpus_beyond_every_node_are_refused_before_any_run(cluster, tmp_path):
    from mlenergy.errors import UserError

    store = RunStore(tmp_path / "data")
    with pytest.raises(UserError, match=r"resources\.gpus = 4 but the largest node"):
        run_sweep(_runs(resources={"gpus": 4}), store, _executor(), progress=False)
    assert not store.results_dir.exists()


def test_cli_ray_sweep_joins_the_running_cluster(cluster, write_plan, tmp_path):
    data = tmp_path / "data"
    plan = write_plan(batch_sizes=[1])
    rc, out, err = run_cli("sweep", str(plan), "--data-dir", str(data), "--ray", "--quiet")
    assert rc == 0, err
    assert "1 ok" in out and "ray executor" in out
    assert ray.is_initialized(), "a joined cluster is left running"
    rc, out, _ = run_cli("sweep", str(plan), "--data-dir", str(data), "--ray", "--dry-run")
    assert rc == 0 and "1 done, 0 to run" in out
