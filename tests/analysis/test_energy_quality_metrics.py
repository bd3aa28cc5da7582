import math

import numpy as np
import pandas as pd
import pytest

from mlenergy.analysis import energy_quality as eq
from mlenergy.analysis.frontier import pareto_frontier


def test_energy_to_reach_interpolates_in_log_perplexity():
    energy = [0.0, 100.0, 200.0, 300.0]
    ppl = [1000.0, 100.0, 10.0, 5.0]
    # exactly at a checkpoint
    assert eq.energy_to_reach(energy, ppl, 100.0) == pytest.approx(100.0)
    # geometric mean of 100 and 10 lies half-way in log space
    assert eq.energy_to_reach(energy, ppl, math.sqrt(1000.0)) == pytest.approx(150.0)
    # already reached at the first point
    assert eq.energy_to_reach(energy, ppl, 2000.0) == pytest.approx(0.0)
    # never reached
    assert eq.energy_to_reach(energy, ppl, 4.0) is None
    # unsorted input and NaN are handled
    assert eq.energy_to_reach([200, np.nan, 100, 0], [10, 3, 100, 1000], 10.0) == 200.0


def test_first_crossing_wins_on_non_monotone_curves():
    assert eq.energy_to_reach([0, 10, 20, 30], [100, 40, 60, 20], 50) == pytest.approx(
        10 * (math.log(100) - math.log(50)) / (math.log(100) - math.log(40))
    )


def test_perplexity_at_energy_budget():
    energy = [0.0, 100.0, 200.0]
    ppl = [1000.0, 100.0, 10.0]
    assert eq.perplexity_at_energy(energy, ppl, 150.0) == pytest.approx(math.sqrt(1000.0))
    assert eq.perplexity_at_energy(energy, ppl, 200.0) == pytest.approx(10.0)
    assert eq.perplexity_at_energy(energy, ppl, 250.0) is None


def test_common_target_is_worst_final():
    assert eq.common_target_perplexity([12.0, 30.0, np.nan, 20.0]) == 30.0
    with pytest.raises(ValueError):
        eq.common_target_perplexity([np.nan])


def test_cost_at_quality_on_the_frontier():
    # (ppl, J/token): the (25, 3.0) point is dominated by (20, 2.0).
    ppl = [10.0, 20.0, 40.0, 25.0]
    cost = [4.0, 2.0, 1.0, 3.0]
    frontier = pareto_frontier(pd.DataFrame({"p": ppl, "c": cost}), "p", "c")
    assert list(frontier["p"]) == [10.0, 20.0, 40.0]
    # half-way between 10 and 20 in log space
    assert eq.cost_at_quality(ppl, cost, math.sqrt(200.0)) == pytest.approx(3.0)
    assert eq.cost_at_quality(ppl, cost, math.sqrt(200.0), interpolate=False) == 4.0
    # at or beyond the worst frontier point: the cheapest model already qualifies
    assert eq.cost_at_quality(ppl, cost, 40.0) == 1.0
    assert eq.cost_at_quality(ppl, cost, 80.0) == 1.0
    # better than every model: no answer
    assert eq.cost_at_quality(ppl, cost, 5.0) is None


def test_tokens_per_joule():
    assert eq.tokens_per_joule(100.0, 50.0) == 2.0
    assert eq.tokens_per_joule(None, 50.0) is None
    assert eq.tokens_per_joule(100.0, 0.0) is None


