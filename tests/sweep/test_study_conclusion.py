import pandas as pd

from mlenergy.sweep.conclusion import classify_ratio, conclusion, energy_note


def test_classify_ratio_uses_interval_or_noise_band():
    assert classify_ratio(0.8, 0.7, 0.9) == "less"
    assert classify_ratio(0.8, 0.6, 1.1) == "tie"
    assert classify_ratio(1.3, 1.1, 1.5) == "more"
    assert classify_ratio(0.97, 0.97, 0.97) == "tie"  # one seed, within 5%
    assert classify_ratio(0.90, None, None) == "less"
    assert classify_ratio(0.90, None, None, band=0.15) == "tie"
    assert classify_ratio(None, None, None) == "n/a"


def test_energy_note_says_modelled():
    assert "MODELLED" in energy_note("modelled:cpu-tdp")
    assert "measured" in energy_note("measured:zeus-nvml")
    assert "emulated" in energy_note("emulated:test")


def _summary():
    return pd.DataFrame(
        {
            "variant": ["dense-s", "dense-l", "moe-a"],
            "family": ["dense", "dense", "moe"],
            "role": ["dense-active", "dense-total", "moe"],
            "final_val_perplexity": [20.0, 10.0, 15.0],
            "train_energy_j": [100.0, 300.0, 150.0],
            "energy_per_token_j": [1.0, 3.0, 1.2],
            "on_pareto_frontier": [True, True, True],
            "target_perplexity": [20.0] * 3,
        }
    )


def _comparisons(train_active, inf_active):
    keys = ("train_energy_ratio", "energy_per_token_ratio")
    base = {f"{k}_ci_{end}": None for k in keys for end in ("low", "high")}
    return pd.DataFrame(
        [
            {"comparison": "matched-active", "variant": "moe-a", "baseline": "dense-s",
             "variant_perplexity": 15.0, "baseline_perplexity": 20.0, "target_perplexity": 20.0,
             "train_energy_ratio": train_active, "energy_per_token_ratio": inf_active, **base},
            {"comparison": "matched-total", "variant": "moe-a", "baseline": "dense-l",
             "variant_perplexity": 15.0, "baseline_perplexity": 10.0, "target_perplexity": 15.0,
             "train_energy_ratio": 0.5, "energy_per_token_ratio": 0.4, **base},
        ]
    )  # fmt: skip


def test_conclusion_is_computed_from_the_numbers():
    text = "\n".join(
        conclusion(
            _summary(),
            _comparisons(1.5, 1.2),
            energy_source="modelled:cpu-tdp",
            batch_size=8,
            seeds=1,
            size="tiny",
            noise=0.02,
        )
    )
    assert "no MoE variant needed less training energy" in text
    assert "1.50x" in text
    assert "overhead of sparsity" in text
    assert "every MoE variant needed less inference energy per token" in text  # total
    assert "MODELLED" in text
    flipped = "\n".join(
        conclusion(
            _summary(),
            _comparisons(0.6, 0.7),
            energy_source="measured:zeus-nvml",
            batch_size=8,
            seeds=3,
            size="tiny",
            noise=None,
        )
    )
    assert "every MoE variant needed less training energy" in flipped
    assert "One seed" not in flipped
    noisy = "\n".join(
        conclusion(
            _summary(),
            _comparisons(1.1, 1.1),
            energy_source="modelled:cpu-tdp",
            batch_size=8,
            seeds=1,
            size="tiny",
            noise=0.2,
        )
    )
    assert "2 tied" not in noisy and "1 tied" in noisy
    assert "within 1 +/- 20%" in noisy
