"""Imports round-trip through the store, show on the leaderboard, deduplicate and submit."""

from __future__ import annotations

import pandas as pd
import pytest
from importer_fixtures import (
    FIXTURES,
    HARNESS_CONFIGS,
    LM_EVAL_OLD,
    LM_EVAL_REAL,
    MLEB,
    OPTIMUM,
    RUN_DENSE,
    RUN_MOE,
    ZEUS_LOG,
)

from mlenergy.cli import main
from mlenergy.leaderboard.query import TableQuery, prepare_runs, query_table
from mlenergy.leaderboard.views import attach_quality, quality_frame, quality_key
from mlenergy.store import RunStore, SubmissionQueue

ZEUS_BAD = (
    "--model",
    "Qwen/Qwen3-8B",
    "--gpu",
    "H100",
    "--tokens",
    "prefill=1",
    "--tokens",
    "decode=1",
)
ZEUS_TOKENS = ("--tokens", "prefill=2048", "--tokens", "decode=4096")


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _import_all(capsys, configs_dir, data_dir) -> list[str]:
    common = ("--configs-dir", configs_dir, "--data-dir", data_dir)
    outputs = []
    for argv in (
        ("mlenergy-benchmark", RUN_DENSE, RUN_MOE, "--harness-configs", HARNESS_CONFIGS),
        ("lm-eval", LM_EVAL_REAL, LM_EVAL_OLD),
        ("optimum-benchmark", OPTIMUM),
        ("zeus-log", ZEUS_LOG, "--model", "Qwen/Qwen3-8B", "--gpu", "H100", *ZEUS_TOKENS),
    ):
        code, out, err = _run(capsys, "import", *argv, *common)
        assert code == 0, err
        outputs.append(out)
    return outputs


def test_every_format_round_trips_through_the_store(capsys, configs_dir, data_dir):
    outputs = _import_all(capsys, configs_dir, data_dir)
    assert "added 2 record(s)" in outputs[0]
    # stored anyway, but told what a later --submit would need
    assert "submission rules: run mleb" in outputs[0] and "software.zeus" in outputs[0]
    assert "submission rules" not in outputs[1] + outputs[2]
    assert "added 10 record(s)" in outputs[1]
    assert "quality of Qwen/Qwen3-8B joins 1 stored energy run(s)" in outputs[1]
    assert "measured:codecarbon" in outputs[2]
    store = RunStore(data_dir)
    runs = store.runs()
    assert len(runs) == 5 and len(store.quality()) == 10
    by_source = {r.tags["imported_from"] for r in runs}
    assert by_source == {"mlenergy-benchmark", "optimum-benchmark", "zeus-log"}
    from mlenergy.importers.mlenergy_benchmark import HarnessOptions, read_run

    fresh = read_run(RUN_DENSE, HarnessOptions(configs_dir=configs_dir)).records[0]
    stored = store.get(fresh.run_id)
    assert stored == fresh  # the whole record, power timeline included
    frame = store.runs_frame()
    row = frame[frame["run_id"] == fresh.run_id].iloc[0]
    assert row["request_energy_per_token_j"] == pytest.approx(0.0915)
    assert row["energy_source"] == "measured:zeus-nvml"


def test_reimporting_adds_nothing(capsys, configs_dir, data_dir):
    _import_all(capsys, configs_dir, data_dir)
    before = (len(RunStore(data_dir).runs()), len(RunStore(data_dir).quality()))
    outputs = _import_all(capsys, configs_dir, data_dir)
    assert all("added 0 record(s)" in out for out in outputs), outputs
    assert (len(RunStore(data_dir).runs()), len(RunStore(data_dir).quality())) == before


def test_leaderboard_shows_imported_runs_with_lm_eval_quality(capsys, configs_dir, data_dir):
    _import_all(capsys, configs_dir, data_dir)
    store = RunStore(data_dir)
    runs = prepare_runs(store.runs_frame())
    result = query_table(runs, TableQuery(task="lm-arena-chat", best_only=False))
    assert result.total == 1
    row = result.page_rows.iloc[0]
    assert row["model_id"] == "Qwen/Qwen3-8B" and row["hardware"] == "H100-SXM5-80GB"
    assert row["energy_per_token_j"] == pytest.approx(0.0915)
    gpqa = query_table(runs, TableQuery(task="gpqa")).page_rows.iloc[0]
    assert gpqa["arch_kind"] == "MoE"
    quality = quality_frame(store.quality_frame())
    key = quality_key("lm-eval:arc_easy", "acc")
    joined = attach_quality(runs, quality, key)
    dense = joined[joined["task"] == "lm-arena-chat"].iloc[0]
    assert dense["quality"] == pytest.approx(0.8312)
    assert dense["quality_link"] == "same model"  # model id + config fingerprint
    assert pd.isna(joined[joined["task"] == "gpqa"].iloc[0]["quality"])