def _hand_made():
    # Two variants x two seeds. Curves: energy linear, ppl = 1000 * 10^(-E/100) (dense)
    # and 1000 * 10^(-E/200) (moe: half as fast per joule).
    rows, tr, inf = [], [], []
    for variant, family, rate in (("dense", "dense", 100.0), ("moe", "moe", 200.0)):
        for seed in (0, 1):
            run = f"{variant}{seed}"
            energies = [0.0, 100.0, 200.0, 300.0, 400.0]
            for step, e in enumerate(energies):
                rows.append(
                    {
                        "run_id": run,
                        "variant": variant,
                        "seed": seed,
                        "step": step,
                        "energy_j": e,
                        "val_perplexity": 1000.0 * 10 ** (-e / rate),
                    }
                )
            tr.append(
                {
                    "run_id": run,
                    "variant": variant,
                    "seed": seed,
                    "family": family,
                    "role": "moe" if family == "moe" else "dense-active",
                    "is_moe": family == "moe",
                    "total_params": 10,
                    "active_params": 5,
                    "train_energy_j": 400.0,
                    "final_val_perplexity": 1000.0 * 10 ** (-400.0 / rate),
                }
            )
            for b, ept in ((1, 2.0), (8, 1.0 if family == "dense" else 1.5)):
                inf.append(
                    {
                        "variant": variant,
                        "seed": seed,
                        "batch_size": b,
                        "energy_per_token_j": ept,
                        "tokens_per_s_per_w": 1 / ept,
                    }
                )
    return pd.DataFrame(tr), pd.DataFrame(rows), pd.DataFrame(inf)


def test_per_seed_summary_and_comparison_known_answers():
    tr, ck, inf = _hand_made()
    per = eq.per_seed_table(tr, ck, inf, pd.DataFrame())
    # common target = worst final = moe's 1000 * 10^-2 = 10
    assert per["target_perplexity"].iloc[0] == pytest.approx(10.0)
    got = per.set_index(["variant", "seed"])["train_energy_j_to_target"]
    assert got[("dense", 0)] == pytest.approx(200.0)
    assert got[("moe", 1)] == pytest.approx(400.0)
    # iso-energy budget = smallest total energy = 400 J
    assert per.set_index("run_id").loc["dense0", "val_perplexity_at_budget"] == pytest.approx(0.1)
    # reference batch = largest (8)
    assert per.set_index("run_id").loc["moe0", "energy_per_token_j"] == pytest.approx(1.5)

    summary = eq.model_summary(tr, per)
    assert list(summary["variant"]) == ["dense", "moe"]
    assert summary.set_index("variant").loc["moe", "n_seeds"] == 2
    # identical seeds: the interval collapses to the mean
    dense = summary.set_index("variant").loc["dense"]
    assert dense["train_energy_j_to_target_ci_low"] == pytest.approx(200.0)
    # dense is better and cheaper: it alone is on the frontier
    assert list(summary["on_pareto_frontier"]) == [True, False]

    comps = eq.pairwise_comparisons(per, ck, [("matched-active", "moe", "dense")])
    row = comps.iloc[0]
    assert row["target_perplexity"] == pytest.approx(10.0)
    assert row["train_energy_ratio"] == pytest.approx(2.0)
    assert row["energy_per_token_ratio"] == pytest.approx(1.5)


def test_energy_rate_cv_and_measurement_noise():
    ck = pd.DataFrame(
        {
            "run_id": ["a"] * 4 + ["b"] * 4,
            "step": [0, 10, 20, 30] * 2,
            # run a: 1 J/step throughout; run b: 1, 2, 3 J/step
            "energy_j": [0, 10, 20, 30, 0, 10, 30, 60],
        }
    )
    cv = eq.energy_rate_cv(ck).set_index("run_id")["energy_per_step_cv"]
    assert cv["a"] == pytest.approx(0.0)
    assert cv["b"] == pytest.approx(np.std([1, 2, 3], ddof=1) / 2.0)
    assert eq.measurement_noise(ck) == pytest.approx(cv["b"] / 2)
    assert eq.measurement_noise(pd.DataFrame()) is None


def test_ratio_by_batch():
    _, _, inf = _hand_made()
    r = eq.ratio_by_batch(inf, [("matched-active", "moe", "dense")])
    assert list(r["batch_size"]) == [1, 8]
    assert list(r["ratio"]) == pytest.approx([1.0, 1.5])
    assert eq.ratio_by_batch(pd.DataFrame(), [("a", "b", "c")]).empty
