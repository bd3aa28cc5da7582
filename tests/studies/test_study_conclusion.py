import pandas as pd

from mlenergy.studies.conclusion import classify_ratio, conclusion, energy_note


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
    assert "sparsity" not in text  # no cause is claimed that nothing measured
    assert "does not say why an MoE step cost more" in text
    assert "steps to reach it times the run's mean energy per step" in text
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


def _by_batch(active: dict[int, list[float]], total: dict[int, float] | None = None):
    """Hand-made ``ratio_by_batch`` rows: MoE/dense energy per token per batch size."""
    rows = [
        {"comparison": "matched-active", "variant": f"moe-{'ab'[i]}", "baseline": "dense-s",
         "batch_size": b, "ratio": r}
        for b, ratios in active.items()
        for i, r in enumerate(ratios)
    ]  # fmt: skip
    rows += [
        {"comparison": "matched-total", "variant": "moe-a", "baseline": "dense-l",
         "batch_size": b, "ratio": r}
        for b, r in (total or {}).items()
    ]  # fmt: skip
    return pd.DataFrame(rows)


def _verdicts(comparisons, by_batch, seeds=1):
    paragraphs = conclusion(
        _summary(),
        comparisons,
        energy_source="modelled:cpu-tdp",
        batch_size=32,
        seeds=seeds,
        size="test",
        noise=0.02,
        by_batch=by_batch,
    )
    active = next(p for p in paragraphs if p.startswith("Verdict at this scale"))
    total = next(p for p in paragraphs if p.startswith("Against the dense model"))
    return active, total


def test_inference_verdict_covers_every_batch_size():
    # Regression: MoE cheaper at batch 32 (the reference batch) but 1.90x at batch 1;
    # a verdict read at batch 32 alone would claim "every MoE variant needed less".
    by_batch = _by_batch({1: [1.90], 8: [1.02], 32: [0.60]}, total={1: 0.5, 32: 0.4})
    active, total = _verdicts(_comparisons(1.5, 0.60), by_batch)
    assert "every MoE variant needed less inference energy" not in active
    assert "Inference energy per token depends on the batch size" in active
    assert "every MoE variant spent less at batch size 32" in active
    assert "every MoE variant spent more at batch size 1" in active
    assert "tied with the dense model (within noise) at batch size 8" in active
    assert "no MoE variant needed less training energy" in active
    # Where it holds at every batch size, it says so and lists them.
    assert "needed less inference energy per token than the dense model at every batch size" in (
        total
    )
    assert "(1, 32)" in total

    # More everywhere: "at any batch size".
    worse, _ = _verdicts(_comparisons(1.5, 1.4), _by_batch({1: [1.9], 32: [1.4]}))
    assert "no MoE variant needed less inference energy per token than the dense model at any" in (
        worse
    )

    # Variants disagree at one batch size: counted there.
    mixed, _ = _verdicts(_comparisons(1.5, 0.6), _by_batch({1: [1.9, 0.7], 32: [0.6, 0.5]}))
    assert "every MoE variant spent less at batch size 32" in mixed
    assert "at batch size 1, 1 of 2 MoE variants spent less, 0 tied (within noise) and 1" in mixed

    # At the reference batch the comparison's bootstrap interval decides (here: a tie).
    comps = _comparisons(1.5, 0.9)
    comps.loc[0, ["energy_per_token_ratio_ci_low", "energy_per_token_ratio_ci_high"]] = [0.7, 1.1]
    ci, _ = _verdicts(comps, _by_batch({1: [1.9], 32: [0.9]}), seeds=3)
    assert "tied with the dense model (within noise) at batch size 32" in ci
    assert "every MoE variant spent more at batch size 1" in ci


def test_a_single_seed_inference_ratio_within_the_run_to_run_spread_is_a_tie():
    # 1.2x the dense model, but each model's repeats spread +-15%: the interval holds 1
    spread = {("moe-a", 8): 0.15, ("dense-s", 8): 0.15, ("dense-l", 8): 0.01}
    kwargs = dict(energy_source="modelled:cpu-tdp", batch_size=8, seeds=1, size="tiny")
    tied = "\n".join(conclusion(_summary(), _comparisons(1.5, 1.2), spread=spread, **kwargs))
    assert "from run-to-run spread" in tied
    assert "1 of 1 MoE variants spent less, 0 tied" not in tied
    assert "0 of 1 MoE variants spent less, 1 tied (within noise)" in tied
    # the same ratio with tight repeats is called "more"
    tight = {k: 0.02 for k in spread}
    more = "\n".join(conclusion(_summary(), _comparisons(1.5, 1.2), spread=tight, **kwargs))
    assert "no MoE variant needed less inference energy per token" in more


