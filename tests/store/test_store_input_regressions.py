"""Input regressions: submit reports every problem, submitter clash, runs list messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlenergy.cli import main
from mlenergy.errors import StoreError
from mlenergy.records import Submission
from mlenergy.store import RunStore
from mlenergy.store.validation import validate_bundle

CATALOG = {"NVIDIA H100 80GB HBM3": 700.0}


def _dump(record) -> dict:
    return record.model_dump(mode="json")


def _phase(run: dict, name: str) -> dict:
    return next(p for p in run["phases"] if p["phase"] == name)


def test_schema_error_does_not_hide_the_rule_problems(tmp_path, data_dir, factory, capsys):
    """An unknown field, 1000 W on one H100 and an emulated source are all reported."""
    run = _dump(factory.make_run(seed=1, energy_source="emulated:x", decode_power_w=1000.0))
    run["bar"] = 1
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(run))
    rc = main(["submit", str(path), "--submitter", "Test Lab", "--data-dir", str(data_dir)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "bundle.bar: unknown field" in err
    assert "bundle.energy_source: 'emulated:x' comes from emulated test devices" in err
    assert "average power 1000 W is outside the plausible range" in err
    assert not data_dir.exists()


def test_raw_rules_cover_physics_and_provenance(factory):
    run = _dump(factory.make_run(seed=2))
    run["colour"] = "red"  # schema error: the rules below must still run
    decode = _phase(run, "decode")
    decode["energy_j"] = decode["avg_power_w"] * decode["duration_s"] * 1.2  # 20% off
    request = _phase(run, "request")
    request["energy_per_token_j"] *= 1.5
    run["software"]["torch"] = None
    run["software"]["zeus"] = None
    report = validate_bundle(
        json.dumps({"submitter": "Test Lab", "runs": [run]}).encode(), tdp_lookup=CATALOG.get
    )
    text = "\n".join(report.problems)
    assert not report.ok and report.submission is None
    for reason in (
        "runs[0].colour: unknown field",
        "(decode).energy_j:",
        "differs from avg_power_w x duration_s",
        "(request).energy_per_token_j:",
        "runs[0].software.torch: required",
        "runs[0].software.zeus: required",
    ):
        assert reason in text, reason
    assert text.count("unknown field") == 1


def test_raw_rules_skip_unreadable_values(factory):
    """Wrong types are named once by the schema; the rules skip them instead of crashing."""
    run = _dump(factory.make_run(seed=3))
    run["hardware"]["accelerator_count"] = "two"
    run["phases"] = [{"phase": "decode", "energy_j": "lots", "duration_s": None}, 7]
    run["software"] = "torch"
    run["idle"] = [1]
    report = validate_bundle(json.dumps(run).encode(), submitter="Test Lab", tdp_lookup=CATALOG.get)
    assert not report.ok
    text = "\n".join(report.problems)
    assert "outside the plausible range" not in text
    assert "hardware.accelerator_count" in text


def test_rule_check_matches_for_parsed_and_raw_records(factory):
    """The same rule functions run on both paths: same problems, bar the schema error."""
    run = _dump(factory.make_run(seed=4, decode_power_w=1000.0))
    good_schema = validate_bundle(
        json.dumps(run).encode(), submitter="Test Lab", tdp_lookup=CATALOG.get
    )
    run["extra"] = True
    bad_schema = validate_bundle(
        json.dumps(run).encode(), submitter="Test Lab", tdp_lookup=CATALOG.get
    )
    assert bad_schema.problems == ["bundle.extra: unknown field [schema]", *good_schema.problems]


def test_value_error_prefix_is_stripped(factory):
    run = _dump(factory.make_run(seed=5))
    run["hardware"]["accelerator_model"] = None
    report = validate_bundle(json.dumps(run).encode(), submitter="Test Lab", tdp_lookup=CATALOG.get)
    assert (
        "bundle.hardware: accelerator_count > 0 needs an accelerator_model [schema]"
        in report.problems
    )
    assert not any("Value error" in p for p in report.problems), report.problems


def test_submitter_option_must_match_the_submission(tmp_path, data_dir, factory, capsys):
    sub = Submission(submitter="Green Lab", runs=(factory.make_run(seed=6),))
    path = tmp_path / "sub.json"
    path.write_text(sub.model_dump_json())
    args = ["submit", str(path), "--data-dir", str(data_dir)]
    assert main([*args, "--submitter", "Other Lab"]) == 2
    err = capsys.readouterr().err
    assert "the file names submitter 'Green Lab'" in err and "'Other Lab'" in err
    assert not data_dir.exists()
    assert main([*args, "--submitter", " Green Lab "]) == 0
    assert "from Green Lab" in capsys.readouterr().out


def test_runs_list_without_a_store_says_so(tmp_path, capsys):
    missing = tmp_path / "nowhere"
    assert main(["runs", "list", "--data-dir", str(missing)]) == 0
    captured = capsys.readouterr()
    assert f"no store at {missing} yet" in captured.err
    assert "mlenergy bench" in captured.err and "mlenergy import" in captured.err
    assert "import-reference" not in captured.err  # a no-op now: the reference is read as shipped
    assert "run(s)" not in captured.out
    assert not missing.exists()


def test_runs_list_shows_the_request_phase_else_decode(data_dir, factory, capsys):
    full = factory.make_run(seed=7)
    other = factory.make_run(seed=8)
    decode = other.phase("decode")
    decode_only = other.model_copy(update={"phases": (decode,)})
    RunStore(data_dir).append([full, decode_only])
    assert main(["runs", "list", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "J/token" in out and "decode J/token" not in out
    request = full.phase("request").energy_per_token_j
    assert request != full.phase("decode").energy_per_token_j
    assert f"{request:.4g}" in out and f"{request:.4g} (decode)" not in out
    assert f"{full.phase('decode').energy_per_token_j:.4g}" not in out
    assert f"{decode.energy_per_token_j:.4g} (decode)" in out
    assert "whole-request phase" in " ".join(out.split())  # the footnote


def test_ensure_writable_probes_and_leaves_nothing(tmp_path):
    fresh = tmp_path / "a" / "b"
    RunStore(fresh).ensure_writable()
    assert not (tmp_path / "a").exists()
    existing = tmp_path / "data"
    (existing / "results").mkdir(parents=True)
    RunStore(existing).ensure_writable()
    assert list((existing / "results").iterdir()) == []
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="not writable"):
        RunStore(blocker / "data").ensure_writable()
    if Path("/proc/self").is_dir():  # Linux: root passes os.access checks but cannot write
        with pytest.raises(StoreError, match="not writable"):
            RunStore("/proc/mlenergy-ro").ensure_writable()
