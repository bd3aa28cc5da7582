"""Disk full and read-only: one ``error:`` line on every command, nothing half-written."""

from __future__ import annotations

import errno
import json
import os

import pytest

import mlenergy.store.segments as seg
from mlenergy.cli import main
from mlenergy.errors import StoreError
from mlenergy.store import RunStore
from mlenergy.store.preflight import ensure_room, open_store_for_append
from mlenergy.store.submissions import SubmissionQueue


def _fail_with(monkeypatch, code: int, target: str = "fsync") -> None:
    """Make the store's writes fail as a full (ENOSPC) or read-only (EROFS) disk does."""

    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(seg.os, target, refuse)


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error:"), err
    assert "Traceback" not in err
    return err


def _bundle(tmp_path, factory, seed: int):
    path = tmp_path / f"b{seed}.json"
    run = factory.make_run(seed=seed).model_dump(mode="json")
    path.write_text(json.dumps({"submitter": "Green Lab", "runs": [run]}))
    return path


@pytest.mark.parametrize(("code", "target"), [(errno.ENOSPC, "fsync"), (errno.EROFS, "replace")])
def test_runs_compact_on_a_full_or_read_only_disk(
    data_dir, factory, monkeypatch, capsys, code, target
):
    store = RunStore(data_dir)
    for i in range(3):
        store.append([factory.make_run(seed=i)])
    before = sorted(p.name for p in store.results_dir.iterdir())
    _fail_with(monkeypatch, code, target)
    assert main(["runs", "compact", "--data-dir", str(data_dir)]) == 2
    assert os.strerror(code) in _one_error_line(capsys)
    monkeypatch.undo()
    after = sorted(p.name for p in store.results_dir.iterdir())
    assert after == before and RunStore(data_dir).count() == 3


@pytest.mark.parametrize(("code", "target"), [(errno.ENOSPC, "fsync"), (errno.EROFS, "replace")])
def test_submit_approve_reject_on_a_full_or_read_only_disk(
    tmp_path, data_dir, factory, monkeypatch, capsys, code, target
):
    d = ["--data-dir", str(data_dir)]
    queue = SubmissionQueue(data_dir)
    waiting = queue.submit(_bundle(tmp_path, factory, 1).read_bytes())
    other = queue.submit(_bundle(tmp_path, factory, 2).read_bytes())
    _fail_with(monkeypatch, code, target)
    assert main(["submit", str(_bundle(tmp_path, factory, 3)), *d]) == 2
    assert os.strerror(code) in _one_error_line(capsys)
    assert main(["submissions", "approve", waiting.submission_id, *d]) == 2
    _one_error_line(capsys)
    assert main(["submissions", "reject", other.submission_id, "--why", "x", *d]) == 2
    _one_error_line(capsys)
    monkeypatch.undo()
    pending = SubmissionQueue(data_dir).list()
    assert [q.submission_id for q in pending] == [waiting.submission_id, other.submission_id]
    assert not RunStore(data_dir).results_dir.exists() or RunStore(data_dir).count() == 0


def test_the_room_check_writes_what_it_needs(tmp_path, monkeypatch):
    ensure_room(tmp_path, 2_000_000)
    assert list(tmp_path.iterdir()) == []  # the probe is gone

    real_open = open

    def full_after_a_while(file, mode="r", *args, **kwargs):
        fh = real_open(file, mode, *args, **kwargs)
        if ".tmp-room-" in str(file):

            class Full:
                def __enter__(self):
                    return self

                def __exit__(self, *exc):
                    fh.close()

                def write(self, data):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

                def flush(self):
                    pass

                def fileno(self):
                    return fh.fileno()

            return Full()
        return fh

    monkeypatch.setattr("builtins.open", full_after_a_while)
    with pytest.raises(StoreError, match="No space left on device"):
        open_store_for_append(tmp_path / "data")
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == []


def test_the_room_check_compares_free_space(tmp_path, monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10, 9, 1))
    with pytest.raises(StoreError, match=r"only 0\.0 MB free"):
        ensure_room(tmp_path, 1000)


def test_runs_list_makes_control_characters_visible(data_dir, factory, capsys):
    from mlenergy.records import SubmissionInfo

    info = SubmissionInfo(
        submission_id="s-1",
        submitter="Evil\u202eLab\x1b[2J",
        submitted_at=factory.make_run().created_at,
    )
    model = factory.make_model("org/evil\x1b[31mred")
    RunStore(data_dir).append([factory.make_run(seed=1, model=model, submission=info)])
    assert main(["runs", "list", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out
    assert "\\x1b" in out and "\\x202e" in out
