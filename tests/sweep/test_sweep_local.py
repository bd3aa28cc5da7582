"""The in-process executor: results streamed into the store, resume, overlap, retries, timeouts."""

from __future__ import annotations

import time

import pytest
from sweep_helpers import TINY, run_cli

import mlenergy.sweep.local as local_mod
from mlenergy.errors import UserError
from mlenergy.store import RunStore
from mlenergy.sweep import KEY_TAG, LocalExecutor, check_plan, parse_plan, run_sweep

pytestmark = pytest.mark.slow  # each test needs over ~1 s, or a fixture that does


def _keys(store: RunStore) -> list[str]:
    return [r.tags[KEY_TAG] for r in store.runs()]


def _runs(**changes):
    return check_plan(parse_plan({**TINY, **changes}))


def test_cli_sweep_stores_each_run_once_and_dry_run_counts(write_plan, tmp_path):
    plan, data = write_plan(), tmp_path / "data"
    rc, out, _ = run_cli("sweep", str(plan), "--data-dir", str(data), "--dry-run")
    assert rc == 0 and "2 run(s), 0 done, 2 to run" in out
    assert out.count("todo  ") == 2 and not data.exists()
    rc, out, err = run_cli("sweep", str(plan), "--data-dir", str(data), "--idle-s", "0")
    assert rc == 0, err
    assert "2 ok" in out
    store = RunStore(data)
    records = store.runs()
    assert sorted(r.workload.batch_size for r in records) == [1, 2]
    assert all(r.status == "ok" and r.energy_source == "modelled:cpu-tdp" for r in records)
    assert all(r.tags["sweep_plan"] == "tiny" for r in records)
    rc, out, _ = run_cli("sweep", str(plan), "--data-dir", str(data), "--resume", "--quiet")
    assert rc == 0 and "2 already stored, 0 ok" in out
    assert store.count() == 2
    rc, out, _ = run_cli("sweep", str(plan), "--data-dir", str(data), "--dry-run")
    assert "2 run(s), 2 done, 0 to run" in out and out.count("done  ") == 2


class _Interrupted(LocalExecutor):
    """Ends the sweep with Ctrl-C after ``after`` runs."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after = after

    def run(self, specs, on_start):
        for i, outcome in enumerate(super().run(specs, on_start)):
            if i == self.after:
                raise KeyboardInterrupt
            yield outcome


def _identity(store: RunStore) -> list[tuple]:
    return sorted(
        (r.tags[KEY_TAG], r.model.model_id, r.workload.batch_size, r.status) for r in store.runs()
    )


def test_interrupted_then_resumed_equals_an_uninterrupted_sweep(tmp_path):
    runs = _runs(batch_sizes=[1, 2, 3])
    whole = RunStore(tmp_path / "whole")
    run_sweep(runs, whole, LocalExecutor(), progress=False)
    resumed = RunStore(tmp_path / "resumed")
    with pytest.raises(KeyboardInterrupt):
        run_sweep(runs, resumed, _Interrupted(after=1), progress=False)
    assert resumed.count() == 1  # the finished run was stored as it ended
    summary = run_sweep(runs, resumed, LocalExecutor(), progress=False)
    assert (summary.skipped, summary.ok) == (1, 2)
    assert _identity(resumed) == _identity(whole)
    assert len(set(_keys(resumed))) == 3 == resumed.count()


def test_overlapping_plans_run_the_overlap_once(tmp_path):
    store = RunStore(tmp_path / "data")
    first = run_sweep(_runs(name="a", batch_sizes=[1, 2]), store, LocalExecutor(), progress=False)
    second = run_sweep(_runs(name="b", batch_sizes=[2, 3]), store, LocalExecutor(), progress=False)
    assert (first.ok, second.skipped, second.ok) == (2, 1, 1)
    assert sorted(r.workload.batch_size for r in store.runs()) == [1, 2, 3]
    assert len(set(_keys(store))) == store.count() == 3


def test_crash_is_retried_then_stored_as_failed(tmp_path, monkeypatch):
    calls: list[int] = []
    real = local_mod.execute_run

    def flaky(spec, idle_s=0.0):
        calls.append(spec.batch_size)
        if spec.batch_size == 2 or calls.count(spec.batch_size) == 1:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real(spec, idle_s)

    monkeypatch.setattr(local_mod, "execute_run", flaky)
    store = RunStore(tmp_path / "data")
    summary = run_sweep(_runs(resources={"retries": 1}), store, LocalExecutor(), progress=False)
    assert calls == [1, 1, 2, 2]  # batch 1: crash then ok; batch 2: crash on both attempts
    assert (summary.ok, summary.failed) == (1, 1)
    failed = [r for r in store.runs() if r.status == "failed"]
    assert len(failed) == 1 and failed[0].workload.batch_size == 2
    assert "illegal memory access" in failed[0].error and failed[0].phases == ()
    assert failed[0].tags["sweep_failure"] == "failed"
    again = run_sweep(_runs(resources={"retries": 1}), store, LocalExecutor(), progress=False)
    assert again.skipped == 2 and store.count() == 2  # a stored failed point counts as done


def test_run_past_its_timeout_is_stopped_and_stored_as_timed_out(tmp_path, monkeypatch):
    def slow(spec, idle_s=0.0):
        time.sleep(30)

    monkeypatch.setattr(local_mod, "execute_run", slow)
    store = RunStore(tmp_path / "data")
    started = time.monotonic()
    summary = run_sweep(
        _runs(batch_sizes=[1], resources={"timeout_s": 0.5}), store, LocalExecutor(), progress=False
    )
    assert time.monotonic() - started < 10
    (record,) = store.runs()
    assert summary.failed == 1 and record.status == "failed"
    assert record.error.startswith("timed out") and record.tags["sweep_failure"] == "timed out"


def test_estimates_sweep_with_the_same_plan_language(tmp_path):
    plan = {
        "name": "est",
        "kind": "estimate",
        "models": ["meta-llama/Llama-3.1-8B-Instruct"],
        "batch_sizes": [8, 32],
        "input_tokens": 512,
        "output_tokens": 128,
        "devices": ["H100"],
    }
    store = RunStore(tmp_path / "data")
    summary = run_sweep(check_plan(parse_plan(plan)), store, LocalExecutor(), progress=False)
    assert summary.ok == 2
    records = store.runs()
    assert all(r.energy_source.startswith("estimated:") for r in records)
    assert sorted(r.workload.batch_size for r in records) == [8, 32]
    with pytest.raises(UserError, match=r"device .NoSuchGPU.*unknown gpu"):
        check_plan(parse_plan({**plan, "devices": ["NoSuchGPU"]}))
    with pytest.raises(UserError, match="model 'nope/model'"):
        check_plan(parse_plan({**plan, "models": ["nope/model"]}))


def test_quality_step_runs_once_per_model(tmp_path):
    store = RunStore(tmp_path / "data")
    runs = _runs(batch_sizes=[1], quality="perplexity")
    summary = run_sweep(runs, store, LocalExecutor(), progress=False)
    assert summary.ok == 2
    (quality,) = store.quality()
    assert quality.task == "perplexity:pydoc" and quality.value > 1
    assert quality.model.model_id == "preset:tiny-dense"
    assert quality.tags[KEY_TAG] == next(r.key for r in runs if r.kind == "quality")
    assert quality.linked_run_ids == tuple(r.run_id for r in store.runs())
    again = run_sweep(runs, store, LocalExecutor(), progress=False)
    assert again.skipped == 2 and len(store.quality()) == 1 and store.count() == 1
