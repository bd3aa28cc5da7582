"""Submission validation: one bad bundle per rule (rejected with its reason, store unchanged),
one good bundle accepted, then approve / reject."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from mlenergy.errors import UserError, ValidationFailed
from mlenergy.records import Submission
from mlenergy.store import RunStore
from mlenergy.store.submissions import SubmissionQueue
from mlenergy.store.validation import (
    MAX_BUNDLE_BYTES,
    escape_text,
    terminal_text,
    validate_bundle,
)

CATALOG = {"NVIDIA H100 80GB HBM3": 700.0, "NVIDIA A100-SXM4-80GB": 400.0}


def lookup(name: str) -> float | None:
    return CATALOG.get(name)


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with the SHA-256 of its bytes (directories too)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def as_bundle(runs: list[dict], submitter: str = "Green Lab", quality=()) -> bytes:
    return json.dumps({"submitter": submitter, "runs": runs, "quality": list(quality)}).encode()


def dump(record) -> dict:
    return record.model_dump(mode="json")


@pytest.fixture
def queue(data_dir, factory):
    """A queue over a store that already holds one run (for the duplicate rules)."""
    RunStore(data_dir).append([factory.make_run(seed=100)])
    return SubmissionQueue(data_dir, tdp_lookup=lookup)


def _mutate_phase(run: dict, phase: str, **changes) -> dict:
    for p in run["phases"]:
        if p["phase"] == phase:
            p.update(changes)
    return run


def _bad_bundles(factory, stored_run) -> dict[str, tuple[bytes, str | None, str]]:
    """name -> (bundle bytes, --submitter, expected reason substring)."""
    good = dump(factory.make_run(seed=1))
    unknown_field = dump(factory.make_run(seed=2))
    unknown_field["hardware"]["gpu_colour"] = "green"
    no_torch = dump(factory.make_run(seed=3))
    no_torch["software"]["torch"] = None
    too_hot = dump(factory.make_run(seed=4, decode_power_w=1200.0))  # 1 x H100: max 840 W
    too_cold = dump(factory.make_run(seed=5, decode_power_w=20.0))  # floor 5% of 700 W
    mismatch = _mutate_phase(dump(factory.make_run(seed=6)), "decode", avg_power_w=500.0)
    per_token = _mutate_phase(dump(factory.make_run(seed=7)), "decode", energy_per_token_j=9.9)
    mystery = dump(factory.make_run(seed=8, accelerator_model="Mystery X1", accelerator_tdp_w=None))
    emulated = dump(factory.make_run(seed=9, energy_source="emulated:test"))
    cpu_no_tdp = dump(factory.make_cpu_run(seed=10))
    cpu_no_tdp["hardware"]["cpu_tdp_w"] = None
    cpu_hot = dump(factory.make_cpu_run(seed=11, cpu_power_w=120.0))  # 65 W TDP x 1.2 = 78 W
    failed = dump(factory.make_run(seed=12))
    failed.update(status="failed", error="CUDA out of memory")
    jsonl = (json.dumps(good) + "\n").encode()
    return {
        "size": (b" " * (MAX_BUNDLE_BYTES + 1) + as_bundle([good]), None, "over the 5 MB limit"),
        "not json": (b'{"submitter": "x", "runs": [', None, "not valid JSON"),
        "not utf-8": (b"\xff\xfe\x00garbage", None, "not UTF-8"),
        "unknown field": (as_bundle([unknown_field]), None, "hardware.gpu_colour: unknown field"),
        "schema type": (as_bundle([{**good, "repeats": "three"}]), None, "runs[0].repeats"),
        "no runs": (as_bundle([]), None, "runs"),
        "provenance": (as_bundle([no_torch]), None, "software.torch: required"),
        "power ceiling": (as_bundle([too_hot]), None, "outside the plausible range"),
        "power floor": (as_bundle([too_cold]), None, "outside the plausible range"),
        "energy = power x time": (as_bundle([mismatch]), None, "differs from avg_power_w x"),
        "energy per token": (as_bundle([per_token]), None, "differs from energy_j / tokens"),
        "unknown accelerator": (
            as_bundle([mystery]),
            None,
            "unknown accelerator 'Mystery X1': it is not in the GPU catalog",
        ),
        "emulated": (as_bundle([emulated]), None, "emulated test devices"),
        "cpu tdp missing": (as_bundle([cpu_no_tdp]), None, "CPU-only run needs the CPU TDP"),
        "cpu power ceiling": (as_bundle([cpu_hot]), None, "outside the plausible range"),
        "failed run": (as_bundle([failed]), None, "only successful runs"),
        "duplicate in bundle": (as_bundle([good, good]), None, "duplicates runs[0]"),
        "duplicate of store": (
            as_bundle([dump(stored_run)]),
            None,
            "duplicate of a record already stored",
        ),
        "records need submitter": (jsonl, None, "--submitter"),
        "submitter empty": (as_bundle([good], submitter=""), None, "submitter"),
    }


@pytest.mark.slow
def test_each_bad_bundle_is_rejected_with_its_reason_and_nothing_changes(
    queue, data_dir, factory, tmp_path
):
    stored = queue.store.runs()[0]
    before = snapshot(data_dir)
    for name, (raw, submitter, reason) in _bad_bundles(factory, stored).items():
        report = validate_bundle(
            raw, submitter=submitter, tdp_lookup=lookup, known_hashes={stored.content_hash()}
        )
        assert not report.ok, name
        assert any(reason in p for p in report.problems), (name, report.problems)
        with pytest.raises(ValidationFailed) as info:
            queue.submit(raw, submitter=submitter)
        assert any(reason in p for p in info.value.problems), (name, info.value.problems)
        assert snapshot(data_dir) == before, f"{name}: the data folder changed"
    # Through a file path as well (the CLI's way).
    bad = tmp_path / "bad.json"
    bad.write_bytes(_bad_bundles(factory, stored)["emulated"][0])
    with pytest.raises(ValidationFailed, match="emulated"):
        queue.submit(bad)
    assert snapshot(data_dir) == before


def test_every_problem_is_reported_at_once(factory):
    run = dump(factory.make_run(seed=1, energy_source="emulated:test", decode_power_w=2000.0))
    other = dump(factory.make_run(seed=2))
    other["hardware"]["colour"] = "red"
    third = dump(factory.make_run(seed=3))
    third["software"]["zeus"] = None
    report = validate_bundle(as_bundle([run, other, third]), tdp_lookup=lookup)
    text = "\n".join(report.problems)
    for reason in ("emulated", "outside the plausible range", "software.zeus", "unknown field"):
        assert reason in text, reason
    assert len(report.problems) >= 4


def test_good_bundle_is_queued_then_approved(queue, data_dir, factory):
    runs = [factory.make_run(seed=20), factory.make_cpu_run(seed=21)]
    qual = factory.make_quality(linked_run_ids=(runs[0].run_id,))
    raw = Submission(submitter="Green Lab", runs=tuple(runs), quality=(qual,)).model_dump_json()
    report = queue.validate(raw.encode())
    assert report.ok, report.problems
    entry = queue.submit(raw.encode(), source="results.json")
    assert (data_dir / "submissions" / "pending" / f"{entry.submission_id}.json").is_file()
    assert [q.submission_id for q in queue.list()] == [entry.submission_id]
    assert len(queue.store.runs()) == 1, "nothing joins the results before approval"

    # The same bundle again is a duplicate of the pending one.
    with pytest.raises(ValidationFailed, match="already stored or pending"):
        queue.submit(raw.encode())

    res = queue.approve(entry.submission_id)
    assert (res.added, res.duplicates) == (3, 0)
    store = RunStore(data_dir)
    approved = {r.run_id: r for r in store.runs()}
    for run in runs:
        info = approved[run.run_id].submission
        assert info.submitter == "Green Lab" and info.submission_id == entry.submission_id
        assert info.approved_at is not None and info.submitted_at == entry.submitted_at
        assert approved[run.run_id].content_hash() == run.content_hash()
    frame = store.runs_frame().set_index("run_id")
    assert frame.loc[runs[0].run_id, "submitter"] == "Green Lab"
    [stored_qual] = store.quality()
    assert stored_qual.submission.submitter == "Green Lab"
    assert stored_qual.model_copy(update={"submission": None}) == qual
    assert stored_qual.content_hash() == qual.content_hash()
    assert store.quality_frame()["submitter"].tolist() == ["Green Lab"]
    assert queue.list() == []
    assert queue.get(entry.submission_id).status == "approved"
    with pytest.raises(UserError, match="already approved"):
        queue.approve(entry.submission_id)
    # Once approved, resubmitting is a duplicate of the store.
    with pytest.raises(ValidationFailed, match="already stored"):
        queue.submit(raw.encode())


def test_jsonl_bundle_with_submitter(queue, factory):
    runs = [factory.make_run(seed=30), factory.make_run(seed=31)]
    raw = "".join(r.model_dump_json() + "\n" for r in runs).encode()
    entry = queue.submit(raw, submitter="Edge Lab")
    assert entry.submission.submitter == "Edge Lab"
    assert [r.run_id for r in entry.submission.runs] == [r.run_id for r in runs]


def test_reject_keeps_reason_and_store(queue, data_dir, factory):
    raw = as_bundle([dump(factory.make_run(seed=40))])
    entry = queue.submit(raw)
    results_before = snapshot(data_dir / "results")
    with pytest.raises(UserError, match="needs a reason"):
        queue.reject(entry.submission_id, "  ")
    rejected = queue.reject(entry.submission_id, "numbers look copied")
    assert rejected.status == "rejected" and rejected.reason == "numbers look copied"
    assert (data_dir / "submissions" / "rejected" / f"{entry.submission_id}.json").is_file()
    assert not (data_dir / "submissions" / "pending" / f"{entry.submission_id}.json").exists()
    assert snapshot(data_dir / "results") == results_before
    with pytest.raises(UserError, match="no submission"):
        queue.approve("20260101-000000-abcdef")


def test_interrupted_decision_is_finished(queue, factory):
    """A decision file beside a stale pending file (crash during the move) wins."""
    entry = queue.submit(as_bundle([dump(factory.make_run(seed=50))]))
    pending = queue.root / "pending" / f"{entry.submission_id}.json"
    stale = pending.read_bytes()
    queue.approve(entry.submission_id)
    pending.write_bytes(stale)  # as if the crash hit before the unlink
    assert queue.list() == []
    assert queue.get(entry.submission_id).status == "approved"
    queue.submit(as_bundle([dump(factory.make_run(seed=51))]))  # next change cleans up
    assert not pending.exists()
    queue.submit(as_bundle([dump(factory.make_run(seed=52))]))  # next change cleans up
    assert not pending.exists()


def test_text_fields_are_kept_but_escaped_when_shown(queue, factory):
    hostile = "<script>alert(1)</script>"
    entry = queue.submit(as_bundle([dump(factory.make_run(seed=60))], submitter=hostile))
    assert entry.submission.submitter == hostile
    assert escape_text(entry.submission.submitter) == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert terminal_text("evil\x1b[31mred") == "evil\\x1b[31mred"


@pytest.mark.parametrize(
    "model_id",
    ["<img src=x onerror=alert(1)>", "just-a-name", "org/../etc", "./models/cfg.json", "config:x"],
)
def test_model_id_must_look_like_a_model_id(queue, factory, model_id):
    run = factory.make_run(seed=61, model=factory.make_model(model_id))
    with pytest.raises(ValidationFailed) as info:
        queue.submit(as_bundle([dump(run)]))
    assert any("model.model_id" in p and "is not a model id" in p for p in info.value.problems)
    assert queue.list() == []


@pytest.mark.parametrize(
    "model_id",
    ["org/name-7B.v2", "preset:tiny-dense", "config:my-model@a1b2c3d4", "a1b2c3d4e5f60718"],
)
def test_model_id_forms_accepted(queue, factory, model_id):
    model = factory.make_model(model_id).model_copy(
        update={"config_fingerprint": "a1b2c3d4e5f60718"}
    )
    queue.submit(as_bundle([dump(factory.make_run(seed=62, model=model))]))


def test_config_id_must_match_its_fingerprint(queue, factory):
    model = factory.make_model("config:my-model@ffff0000")
    with pytest.raises(ValidationFailed, match="names config fingerprint ffff0000"):
        queue.submit(as_bundle([dump(factory.make_run(seed=63, model=model))]))


def _with_task(run, task: str):
    return run.model_copy(update={"workload": run.workload.model_copy(update={"task": task})})


def test_task_must_be_known_or_declared_new(queue, factory):
    hostile = _with_task(factory.make_run(seed=64), "<img src=x onerror=alert(1)>")
    with pytest.raises(ValidationFailed, match="is not a task label"):
        queue.submit(as_bundle([dump(hostile)]))
    new = _with_task(factory.make_run(seed=65), "long-context-qa")
    with pytest.raises(ValidationFailed, match="'long-context-qa' is not a known task; declare"):
        queue.submit(as_bundle([dump(new)]))
    bundle = json.loads(as_bundle([dump(new)]))
    entry = queue.submit(json.dumps({**bundle, "new_tasks": ["long-context-qa"]}).encode())
    assert entry.submission.new_tasks == ("long-context-qa",)
    other = _with_task(factory.make_run(seed=66), "tool-use")
    entry = queue.submit(as_bundle([dump(other)]), new_tasks=["tool-use"])  # --new-task
    assert entry.submission.new_tasks == ("tool-use",)
    with pytest.raises(ValidationFailed, match=r"bundle\.new_tasks: 'Bad Task!'"):
        queue.submit(as_bundle([dump(factory.make_run(seed=67))]), new_tasks=["Bad Task!"])


@pytest.mark.slow
def test_same_measurement_under_other_model_ids_is_a_duplicate(queue, factory):
    """1,000 copies of one measurement under invented ids: rejected, nothing queued."""
    base = dump(factory.make_run(seed=70))
    copies = []
    for i in range(1000):
        run = json.loads(json.dumps(base))
        run["run_id"] = f"r{i:031x}"
        run["model"]["model_id"] = f"invented/model-{i}"
        copies.append(run)
    with pytest.raises(ValidationFailed) as info:
        queue.submit(as_bundle(copies))
    same = [p for p in info.value.problems if "same measurement as runs[0]" in p]
    assert len(same) >= 100 and "invented/model-1" in same[0]
    assert queue.list() == []
    # one at a time: the second is caught against the pending queue, then against the store
    first = queue.submit(as_bundle(copies[:1]))
    with pytest.raises(ValidationFailed, match=r"same measurement .* as run .* of pending"):
        queue.submit(as_bundle(copies[1:2]))
    queue.approve(first.submission_id)
    with pytest.raises(ValidationFailed, match=r"same measurement .* as stored run"):
        queue.submit(as_bundle(copies[2:3]))
