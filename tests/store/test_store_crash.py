"""Nothing half-written survives a crash: killed writers, leftovers, interrupted commits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlenergy.store import RunStore
from mlenergy.store import segments as seg

WRITER = """
import sys
from mlenergy.records import RunRecord
from mlenergy.store import RunStore
payload = open(sys.argv[2]).read().splitlines()
base = RunRecord.model_validate_json(payload[0])
store = RunStore(sys.argv[1])
print("ready", flush=True)
i = 0
while True:
    batch = [base.model_copy(update={"run_id": f"crash-run-{i + k:06d}"}) for k in range(25)]
    store.append(batch)
    print("appended", flush=True)
    i += 25
"""


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT], ids=["kill", "ctrl-c"])
def test_killed_writer_leaves_only_whole_appends(data_dir, factory, tmp_path, signum):
    payload = tmp_path / "run.jsonl"
    payload.write_text(factory.make_run().model_dump_json() + "\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(data_dir), str(payload)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert proc.stdout.readline().strip() == b"ready"
        # the first append is whole (however busy the machine); the signal lands among later ones
        assert proc.stdout.readline().strip() == b"appended"
        time.sleep(0.3)
        proc.send_signal(signum)
    finally:
        proc.wait(timeout=30)
    store = RunStore(data_dir)
    ids = store.runs_frame()["run_id"].tolist()
    assert ids, "the writer said it had stored a batch"
    assert len(ids) % 25 == 0, "every append is whole"
    assert sorted(ids) == [f"crash-run-{i:06d}" for i in range(len(ids))]
    # The next writer cleans leftovers and carries on.
    res = store.append([factory.make_run(seed=1)])
    assert res.added == 1
    assert not [p for p in (data_dir / "results").iterdir() if p.name.startswith(".tmp-")]


def test_orphan_temp_files_are_ignored_then_removed(data_dir, factory):
    store = RunStore(data_dir)
    store.append([factory.make_run(seed=1)])
    results = data_dir / "results"
    orphan = results / f"{seg.TMP_PREFIX}deadbeef{seg.SEGMENT_SUFFIX}"
    orphan.write_bytes(b"half a parquet file")
    assert len(RunStore(data_dir).runs()) == 1  # readers never see hidden files
    store.append([factory.make_run(seed=2)])
    assert not orphan.exists()
    assert len(RunStore(data_dir).runs()) == 2


def test_committed_journal_is_rolled_forward(data_dir, factory):
    """A crash after the journal was written (runs + quality in one append) completes."""
    store = RunStore(data_dir)
    store.append([factory.make_run(seed=1)])
    results = data_dir / "results"
    from mlenergy.store.tables import quality_table, runs_table

    run, qual = factory.make_run(seed=2), factory.make_quality()
    tmp_runs = seg.write_tmp_parquet(runs_table([run]), results)
    tmp_q = seg.write_tmp_parquet(quality_table([qual]), results)
    adds = [(tmp_runs, seg.segment_name("runs")), (tmp_q, seg.segment_name("quality"))]
    # Simulate: journal written, first rename done, then the process died.
    journal = results / f"{seg.JOURNAL_PREFIX}0001.json"
    journal.write_text(json.dumps({"adds": [[t.name, f] for t, f in adds], "removes": []}))
    os.replace(tmp_runs, results / adds[0][1])
    assert len(RunStore(data_dir).runs()) == 2  # readers see the published part
    RunStore(data_dir).append([factory.make_run(seed=3)])  # next writer recovers
    assert not journal.exists()
    fresh = RunStore(data_dir)
    assert len(fresh.runs()) == 3 and fresh.quality() == [qual]


def test_interrupted_compaction_never_duplicates(data_dir, factory):
    store = RunStore(data_dir)
    runs = [factory.make_run(seed=i) for i in range(3)]
    for run in runs:
        store.append([run])
    results = data_dir / "results"
    old = [p.name for p in seg.list_segments(results, "runs")]
    import pyarrow as pa
    import pyarrow.parquet as pq

    merged = pa.concat_tables([pq.read_table(results / n) for n in old])
    tmp = seg.write_tmp_parquet(merged, results)
    final = seg.segment_name("runs")
    journal = results / f"{seg.JOURNAL_PREFIX}0002.json"
    journal.write_text(json.dumps({"adds": [[tmp.name, final]], "removes": old}))
    os.replace(tmp, results / final)  # crashed before removing the old segments
    assert RunStore(data_dir).runs() == runs  # deduplicated while the journal is pending
    assert len(RunStore(data_dir).runs_frame()) == 3
    RunStore(data_dir).compact()
    assert [p.name for p in seg.list_segments(results, "runs")] == [final]
    assert RunStore(data_dir).runs() == runs


def test_keyboard_interrupt_during_write_leaves_store_unchanged(data_dir, factory, monkeypatch):
    store = RunStore(data_dir)
    store.append([factory.make_run(seed=1)])
    before = sorted(p.name for p in (data_dir / "results").iterdir())

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(seg, "commit", interrupted)
    try:
        store.append([factory.make_run(seed=2), factory.make_quality()])
    except KeyboardInterrupt:
        pass
    else:  # pragma: no cover
        raise AssertionError("expected the interrupt to propagate")
    monkeypatch.undo()
    assert sorted(p.name for p in (data_dir / "results").iterdir()) == before
    fresh = RunStore(data_dir)
    assert len(fresh.runs()) == 1 and fresh.quality() == []
    assert fresh.append([factory.make_run(seed=2)]).added == 1
    assert Path(data_dir / "results" / ".lock").exists()


def test_ctrl_c_during_commit_finishes_the_commit_first(data_dir, factory, monkeypatch):
    """SIGINT arriving mid-commit is held until the change is complete, then raised."""
    store = RunStore(data_dir)
    real_replace = os.replace

    def replace_and_interrupt(src, dst):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C between two renames
        real_replace(src, dst)

    monkeypatch.setattr(seg.os, "replace", replace_and_interrupt)
    run, qual = factory.make_run(seed=1), factory.make_quality()
    with pytest.raises(KeyboardInterrupt):
        store.append([run, qual])
    monkeypatch.undo()
    fresh = RunStore(data_dir)
    assert fresh.runs() == [run] and fresh.quality() == [qual]
    assert seg.pending_journals(data_dir / "results") == []
