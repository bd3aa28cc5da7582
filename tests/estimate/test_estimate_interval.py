"""The prediction interval per GPU and architecture family, where the data say so."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mlenergy.calibrate.calibration import MIN_CLASS_ROWS, interval_quantiles
from mlenergy.estimate import estimate
from mlenergy.estimate.batch import estimate_frame
from mlenergy.estimate.coefficients import Coefficients, default_coefficients


def test_a_class_with_enough_rows_gets_its_own_quantiles():
    rng = np.random.default_rng(1)
    n = MIN_CLASS_ROWS + 5
    rows = pd.DataFrame(
        {
            "gpu": ["B200"] * n + ["H100-SXM5-80GB"] * (MIN_CLASS_ROWS - 1),
            "kind": ["moe"] * n + ["dense"] * (MIN_CLASS_ROWS - 1),
            "num_gpus": 2,
            "task": "lm-arena-chat",
            "log_ratio_energy": np.r_[
                rng.normal(0, 0.5, n), rng.normal(0, 0.05, MIN_CLASS_ROWS - 1)
            ],
        }
    )
    q = interval_quantiles(rows)
    assert set(q["interval_by_class"]) == {"B200/moe"}  # the H100 class has too few rows
    lo, hi = q["interval_by_class"]["B200/moe"]
    assert lo < q["log_q05"] and hi > q["log_q95"]  # wider than the pooled interval


def _factors(coef: Coefficients, model: str, gpu: str) -> tuple[float, float]:
    """The (low, high) factors of an estimate's 90% interval of energy per token."""
    e = estimate(model, gpu, batch_size=8, input_tokens=128, output_tokens=128, coefficients=coef)
    return (
        e.energy_per_token_j_lo / e.energy_per_token_j,
        e.energy_per_token_j_hi / e.energy_per_token_j,
    )


def test_estimates_take_their_class_interval(tmp_path):
    coef = default_coefficients().replace(
        interval_by_class={"B200/dense": (-0.1, 0.1), "H100-SXM5-80GB/dense": (-0.5, 0.9)}
    )
    dense, moe = "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B"
    assert _factors(coef, dense, "B200") == pytest.approx((np.exp(-0.1), np.exp(0.1)))
    assert _factors(coef, moe, "B200") == pytest.approx(
        (np.exp(coef.log_q05), np.exp(coef.log_q95))
    )
    widen = coef.unseen_gpu_widen  # a GPU the fit never saw: the pooled interval, widened
    assert _factors(coef, dense, "A100-SXM4-80GB") == pytest.approx(
        (np.exp(coef.log_q05 * widen), np.exp(coef.log_q95 * widen))
    )
    saved = Coefficients.load(coef.save(tmp_path))
    assert saved.interval_by_class == coef.interval_by_class


def test_single_and_batch_paths_agree_on_the_interval(tiny_config):
    coef = default_coefficients().replace(interval_by_class={"H100-SXM5-80GB/dense": (-0.5, 0.9)})
    kw = dict(batch_size=16, input_tokens=128, output_tokens=128, coefficients=coef)
    one = estimate(str(tiny_config), "H100", **kw)
    assert one.energy_per_token_j_hi / one.energy_per_token_j == pytest.approx(np.exp(0.9))
    rows = pd.DataFrame(
        {
            "model": [str(tiny_config)] * 2,
            "gpu": ["H100", "B200"],
            "batch_size": [16, 16],
            "input_tokens": [128, 128],
            "output_tokens": [128, 128],
        }
    )
    out = estimate_frame(rows, coefficients=coef)
    hi = out["energy_per_token_j_hi"] / out["energy_per_token_j"]
    assert hi[0] == pytest.approx(np.exp(0.9))
    assert hi[1] == pytest.approx(np.exp(coef.interval_logs(False, "B200/dense")[1]))


def test_the_shipped_classes_are_wider_where_the_data_say_so():
    shipped = default_coefficients().interval_by_class
    hi = shipped["B200/moe"][1]
    assert hi > default_coefficients().log_q95  # B200 MoE rows were under-covered
