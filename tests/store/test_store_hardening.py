"""Readers racing a compaction, older segments lacking new columns, damaged queue files."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from mlenergy.errors import StoreError
from mlenergy.store import RunStore
from mlenergy.store import segments as seg
from mlenergy.store.submissions import SubmissionQueue


def test_reader_retries_when_a_compaction_removes_its_files(data_dir, factory, monkeypatch):
    runs = [factory.make_run(seed=i) for i in range(3)]
    writer = RunStore(data_dir)
    for run in runs:
        writer.append([run])
    reader = RunStore(data_dir)
    real_connect = RunStore._connect
    calls = []

    def connect_then_compact(self):
        con = real_connect(self)  # views now point at the three segment files
        if not calls:
            writer.compact()  # another process compacts before the scan runs
        calls.append(1)
        return con

    monkeypatch.setattr(RunStore, "_connect", connect_then_compact)
    assert reader.runs() == runs
    assert len(calls) >= 2, "the read was retried on the new listing"


def test_segment_without_a_newer_column(data_dir, factory):
    """A segment written before a flat column existed reads as NULL there; rebuild fills it."""
    store = RunStore(data_dir)
    store.append([factory.make_run(seed=1)])
    store.append([factory.make_run(seed=2)])
    path = seg.list_segments(data_dir / "results", "runs")[0]
    table = pq.read_table(path).drop_columns(["itl_p90_s"])
    pq.write_table(table, path)
    frame = RunStore(data_dir).runs_frame()
    assert frame["itl_p90_s"].isna().sum() == 1
    assert RunStore(data_dir).compact() == 2
    assert RunStore(data_dir).runs_frame()["itl_p90_s"].isna().sum() == 1
    assert RunStore(data_dir).compact(rebuild=True) == 1
    assert RunStore(data_dir).runs_frame()["itl_p90_s"].notna().all()


def test_stored_record_that_fails_validation_names_the_file(data_dir, factory):
    store = RunStore(data_dir)
    store.append([factory.make_run(seed=1)])
    path = seg.list_segments(data_dir / "results", "runs")[0]
    table = pq.read_table(path)
    broken = table.set_column(
        table.column_names.index("record_json"), "record_json", [['{"not": "a run"}']]
    )
    pq.write_table(broken, path)
    with pytest.raises(StoreError, match=path.name):
        RunStore(data_dir).runs()
    assert len(RunStore(data_dir).runs_frame()) == 1  # the flat table still reads


def test_damaged_queue_file_is_named(data_dir, factory):
    queue = SubmissionQueue(data_dir)
    raw = (
        '{"submitter": "lab", "runs": [' + factory.make_run(seed=1).model_dump_json() + "]}"
    ).encode()
    entry = queue.submit(raw)
    path = data_dir / "submissions" / "pending" / f"{entry.submission_id}.json"
    path.write_text("{ truncated")
    assert queue.list() == []  # set aside, not blocking the queue
    assert entry.submission_id in queue.notices[0] and "quarantine/" in queue.notices[0]
    assert (data_dir / "submissions" / "quarantine" / f"pending-{path.name}").is_file()


def test_queue_ids_cannot_escape_the_folder(data_dir):
    queue = SubmissionQueue(data_dir)
    for bad in ("../results/x", ".hidden", ""):
        with pytest.raises(Exception, match="invalid submission id"):
            queue.get(bad)
