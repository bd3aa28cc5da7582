"""ML.ENERGY's published measurements, read from the reference shipped in the package."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from mlenergy.cli import main
from mlenergy.reference import reference_dir
from mlenergy.reference.runs import read_reference

REF = reference_dir()


@pytest.fixture(scope="module")
def records():
    return read_reference(REF)


def test_every_row_becomes_a_truthfully_labelled_record(records):
    folder = REF / "mlenergy-leaderboard"
    rows = sum(1 for f in folder.glob("*.csv") for _ in csv.DictReader(f.open()))
    assert len(records) == rows
    assert len({r.run_id for r in records}) == len(records)
    for rec in records:
        assert rec.energy_source == "measured:zeus-nvml"
        assert rec.software.engine.startswith("vllm ")
        assert rec.submission.submitter.startswith("ML.ENERGY Leaderboard v")
        assert rec.tags["input_tokens"] == "unknown"


def test_v3_figures_match_the_csv(records):
    with (REF / "mlenergy-leaderboard" / "v3_llm.csv").open() as fh:
        first = next(csv.DictReader(fh))
    rec = records[0]
    phase = rec.phases[0]
    assert rec.model.model_id == first["model_id"]
    assert phase.energy_per_token_j == pytest.approx(float(first["energy_per_token_joules"]))
    assert phase.avg_power_w == pytest.approx(float(first["avg_power_watts"]), rel=1e-3)
    assert phase.itl_p50_s == pytest.approx(float(first["median_itl_ms"]) / 1000)
    assert rec.hardware.accelerator_count == int(first["num_gpus"])
    assert rec.software.engine == "vllm 0.11.1"


def test_one_vocabulary_and_the_published_mean_lengths(records):
    tasks = {r.workload.task for r in records if r.software.engine == "vllm 0.5.4"}
    assert tasks == {"sharegpt-chat", "code"}  # the estimator's labels of the 2024 tasks
    assert {r.hardware.accelerator_model for r in records} == {"H100-SXM5-80GB", "B200"}
    with (REF / "mlenergy-leaderboard" / "v3_llm.csv").open() as fh:
        first = next(csv.DictReader(fh))
    w = records[0].workload
    assert w.avg_output_tokens == pytest.approx(float(first["avg_output_len"]))
    assert w.output_tokens == max(1, round(float(first["avg_output_len"])))


def test_the_calibration_frame_is_read_from_the_records(records):
    from mlenergy.reference.measurements import load_reference, measurements_from_records

    frame = load_reference(REF)
    again = measurements_from_records(records, REF / "model-configs")
    assert len(frame) == len(records) == len(again)
    assert (frame["run_id"] == [r.run_id for r in records]).all()
    assert frame["output_tokens"].tolist() == [r.workload.avg_output_tokens for r in records]
    assert frame["input_tokens"].isna().all()  # unknown: the task default applies
    assert set(frame.loc[frame["legacy"], "source"]) == {"v2"}


def test_params_come_from_configs(records):
    by_id = {r.model.model_id: r.model for r in records}
    qwen = by_id["Qwen/Qwen3-30B-A3B-Instruct-2507"]
    assert qwen.is_moe and qwen.num_experts == 128 and qwen.experts_per_token == 8
    assert qwen.total_params == pytest.approx(30.5e9, rel=0.02)
    assert qwen.active_params == pytest.approx(3.3e9, rel=0.05)
    # FP8 variant shares the architecture (and fingerprint) of its base model
    fp8 = by_id["Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"]
    assert fp8.config_fingerprint == by_id["Qwen/Qwen3-235B-A22B-Instruct-2507"].config_fingerprint


def test_cli_bad_port_is_a_user_error(tmp_path, capsys):
    assert main(["leaderboard", "--data-dir", str(tmp_path), "--port", "70000"]) == 2
    assert "error:" in capsys.readouterr().err


def test_space_entry_point_is_a_few_lines():
    entry = Path(__file__).resolve().parents[2] / "leaderboard" / "app.py"
    assert len(entry.read_text(encoding="utf-8").splitlines()) < 15
