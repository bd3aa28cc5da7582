"""Bounded, NaN-free intake: bad numbers refused at parse time, one bad file never blocks."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mlenergy.cli import main
from mlenergy.errors import StoreError
from mlenergy.records import PowerTimeline, RepeatStats, RunRecord
from mlenergy.store import RunStore
from mlenergy.store import segments as seg
from mlenergy.store.submissions import SubmissionQueue
from mlenergy.store.validation import MAX_BUNDLE_BYTES, MAX_PROBLEMS, validate_bundle


def _bundle_text(*runs: RunRecord, submitter: str = "Green Lab") -> str:
    return json.dumps({"submitter": submitter, "runs": [r.model_dump(mode="json") for r in runs]})


def _with_timeline(factory, seed: int) -> RunRecord:
    times = tuple(0.5 * i for i in range(20))
    timeline = PowerTimeline(
        t_s=times, power_w=tuple(450.0 for _ in times), energy_source="measured:zeus-nvml"
    )
    return factory.make_run(seed=seed, power_timeline=timeline)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_nan_and_infinity_are_refused_at_parse_time(factory, literal):
    text = _bundle_text(_with_timeline(factory, 1))
    poisoned = text.replace('"t_s": [0.0, 0.5', f'"t_s": [{literal}, 0.5', 1)
    assert poisoned != text
    report = validate_bundle(poisoned.encode())
    assert not report.ok
    assert any(p.endswith("[finite-numbers]") for p in report.problems), report.problems


def test_nan_in_repeat_statistics_is_refused(factory):
    text = _bundle_text(factory.make_run(seed=2))
    data = json.loads(text)
    data["runs"][0]["phases"][1]["energy_j_repeats"]["std"] = "__nan__"
    poisoned = json.dumps(data).replace('"__nan__"', "NaN")
    assert any("[finite-numbers]" in p for p in validate_bundle(poisoned.encode()).problems)


def test_records_never_hold_or_write_a_nan_as_null():
    with pytest.raises(ValueError):
        RepeatStats(n=2, values=(1.0, float("nan")), mean=1.0, std=0.0)
    with pytest.raises(ValueError):
        PowerTimeline(t_s=(0.0, float("inf")), power_w=(1.0, 1.0), energy_source="measured:x")
    forced = PowerTimeline.model_construct(
        t_s=(0.0, float("nan")), power_w=(1.0, 1.0), energy_source="measured:x"
    )
    text = forced.model_dump_json()
    assert "null" not in text and "NaN" in text
    with pytest.raises(ValueError):
        PowerTimeline.model_validate_json(text)


def test_a_poisoned_pending_file_is_quarantined_and_the_queue_goes_on(
    tmp_path, data_dir, factory, capsys
):
    queue = SubmissionQueue(data_dir)
    bad = queue.submit(_bundle_text(_with_timeline(factory, 3)).encode())
    good = queue.submit(_bundle_text(factory.make_run(seed=4)).encode())
    path = data_dir / "submissions" / "pending" / f"{bad.submission_id}.json"
    data = json.loads(path.read_text())
    data["submission"]["runs"][0]["power_timeline"]["t_s"][0] = None  # what "NaN as null" left
    path.write_text(json.dumps(data))
    d = ["--data-dir", str(data_dir)]
    assert main(["submissions", "list", *d]) == 0
    out, err = capsys.readouterr()
    assert good.submission_id in out and bad.submission_id not in out
    assert f"warning: submission file pending/{bad.submission_id}.json is unreadable" in err
    assert "power_timeline.t_s.0" in err and "quarantine/" in err
    assert (data_dir / "submissions" / "quarantine" / f"pending-{path.name}").is_file()
    bundle = tmp_path / "b.json"
    bundle.write_text(_bundle_text(factory.make_run(seed=5)))
    assert main(["submit", str(bundle), *d]) == 0
    assert main(["submissions", "approve", good.submission_id, *d]) == 0
    assert len(RunStore(data_dir).runs()) == 1


def _rewrite_record_json(path, edit) -> None:
    table = pq.read_table(path)
    texts = [edit(json.loads(t)) for t in table.column("record_json").to_pylist()]
    column = table.schema.get_field_index("record_json")
    table = table.set_column(column, "record_json", pa.array(texts, pa.string()))
    pq.write_table(table, path)


def test_runs_check_names_a_segment_whose_record_fails_its_schema(data_dir, factory, capsys):
    store = RunStore(data_dir)
    store.append([factory.make_run(seed=6)])
    store.append([factory.make_run(seed=7)])
    damaged = seg.list_segments(store.results_dir, "runs")[0]

    def null_energy(rec: dict) -> str:
        rec["phases"][0]["duration_s"] = None  # a NaN that an older version wrote as null
        return json.dumps(rec)

    _rewrite_record_json(damaged, null_energy)
    with pytest.raises(StoreError, match=damaged.name):
        RunStore(data_dir).runs()
    assert main(["runs", "check", "--data-dir", str(data_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and damaged.name in err and "duration_s" in err


def test_runs_check_counts_once_during_an_unfinished_compaction(data_dir, factory, capsys):
    store = RunStore(data_dir)
    for i in range(2):
        store.append([factory.make_run(seed=10 + 5 * i + k) for k in range(5)])
    old = seg.list_segments(store.results_dir, "runs")
    merged = pa.concat_tables([pq.read_table(p) for p in old])
    name = seg.segment_name("runs")
    pq.write_table(merged, store.results_dir / name)  # renamed, old ones not yet removed
    journal = store.results_dir / f"{seg.JOURNAL_PREFIX}test.json"
    journal.write_text(json.dumps({"adds": [], "removes": [p.name for p in old]}))
    assert store.check() == 10
    assert main(["runs", "check", "--data-dir", str(data_dir)]) == 0
    assert "ok: 10 record(s)" in capsys.readouterr().out


def test_deep_nesting_and_huge_integers_end_in_one_problem(factory):
    for depth in (40, 100_000):
        report = validate_bundle(("[" * depth + "]" * depth).encode(), submitter="Lab")
        assert any(p.endswith("[json-depth]") for p in report.problems), depth
    data = json.loads(_bundle_text(factory.make_run(seed=20)))
    data["runs"][0]["workload"]["batch_size"] = "__big__"
    text = json.dumps(data).replace('"__big__"', "9" * 100_000)
    report = validate_bundle(text.encode())
    assert report.problems and report.problems[0].endswith("[integer-size]")
    lines = ("[" * 50 + "]" * 50 + "\n") + _bundle_text(factory.make_run(seed=21)) + "\n"
    report = validate_bundle(lines.encode(), submitter="Lab")
    assert not report.ok


def test_reading_stops_at_the_size_limit(tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    path.write_bytes(b"[" + b" " * (3 * MAX_BUNDLE_BYTES) + b"]")
    read_sizes = []
    real_open = open

    def spy_open(file, mode="r", *args, **kwargs):
        fh = real_open(file, mode, *args, **kwargs)
        if str(file) == str(path):
            real_read = fh.read

            class Spy:
                def __enter__(self):
                    return self

                def __exit__(self, *exc):
                    fh.close()

                def read(self, n=-1):
                    data = real_read(n)
                    read_sizes.append(len(data))
                    return data

            return Spy()
        return fh

    monkeypatch.setattr("builtins.open", spy_open)
    report = validate_bundle(path, submitter="Lab")
    assert report.problems == ["bundle is over the 5 MB limit [bundle-size]"]
    assert sum(read_sizes) <= MAX_BUNDLE_BYTES + 1


def test_problems_are_capped(factory):
    good = factory.make_run(seed=30).model_dump(mode="json")
    runs = [{**good, "colour": i} for i in range(3 * MAX_PROBLEMS)]
    report = validate_bundle(json.dumps({"submitter": "Lab", "runs": runs}).encode())
    assert MAX_PROBLEMS <= len(report.problems) <= MAX_PROBLEMS + 1
    assert report.problems[-1].startswith("... and ")
