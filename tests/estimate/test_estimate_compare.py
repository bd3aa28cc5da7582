"""Measured runs of a store beside their estimates (``mlenergy estimate compare``)."""

from __future__ import annotations

import json

import pytest

from mlenergy.calibrate.compare import compare_runs
from mlenergy.calibrate.crossval import in_sample
from mlenergy.cli import main
from mlenergy.reference.measurements import measurements_from_records
from mlenergy.store import RunStore


def test_each_half_is_compared_signed(configs_dir, measured_run):
    runs = [
        measured_run("H100"),
        measured_run("H100", model_id="org/no-such-model"),
        measured_run("H100", "emulated:test"),
    ]
    result = compare_runs(runs, configs_dir)
    assert len(result.rows) == 1
    row = result.rows.iloc[0]
    pred = in_sample(measurements_from_records(runs[:1], configs_dir), configs_dir=configs_dir)
    assert row["pred_throughput_tokens_per_s"] == pytest.approx(
        pred["pred_throughput_tokens_per_s"][0]
    )
    assert row["signed_throughput"] == pytest.approx(
        100 * (row["pred_throughput_tokens_per_s"] / 3000.0 - 1)
    )
    assert row["signed_power"] == pytest.approx(100 * (row["pred_avg_power_w"] / 550.0 - 1))
    assert [r for r, _ in result.skipped] == [runs[1].run_id]
    assert "org/no-such-model" in result.skipped[0][1]
    summary = result.summary()
    assert summary.loc["power", "signed_median"] == pytest.approx(row["signed_power"])
    assert summary.loc["power", "abs_median"] == pytest.approx(abs(row["signed_power"]))


def test_compare_command_reads_the_store(tmp_path, capsys, configs_dir, measured_run):
    RunStore(tmp_path).append([measured_run("NVIDIA H100 80GB HBM3")])
    argv = ["estimate", "compare", "--data-dir", str(tmp_path), "--configs-dir", str(configs_dir)]
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["runs"]) == 1 and data["runs"][0]["gpu"] == "H100-SXM5-80GB"
    assert set(data["summary"]) == {"energy", "throughput", "power"}
    assert main(argv) == 0
    assert "errors by half" in capsys.readouterr().out


def test_compare_on_an_empty_store_says_so(tmp_path, capsys):
    assert main(["estimate", "compare", "--data-dir", str(tmp_path)]) == 0
    assert "no measured GPU serving run" in capsys.readouterr().err


def test_validate_and_calibrate_count_a_stores_own_runs_once(configs_dir, measured_run):
    from mlenergy.reference.measurements import own_measurements
    from mlenergy.reference.runs import read_reference

    reference = read_reference()[:3]
    own = own_measurements([*reference, measured_run()], configs_dir)
    assert len(own) == 1 and own.loc[0, "source"] == "store"


@pytest.mark.slow
def test_validate_store_adds_the_stores_runs(tmp_path, capsys, configs_dir, measured_run):
    RunStore(tmp_path).append([measured_run()])
    argv = ["estimate", "validate", "--store", str(tmp_path), "--no-v2", "--folds", "2"]
    assert main([*argv, "--group-by", "source", "--json"]) == 0
    captured = capsys.readouterr()
    assert "1 measured GPU serving run(s)" in captured.err
    data = json.loads(captured.out)
    assert data["source"]["store"]["n"] == 1 and data["source"]["v3"]["n"] == 673


def test_serving_runs_are_compared_and_static_batches_are_not(configs_dir, measured_run):
    base = measured_run("H100")

    def with_method(method):
        workload = base.workload.model_copy(update={"method": method})
        return base.model_copy(update={"workload": workload, "run_id": f"run-{method}"})

    serving, static = with_method("serving-steady-state"), with_method("static-batch")
    rows = measurements_from_records([serving, static], configs_dir)
    assert list(rows["run_id"]) == [serving.run_id]
    assert len(compare_runs([serving, static], configs_dir).rows) == 1
