"""Reserved names cannot be submitted; measured runs without a real run's provenance are flagged."""

from __future__ import annotations

import json

import pytest

from mlenergy.cli import main
from mlenergy.errors import ValidationFailed
from mlenergy.records import PowerTimeline
from mlenergy.store import RunStore
from mlenergy.store.submissions import SubmissionQueue
from mlenergy.store.validation import validate_bundle


def _dump(record) -> dict:
    return record.model_dump(mode="json")


def _bundle(*runs: dict, submitter: str = "Green Lab") -> bytes:
    return json.dumps({"submitter": submitter, "runs": list(runs)}).encode()


def _timeline(span_s: float, source: str = "measured:zeus-nvml") -> PowerTimeline:
    times = tuple(span_s * i / 20 for i in range(21))
    return PowerTimeline(t_s=times, power_w=tuple(450.0 for _ in times), energy_source=source)


@pytest.mark.parametrize(
    "submitter",
    [
        "ML.ENERGY Leaderboard v3",
        "ML.ENERGY Leaderboard v2",
        "ml energy leaderboard V3",
        "ＭＬ.ENERGY Leaderboard v3",
        "mlenergy",
    ],
)
def test_reserved_submitter_names_are_refused(factory, submitter):
    report = validate_bundle(_bundle(_dump(factory.make_run(seed=1)), submitter=submitter))
    assert any(p.endswith("[no-reserved-submitter]") for p in report.problems), report.problems


def test_reserved_name_inside_a_record_and_on_the_command_line(factory):
    run = _dump(factory.make_run(seed=2))
    run["submission"] = {
        "submission_id": "x1",
        "submitter": "ML.ENERGY Leaderboard v3",
        "submitted_at": "2026-01-01T00:00:00Z",
    }
    report = validate_bundle(_bundle(run))
    assert any("runs[0].submission.submitter" in p for p in report.problems)
    bare = (json.dumps(_dump(factory.make_run(seed=3))) + "\n").encode()
    report = validate_bundle(bare, submitter="ML.ENERGY Leaderboard v2")
    assert any("[no-reserved-submitter]" in p for p in report.problems)


@pytest.mark.parametrize(
    ("fields", "check"),
    [
        ({"energy_source": "reference:mlenergy-v3"}, "no-reserved-source"),
        ({"energy_source": "emulated:zeus-gpu"}, "no-emulated-source"),
        ({"accelerator_model": "Emulated GPU"}, "no-emulated-source"),
    ],
)
def test_reserved_labels_are_refused(factory, fields, check):
    report = validate_bundle(_bundle(_dump(factory.make_run(seed=4, **fields))))
    assert any(p.endswith(f"[{check}]") for p in report.problems), report.problems


def test_reference_timeline_source_is_refused(factory):
    run = factory.make_run(seed=5, power_timeline=_timeline(10.0, "reference:mlenergy-v3"))
    report = validate_bundle(_bundle(_dump(run)))
    assert any("power_timeline.energy_source" in p for p in report.problems)


def test_unverified_measured_run_is_queued_and_flagged_on_the_leaderboard(data_dir, factory):
    bare = factory.make_run(seed=6)  # no power timeline
    full = factory.make_run(seed=7, power_timeline=_timeline(9.4))
    short = factory.make_run(seed=8, power_timeline=_timeline(1.0))
    report = validate_bundle(_bundle(_dump(bare), _dump(full), _dump(short)))
    assert report.ok, report.problems
    assert [u.split(":")[0] for u in report.unverified] == ["runs[0]", "runs[2]"]
    assert "no measured power timeline" in report.unverified[0]
    assert "spans 1 s of the 9.57 s phase window" in report.unverified[1]
    queue = SubmissionQueue(data_dir)
    entry = queue.submit(_bundle(_dump(bare), _dump(full), _dump(short)))
    queue.approve(entry.submission_id)
    frame = RunStore(data_dir).runs_frame().set_index("run_id")
    assert frame.loc[bare.run_id, "unverified"]
    assert not frame.loc[full.run_id, "unverified"]
    assert frame.loc[short.run_id, "unverified"]
    stored = RunStore(data_dir).get(bare.run_id)
    assert "no measured power timeline" in stored.submission.unverified


def test_submit_says_which_runs_will_show_as_unverified(tmp_path, data_dir, factory, capsys):
    path = tmp_path / "b.json"
    path.write_bytes(_bundle(_dump(factory.make_run(seed=9))))
    assert main(["submit", str(path), "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "will be shown as unverified (no measured power timeline)" in out


def test_reserved_submitter_is_not_queued(data_dir, factory):
    with pytest.raises(ValidationFailed, match="reserved"):
        SubmissionQueue(data_dir).submit(
            _bundle(_dump(factory.make_run(seed=10)), submitter="ML.ENERGY Leaderboard v3")
        )
