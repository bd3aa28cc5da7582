"""The CLI over the store: runs, submit, submissions, schema; bad input exits 2 in one line."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from mlenergy.cli import main
from mlenergy.records import Submission
from mlenergy.store import RUN_COLUMNS, RunStore
from mlenergy.store.submissions import SubmissionQueue


def _err_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err, "expected an error message"
    assert err[-1].startswith("error: ")
    return err[-1]


@pytest.fixture
def filled(data_dir, factory):
    runs = [factory.make_run(seed=i) for i in range(3)]
    RunStore(data_dir).append(runs)
    return runs


def test_runs_list_show_export(data_dir, filled, tmp_path, capsys, monkeypatch):
    assert main(["runs", "list", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "3 run(s)" in out and filled[0].run_id in out

    # --data-dir defaults to $MLENERGY_DATA_DIR
    monkeypatch.setenv("MLENERGY_DATA_DIR", str(data_dir))
    assert main(["runs", "show", filled[1].run_id]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == filled[1].run_id

    out_csv = tmp_path / "runs.csv"
    assert main(["runs", "export", "--format", "csv", "--out", str(out_csv)]) == 0
    frame = pd.read_csv(out_csv)
    assert list(frame.columns) == list(RUN_COLUMNS) and len(frame) == 3
    out_pq = tmp_path / "runs.parquet"
    assert main(["runs", "export", "--format", "parquet", "--out", str(out_pq)]) == 0
    assert len(pd.read_parquet(out_pq)) == 3
    assert main(["runs", "check"]) == 0
    assert main(["runs", "compact"]) == 0


def test_runs_show_unknown_and_bad_format(data_dir, filled, tmp_path, capsys):
    assert main(["runs", "show", "doesnotexist", "--data-dir", str(data_dir)]) == 2
    assert "no run 'doesnotexist'" in _err_line(capsys)
    out = tmp_path / "x.xml"
    args = ["runs", "export", "--format", "xml", "--out", str(out), "--data-dir", str(data_dir)]
    assert main(args) == 2
    assert "unknown export format" in _err_line(capsys)
    assert not out.exists()


def test_runs_show_accepts_a_unique_id_prefix(data_dir, factory, capsys):
    runs = [
        factory.make_run(seed=i, run_id=run_id)
        for i, run_id in enumerate(("abc12345aaaa", "abc12345bbbb", "fff00000cccc"))
    ]
    RunStore(data_dir).append(runs)
    assert main(["runs", "show", "fff", "--data-dir", str(data_dir)]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == "fff00000cccc"
    assert main(["runs", "show", "abc12345b", "--data-dir", str(data_dir)]) == 0
    assert json.loads(capsys.readouterr().out)["run_id"] == "abc12345bbbb"
    # An ambiguous prefix lists what it matches, in one line.
    assert main(["runs", "show", "abc", "--data-dir", str(data_dir)]) == 2
    line = _err_line(capsys)
    assert "ambiguous" in line and "abc12345aaaa" in line and "abc12345bbbb" in line
    assert main(["runs", "show", "0123", "--data-dir", str(data_dir)]) == 2
    assert "no run '0123'" in _err_line(capsys)


def test_unwritable_data_dir(tmp_path, factory, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(Exception) as info:
        RunStore(blocker)
    assert "not a folder" in str(info.value)
    store = RunStore(blocker / "data")  # its parent is a file: cannot be created
    with pytest.raises(Exception) as info:
        store.append([factory.make_run()])
    assert "not writable" in str(info.value) and "--data-dir" in str(info.value)
    assert blocker.read_text() == "not a folder"
    assert main(["runs", "list", "--data-dir", str(blocker)]) == 2
    assert "is not a folder" in _err_line(capsys)


def test_corrupted_segment_is_named_and_store_unchanged(data_dir, filled, factory, capsys):
    results = data_dir / "results"
    seg = next(results.glob("runs-*.parquet"))
    data = bytearray(seg.read_bytes())
    seg.write_bytes(bytes(data[: len(data) // 2]))  # truncated by a crash of some other tool
    before = {p.name: p.read_bytes() for p in results.iterdir()}
    for argv in (["runs", "list"], ["runs", "check"], ["runs", "show", filled[0].run_id]):
        assert main([*argv, "--data-dir", str(data_dir)]) == 2
        line = _err_line(capsys)
        assert seg.name in line and "move it out" in line, line
    with pytest.raises(Exception, match="corrupted"):
        RunStore(data_dir).append([factory.make_run(seed=77)])
    assert {p.name: p.read_bytes() for p in results.iterdir()} == before


def test_submit_approve_reject_flow(data_dir, factory, tmp_path, capsys):
    runs = [factory.make_run(seed=10), factory.make_run(seed=11)]
    bundle = tmp_path / "results.json"
    bundle.write_text(Submission(submitter="Lab <b>", runs=tuple(runs)).model_dump_json())
    assert main(["submit", str(bundle), "--data-dir", str(data_dir)]) == 0
    assert "queued" in capsys.readouterr().out
    (entry,) = SubmissionQueue(data_dir).list()

    assert main(["submissions", "list", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert entry.submission_id in out and "submitter=Lab <b>" in out

    assert main(["submissions", "approve", entry.submission_id, "--data-dir", str(data_dir)]) == 0
    assert "2 record(s) added" in capsys.readouterr().out
    assert RunStore(data_dir).runs_frame()["submitter"].tolist() == ["Lab <b>", "Lab <b>"]

    # A JSONL bundle of bare records needs --submitter; then it can be rejected.
    jsonl = tmp_path / "bench.jsonl"
    jsonl.write_text(factory.make_run(seed=12).model_dump_json() + "\n")
    assert main(["submit", str(jsonl), "--data-dir", str(data_dir)]) == 2
    assert "--submitter" in capsys.readouterr().err
    args = ["submit", str(jsonl), "--submitter", "Edge", "--data-dir", str(data_dir)]
    assert main(args) == 0
    capsys.readouterr()
    (pending,) = SubmissionQueue(data_dir).list()
    args = ["submissions", "reject", pending.submission_id, "--why", "dup of paper", "--data-dir"]
    assert main([*args, str(data_dir)]) == 0
    assert main(["submissions", "list", "--status", "rejected", "--data-dir", str(data_dir)]) == 0
    assert "why=dup of paper" in capsys.readouterr().out


def test_submit_bad_bundle_lists_every_problem(data_dir, factory, tmp_path, capsys):
    run = factory.make_run(seed=1, energy_source="emulated:test", decode_power_w=5000.0)
    bundle = tmp_path / "bad.json"
    bundle.write_text(Submission(submitter="x", runs=(run,)).model_dump_json())
    assert main(["submit", str(bundle), "--data-dir", str(data_dir)]) == 2
    err = capsys.readouterr().err
    assert "emulated" in err and "outside the plausible range" in err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: ") and "listed below" in lines[0]
    assert all(line.startswith("  - ") for line in lines[1:])
    assert "outside the plausible range" not in lines[0]  # each problem is shown once
    assert len(lines[1:]) == len(set(lines[1:]))
    assert not data_dir.exists()
    assert main(["submit", str(tmp_path / "missing.json"), "--data-dir", str(data_dir)]) == 2


def test_schema_export(tmp_path, capsys):
    out = tmp_path / "schema"
    assert main(["schema", "export", "--out", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        "quality_result.schema.json",
        "run_record.schema.json",
        "submission.schema.json",
    ]
    schema = json.loads((out / "run_record.schema.json").read_text())
    assert schema["additionalProperties"] is False
