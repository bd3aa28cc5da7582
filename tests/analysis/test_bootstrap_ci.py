import numpy as np
import pandas as pd
import pytest

from mlenergy.analysis.bootstrap import bootstrap_ci, bootstrap_ratio_ci, bootstrap_table


def test_single_and_constant_samples_give_degenerate_intervals():
    ci = bootstrap_ci([3.0])
    assert (ci.estimate, ci.low, ci.high, ci.n) == (3.0, 3.0, 3.0, 1)
    ci = bootstrap_ci([2.0, 2.0, 2.0, np.nan])
    assert (ci.low, ci.high, ci.n) == (2.0, 2.0, 3)
    assert bootstrap_ci([np.nan]) is None
    assert bootstrap_ci([]) is None


def test_interval_matches_normal_theory_for_a_large_sample():
    rng = np.random.default_rng(1)
    x = rng.normal(10.0, 2.0, size=400)
    ci = bootstrap_ci(x, n_resamples=4000, seed=3)
    se = x.std(ddof=1) / np.sqrt(x.size)
    assert ci.estimate == pytest.approx(x.mean())
    assert ci.low == pytest.approx(x.mean() - 1.96 * se, abs=0.25 * se)
    assert ci.high == pytest.approx(x.mean() + 1.96 * se, abs=0.25 * se)
    assert ci.half_width == pytest.approx(1.96 * se, rel=0.15)
    # deterministic for a fixed seed
    assert bootstrap_ci(x, seed=3, n_resamples=4000) == ci


def test_other_statistics_and_bad_confidence():
    ci = bootstrap_ci([1.0, 2.0, 100.0], statistic=np.median)
    assert ci.estimate == 2.0
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, 2.0], confidence=1.5)


def test_ratio_interval():
    ci = bootstrap_ratio_ci([2.0, 2.0], [1.0, 1.0])
    assert (ci.estimate, ci.low, ci.high) == (2.0, 2.0, 2.0)
    ci = bootstrap_ratio_ci([1.8, 2.2, 2.0, 1.9, 2.1], [1.0, 1.1, 0.9, 1.0, 1.0])
    assert ci.low < 2.0 < ci.high
    assert ci.estimate == pytest.approx(2.0)
    assert bootstrap_ratio_ci([1.0], [0.0]) is None
    assert bootstrap_ratio_ci([], [1.0]) is None


def test_bootstrap_table_groups():
    df = pd.DataFrame({"v": ["a", "a", "b"], "x": [1.0, 3.0, 5.0]})
    t = bootstrap_table(df, "v", "x")
    assert list(t.columns) == ["v", "x_mean", "x_ci_low", "x_ci_high", "n"]
    a = t.set_index("v").loc["a"]
    assert a["x_mean"] == 2.0 and a["x_ci_low"] >= 1.0 and a["x_ci_high"] <= 3.0 and a["n"] == 2
    assert t.set_index("v").loc["b", "x_ci_low"] == 5.0