def test_verdict_table_holds_every_ratio_with_its_interval_and_verdict():
    from mlenergy.studies.conclusion import verdict_table

    spread = {("moe-a", 1): 0.05, ("dense-s", 1): 0.05, ("moe-a", 32): 0.5, ("dense-s", 32): 0.5}
    by_batch = _by_batch({1: [1.9], 32: [0.6]}, total={1: 0.5, 32: 0.4})
    table = verdict_table(_comparisons(1.5, 0.6), by_batch, band=0.05, batch_size=32, spread=spread)
    rows = {
        (r.comparison, r.measure, None if r.batch_size is pd.NA else int(r.batch_size)): r
        for r in table.itertuples()
    }
    assert len(table) == 2 * 3  # per comparison: training, inference at batch 1 and 32
    train = rows[("matched-active", "training", None)]
    assert (train.ratio, train.interval, train.verdict) == (1.5, "band", "more")
    # The reference batch's ratio comes from the comparison, its interval from the repeats.
    ref = rows[("matched-active", "inference", 32)]
    assert ref.interval == "repeats" and ref.verdict == "tie"  # 0.6 x (1 +/- 0.71) holds 1
    assert ref.low < 1 < ref.high
    b1 = rows[("matched-active", "inference", 1)]
    assert (b1.ratio, b1.verdict) == (1.9, "more") and b1.high > b1.low
    # No spread for the total baseline: the band decides.
    assert rows[("matched-total", "inference", 1)].interval == "band"
    assert rows[("matched-total", "inference", 1)].verdict == "less"


def test_the_conclusion_says_what_the_verdict_table_says():
    from mlenergy.studies.conclusion import verdict_table

    spread = {("moe-a", 32): 0.5, ("dense-s", 32): 0.5}
    by_batch = _by_batch({1: [1.9], 32: [0.6]})
    table = verdict_table(_comparisons(1.5, 0.6), by_batch, band=0.05, batch_size=32, spread=spread)
    verdict = table.set_index(["comparison", "measure", "batch_size"])["verdict"]
    assert verdict[("matched-active", "inference", 32)] == "tie"
    text = "\n".join(
        conclusion(
            _summary(),
            _comparisons(1.5, 0.6),
            energy_source="modelled:cpu-tdp",
            batch_size=32,
            seeds=1,
            size="tiny",
            noise=0.02,
            by_batch=by_batch,
            spread=spread,
        )
    )
    assert "tied with the dense model (within noise) at batch size 32" in text
    assert "every MoE variant spent more at batch size 1" in text


def test_paired_interval_cancels_a_drift_common_to_a_round():
    from mlenergy.studies.conclusion import paired_half_width, spread_interval

    # The machine slows down round by round; the MoE costs 1.5x the dense model in each round.
    dense = (1.0, 2.0, 3.0, 4.0)
    moe = (1.52, 2.97, 4.53, 5.98)
    spread = {("moe-a", 8): moe, ("dense-s", 8): dense}
    lo, hi = spread_interval(1.5, "moe-a", "dense-s", 8, spread)
    assert 1.4 < lo < 1.5 < hi < 1.6  # each model's own spread (+-60%) would hold 1
    assert classify_ratio(1.5, lo, hi) == "more"
    # A ratio that changes from round to round is a tie.
    noisy = {("moe-a", 8): (0.8, 1.3, 0.9, 1.25), ("dense-s", 8): (1.0, 1.0, 1.0, 1.0)}
    lo, hi = spread_interval(1.06, "moe-a", "dense-s", 8, noisy)
    assert lo < 1 < hi
    assert paired_half_width((1.0,), (1.0,)) is None  # one round: no interval
    assert paired_half_width((1.0, 2.0), (1.0, 2.0, 3.0)) is None  # rounds do not pair


def test_inference_spread_keeps_each_repeat_in_the_order_measured():
    from types import SimpleNamespace

    from mlenergy.records.base import RepeatStats
    from mlenergy.studies.conclusion import inference_spread

    def run(variant, batch, values, kind="inference"):
        phase = SimpleNamespace(energy_j_repeats=RepeatStats.from_values(values))
        return SimpleNamespace(
            workload=SimpleNamespace(kind=kind, batch_size=batch),
            status="ok",
            tags={"variant": variant},
            model=SimpleNamespace(model_id=variant),
            phase=lambda name: phase if name == "request" else None,
        )

    runs = [run("a", 1, [1.0, 2.0]), run("a", 1, [3.0, 4.0]), run("b", 8, [5.0, 6.0])]
    runs.append(run("c", 1, [7.0], kind="training"))
    assert inference_spread(runs) == {("a", 1): (1.0, 2.0, 3.0, 4.0), ("b", 8): (5.0, 6.0)}