@pytest.mark.parametrize(
    "argv,key",
    [
        (
            ("mlenergy-benchmark", MLEB / "broken" / "missing_energy", "--task", "t"),
            "steady_state_energy",
        ),
        (
            ("mlenergy-benchmark", MLEB / "broken" / "zero_energy", "--task", "t"),
            "steady_state_energy",
        ),
        (("mlenergy-benchmark", MLEB / "broken" / "unknown_gpu", "--task", "t"), "gpu_model"),
        (("mlenergy-benchmark", MLEB / "broken" / "not_a_run"), "not a run folder"),
        (("lm-eval", FIXTURES / "lm_eval" / "broken_no_numeric_metric.json"), "results"),
        (
            ("optimum-benchmark", FIXTURES / "optimum_benchmark" / "broken_zero_gpu_energy.json"),
            "energy.gpu",
        ),
        (
            ("zeus-log", FIXTURES / "zeus" / "broken_negative_energy.csv", *ZEUS_BAD),
            "gpu0_energy",
        ),
    ],
    ids=[
        "missing key",
        "zero energy",
        "unknown gpu",
        "not a run",
        "no metric",
        "zero gpu",
        "negative",
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(capsys, configs_dir, data_dir, argv, key):
    # a good run first in the same call: nothing of it is written either
    good = () if argv[0] != "mlenergy-benchmark" else (RUN_DENSE,)
    code, _, err = _run(
        capsys,
        "import",
        argv[0],
        *good,
        *argv[1:],
        "--configs-dir",
        configs_dir,
        "--data-dir",
        data_dir,
    )
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and key in lines[0]
    assert not data_dir.exists()


def test_submit_goes_through_the_review_queue_once(capsys, configs_dir, data_dir):
    argv = ("import", "mlenergy-benchmark", RUN_DENSE, "--configs-dir", configs_dir)
    argv += ("--data-dir", data_dir, "--submit", "--submitter", "Lab A", "--zeus-version", "0.11.0")
    code, out, err = _run(capsys, *argv)
    assert code == 0, err
    assert "queued " in out and "awaiting approval" in out
    queue = SubmissionQueue(data_dir)
    (entry,) = queue.list("pending")
    assert entry.submission.submitter == "Lab A"
    assert not (data_dir / "results").exists()  # nothing stored before approval
    code, out, _ = _run(capsys, *argv)
    assert code == 0 and "nothing to submit" in out
    assert len(queue.list("pending")) == 1
    queue.approve(entry.submission_id)
    assert RunStore(data_dir).runs()[0].submission.submitter == "Lab A"
    code, out, _ = _run(capsys, *argv)
    assert "nothing to submit" in out


def test_submit_reports_the_validation_problems_and_queues_nothing(capsys, configs_dir, data_dir):
    argv = ("import", "mlenergy-benchmark", RUN_DENSE, "--configs-dir", configs_dir)
    code, out, err = _run(capsys, *argv, "--data-dir", data_dir, "--submit", "--submitter", "Lab A")
    assert code == 2
    assert "software.zeus: required for a Zeus measurement" in out + err
    assert SubmissionQueue(data_dir).list("pending") == []


def test_quality_alone_cannot_be_submitted_and_submit_needs_a_name(capsys, configs_dir, data_dir):
    argv = ("import", "lm-eval", LM_EVAL_REAL, "--configs-dir", configs_dir, "--data-dir", data_dir)
    code, _, err = _run(capsys, *argv, "--submit", "--submitter", "Lab A")
    assert code == 2 and "needs at least one run record" in err
    code, _, err = _run(capsys, *argv, "--submit")
    assert code == 2 and "--submitter" in err
    assert not data_dir.exists()


def test_bundle_joins_energy_and_quality_in_one_submission(capsys, configs_dir, data_dir, tmp_path):
    bundle = tmp_path / "bundle.jsonl"
    common = ("--configs-dir", configs_dir, "--data-dir", data_dir, "--bundle", bundle)
    harness = ("import", "mlenergy-benchmark", MLEB / "run", "--recursive", *common)
    code, out, err = _run(capsys, *harness, "--zeus-version", "0.11.0")
    assert code == 0, err
    assert "wrote 2 record(s)" in out  # both run folders found below run/
    code, out, err = _run(capsys, "import", "lm-eval", LM_EVAL_OLD, *common)
    assert code == 0 and "wrote 5 record(s)" in out, err
    code, out, _ = _run(capsys, "import", "lm-eval", LM_EVAL_OLD, *common)
    assert "wrote 0 record(s)" in out and "5 already in it" in out
    assert len(bundle.read_text().splitlines()) == 7
    assert not data_dir.exists()  # a bundle is not the store
    code, out, err = _run(capsys, "submit", bundle, "--submitter", "Lab Z", "--data-dir", data_dir)
    assert code == 0, err
    (entry,) = SubmissionQueue(data_dir).list("pending")
    assert len(entry.submission.runs) == 2 and len(entry.submission.quality) == 5


def test_a_foreign_bundle_file_is_not_overwritten(capsys, configs_dir, data_dir, tmp_path):
    bundle = tmp_path / "notes.jsonl"
    bundle.write_text('{"hello": 1}\n')
    argv = ("import", "lm-eval", LM_EVAL_OLD, "--configs-dir", configs_dir, "--bundle", bundle)
    code, _, err = _run(capsys, *argv)
    assert code == 2 and "line 1: not a run or quality record" in err
    assert bundle.read_text() == '{"hello": 1}\n'


def test_recursive_without_runs_below_is_not_a_run(capsys, configs_dir, data_dir):
    argv = ("import", "mlenergy-benchmark", MLEB / "broken" / "not_a_run", "--recursive")
    code, _, err = _run(capsys, *argv, "--configs-dir", configs_dir, "--data-dir", data_dir)
    assert code == 2 and "not a run folder" in err
