import numpy as np
import pandas as pd
import pytest

from mlenergy.analysis.frontier import pareto_frontier, pareto_mask


def test_mask_minimise_both_known_answer():
    # (1,5) (2,3) (3,4) (4,1) (5,2): (3,4) is dominated by (2,3); (5,2) by (4,1).
    x = [1, 2, 3, 4, 5]
    y = [5, 3, 4, 1, 2]
    assert pareto_mask(x, y).tolist() == [True, True, False, True, False]


def test_mask_maximise_y():
    # energy (minimise) vs accuracy (maximise)
    x = [1.0, 2.0, 3.0, 2.5]
    y = [0.5, 0.7, 0.9, 0.6]
    assert pareto_mask(x, y, minimize_y=False).tolist() == [True, True, True, False]


def test_nan_never_on_frontier_and_duplicates_kept():
    x = [1.0, np.nan, 1.0, 2.0]
    y = [1.0, 0.0, 1.0, 0.5]
    assert pareto_mask(x, y).tolist() == [True, False, True, True]


def test_equal_x_keeps_only_best_y():
    assert pareto_mask([1, 1, 2], [3, 2, 1]).tolist() == [False, True, True]


def test_frontier_frame_sorted_and_checked():
    df = pd.DataFrame({"e": [3, 1, 2], "ppl": [10, 30, 20], "name": ["c", "a", "b"]})
    front = pareto_frontier(df, "e", "ppl")
    assert front["name"].tolist() == ["a", "b", "c"]
    with pytest.raises(KeyError, match="nope"):
        pareto_frontier(df, "e", "nope")


def test_matches_brute_force():
    rng = np.random.default_rng(0)
    x, y = rng.random(200), rng.random(200)
    brute = [
        not any(
            (x[j] <= x[i] and y[j] <= y[i]) and (x[j] < x[i] or y[j] < y[i]) for j in range(200)
        )
        for i in range(200)
    ]
    assert pareto_mask(x, y).tolist() == brute
