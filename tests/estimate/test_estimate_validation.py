"""Calibration and grouped cross-validation on the reference measurements."""

from __future__ import annotations

import numpy as np
import pytest

from mlenergy.calibrate.crossval import architecture_group, cross_validate, in_sample
from mlenergy.estimate.coefficients import default_coefficients
from mlenergy.reference.measurements import (
    config_id_for,
    load_reference,
    measurements_from_records,
    model_group,
)


def test_reference_loads_tidy():
    df = load_reference()
    assert len(df) == 673 + 105 + 52
    assert set(df["gpu"]) == {"H100-SXM5-80GB", "B200"}
    # identity from the reference README: energy per token = power / throughput
    ratio = df["avg_power_w"] / df["throughput_tokens_per_s"] / df["energy_per_token_j"]
    assert np.allclose(ratio[df["source"] == "v3"], 1.0, rtol=1e-3)


def test_config_aliases():
    assert config_id_for("Qwen/Qwen3-235B-A22B-Thinking-2507-FP8") == (
        "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"
    )
    assert config_id_for("nvidia/NVIDIA-Nemotron-Nano-12B-v2-VL-BF16") == (
        "nvidia/NVIDIA-Nemotron-Nano-12B-v2"
    )
    assert model_group("meta-llama/Meta-Llama-3.1-8B-Instruct") == model_group(
        "meta-llama/Llama-3.1-8B-Instruct-FP8"
    )


def test_every_reference_row_is_estimable():
    rows = in_sample(load_reference())
    assert len(rows) == 830
    assert np.isfinite(rows["pred_energy_per_token_j"]).all()


def test_shipped_coefficients_fit_the_reference():
    rows = in_sample(load_reference())
    assert rows["ape_energy"].median() < 25
    assert set(default_coefficients().calibrated_gpus) == {"B200", "H100-SXM5-80GB"}


@pytest.mark.slow
def test_grouped_cv_keeps_architectures_apart():
    df = load_reference()
    cv = cross_validate(df, folds=5)
    assert cv.folds == 5
    # Qwen3-8B and Qwen3-VL-8B share a text architecture, hence a group
    assert architecture_group("Qwen/Qwen3-8B") == architecture_group("Qwen/Qwen3-VL-8B-Instruct")
    summary = cv.summary()
    # regression guard at the currently achieved level (see README for the measured figures)
    assert summary.loc["all", "energy_median"] < 20
    assert summary.loc["all", "throughput_median"] < 20
    assert summary.loc["all", "power_median"] < 15
    by_kind = cv.summary("kind")
    assert set(by_kind.index) == {"dense", "moe", "hybrid"}
    # the host-bound flag follows the inputs only: one B200, a gpqa / image / video task
    rows = cv.rows
    expected = (
        (rows["gpu"] == "B200")
        & (rows["num_gpus"] == 1)
        & rows["task"].isin(["gpqa", "image-chat", "video-chat"])
    )
    assert rows["host_bound"].sum() > 0
    assert (rows["host_bound"] == expected).all()


@pytest.mark.slow
def test_store_measurements_join_the_fit(measured_run):
    import pandas as pd

    from mlenergy.calibrate.calibration import calibrate

    runs = [
        measured_run("NVIDIA H100 80GB HBM3"),
        measured_run("H100", "estimated:mlenergy-0.1.0"),
        measured_run("a GPU the catalog does not know"),
    ]
    extra = measurements_from_records(runs)
    assert len(extra) == 1 and extra.loc[0, "gpu"] == "H100-SXM5-80GB"
    assert extra.loc[0, "throughput_tokens_per_s"] == pytest.approx(3000.0)
    assert extra.loc[0, "avg_power_w"] == pytest.approx(550.0)
    assert extra.loc[0, "input_tokens"] == 256 and extra.loc[0, "source"] == "store"
    assert measurements_from_records([]).empty
    df = pd.concat([load_reference(include_v2=False), extra], ignore_index=True)
    coef, used = calibrate(df)
    assert len(used) == 674 and 0 < coef.eta_mem <= 1


@pytest.mark.slow  # over ~20 s on 2 shared cores; left out by `make test-fast`
def test_fit_without_2024_rows_keeps_the_legacy_coefficients():
    from mlenergy.calibrate.calibration import LEGACY_COEFFICIENTS, calibrate
    from mlenergy.estimate.coefficients import Coefficients

    v3 = load_reference(include_v2=False)
    start = Coefficients()
    coef, _ = calibrate(v3[v3["model_id"].str.contains("Qwen3-8B|Llama-3.1-8B")], start=start)
    for name in LEGACY_COEFFICIENTS:
        assert getattr(coef, name) == getattr(start, name)
    assert coef.seq_s != start.seq_s  # the identified ones are fitted


@pytest.mark.slow  # over ~20 s on 2 shared cores; left out by `make test-fast`
def test_cv_folds_start_from_the_code_defaults_not_the_shipped_fit(monkeypatch):
    from mlenergy.calibrate import crossval
    from mlenergy.estimate.coefficients import Coefficients

    starts = []
    real_fit = crossval.fit

    def spy(*args, **kwargs):
        starts.append(kwargs["start"])
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(crossval, "fit", spy)
    df = load_reference(include_v2=False)
    cross_validate(df[df["model_id"].str.contains("Qwen3-8B|Llama-3.1-8B|gemma-3")], folds=2)
    neutral = Coefficients()
    assert starts and all(s.seq_s == neutral.seq_s for s in starts)
    assert all(s.moe_min_cols == neutral.moe_min_cols for s in starts)


def test_summary_reports_signed_errors_and_interval_coverage():
    import pandas as pd

    from mlenergy.calibrate.crossval import CrossValidation, in_interval

    coef = default_coefficients()
    q05, q95 = coef.interval_logs(False)
    pred = np.array([1.0, 1.0, 1.0, 1.0])
    measured = np.exp(np.array([q05 - 0.01, 0.0, q95 - 0.01, q95 + 0.01]))
    rows = pd.DataFrame(
        {
            "gpu": ["H100", "H100", "B200", "B200"],
            "pred_energy_per_token_j": pred,
            "energy_per_token_j": measured,
            "host_bound": [False] * 4,
            "ape_energy": [1.0, 2.0, 3.0, 4.0],
            "ape_throughput": [10.0, 20.0, 10.0, 30.0],
            "ape_power": [5.0, 5.0, 5.0, 5.0],
            "signed_throughput": [10.0, 20.0, -10.0, -30.0],
            "signed_power": [5.0, -5.0, 5.0, 5.0],
        }
    )
    rows["in_interval"] = in_interval(rows, coef, unseen_gpu=False)
    assert rows["in_interval"].tolist() == [False, True, True, False]
    # widened for a GPU the fit never saw, the first row falls inside
    assert in_interval(rows, coef, unseen_gpu=True)[0]
    by_gpu = CrossValidation(rows=rows, folds=2).summary("gpu")
    assert by_gpu.loc["H100", "throughput_signed"] == pytest.approx(15.0)
    assert by_gpu.loc["B200", "throughput_signed"] == pytest.approx(-20.0)
    assert by_gpu.loc["H100", "throughput_median"] == pytest.approx(15.0)
    assert by_gpu.loc["H100", "interval_coverage"] == pytest.approx(50.0)
    assert by_gpu.loc["B200", "power_signed"] == pytest.approx(5.0)