def test_training_ratio_interval_comes_from_the_windows_trained_in_turns():
    from mlenergy.studies.conclusion import training_spread, verdict_table

    def curve(variant, per_window):
        energy = [0.0]
        for e in per_window:
            energy.append(energy[-1] + e)
        return pd.DataFrame(
            {"run_id": variant, "variant": variant, "seed": "0",
             "step": [10 * k for k in range(len(energy))], "energy_j": energy}
        )  # fmt: skip

    # The machine slows in rounds 3-4; the MoE costs about 1.10x the dense model in every round.
    dense = [10.0, 10.0, 20.0, 20.0, 10.0]
    moe = [m * e for m, e in zip((1.1, 1.12, 1.08, 1.11, 1.09), dense, strict=True)]
    ck = pd.concat([curve("dense-s", dense), curve("moe-a", moe)])
    spread = training_spread(ck)
    assert spread["dense-s"] == (1.0, 1.0, 2.0, 2.0, 1.0)  # joules per step, per window
    comps = _comparisons(1.1, 1.0).iloc[:1]
    table = verdict_table(comps, None, band=0.2, batch_size=8, train_spread=spread)
    train = table[table["measure"] == "training"].iloc[0]
    assert train["interval"] == "repeats"
    assert train["verdict"] == "more"  # the band (+-20%) alone would call it a tie
    noisy = {"dense-s": (1.0, 1.0, 1.0, 1.0, 1.0), "moe-a": (0.9, 1.4, 0.8, 1.3, 1.1)}
    table = verdict_table(comps, None, band=0.02, batch_size=8, train_spread=noisy)
    assert table[table["measure"] == "training"].iloc[0]["verdict"] == "tie"


def test_levelled_checkpoints_charge_each_step_the_runs_mean_energy():
    from mlenergy.studies.conclusion import levelled_checkpoints

    ck = pd.DataFrame(
        {"run_id": ["a"] * 4 + ["b"] * 3, "step": [0, 10, 20, 30, 0, 10, 20],
         "energy_j": [0.0, 10.0, 40.0, 60.0, 0.0, 5.0, float("nan")],
         "val_perplexity": [100.0, 50.0, 30.0, 20.0, 100.0, 60.0, 40.0]}
    )  # fmt: skip
    out = levelled_checkpoints(ck)
    # 60 J over 30 steps: 2 J per step at every step, whichever window was slow.
    assert list(out[out["run_id"] == "a"]["energy_j"]) == [0.0, 20.0, 40.0, 60.0]
    # A run with a window without energy stays as measured (unknown, never made up).
    assert out[out["run_id"] == "b"]["energy_j"].isna().sum() == 1
    assert list(ck["energy_j"])[:4] == [0.0, 10.0, 40.0, 60.0]  # the input is not changed


def test_a_verdict_holds_under_load_only_if_the_measured_shift_cannot_flip_it():
    from mlenergy.studies.verdicts import holds_under_load

    # 0.97 [0.94, 0.99] is "less", but 10% more (a busy machine) would make it a tie
    assert holds_under_load(0.97, 0.94, 0.99, 0.05, 0.10) is False
    # 0.70 [0.68, 0.72] stays "less" at 0.77 [0.75, 0.79]
    assert holds_under_load(0.70, 0.68, 0.72, 0.05, 0.10) is True
    # a narrow tie at 1.01 [0.99, 1.03] becomes "more" at 1.11
    assert holds_under_load(1.01, 0.99, 1.03, 0.05, 0.10) is False
    # a wide tie stays a tie
    assert holds_under_load(1.0, 0.7, 1.4, 0.05, 0.10) is True
    # without a measured shift (GPU counters) nothing is claimed
    assert holds_under_load(0.97, 0.94, 0.99, 0.05, None) is None


def test_cpu_modelled_verdicts_say_which_would_change_with_the_load():
    from mlenergy.studies.verdicts import CPU_LOAD_SHIFT, load_shift_for, verdict_table

    assert load_shift_for("modelled:cpu-tdp") == CPU_LOAD_SHIFT
    assert load_shift_for("measured:zeus-nvml") is None
    spread = {("moe-a", 32): 0.01, ("dense-s", 32): 0.01}
    by_batch = _by_batch({32: [0.97]})
    comps = _comparisons(1.5, 0.97)
    table = verdict_table(
        comps, by_batch, band=0.05, batch_size=32, spread=spread, load_shift=CPU_LOAD_SHIFT
    )
    ref = table[(table["measure"] == "inference") & (table["comparison"] == "matched-active")]
    assert ref["verdict"].iloc[0] == "less" and ref["holds_under_load"].iloc[0] == False  # noqa: E712
    train = table[(table["measure"] == "training") & (table["comparison"] == "matched-active")]
    assert train["holds_under_load"].iloc[0] == True  # noqa: E712 (1.5 stays "more")
    kwargs = dict(batch_size=32, seeds=1, size="tiny", by_batch=by_batch, spread=spread)
    text = "\n".join(conclusion(_summary(), comps, energy_source="modelled:cpu-tdp", **kwargs))
    assert "treat them as unsettled: moe-a vs dense-s J/token at batch 32 (less)" in text
    gpu = "\n".join(conclusion(_summary(), comps, energy_source="measured:zeus-nvml", **kwargs))
    assert "unsettled" not in gpu
