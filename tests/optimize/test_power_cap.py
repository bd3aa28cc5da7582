"""The power-cap planner equals an exhaustive search; site math; bad input."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from optimize_cases import run_cli

from mlenergy.errors import UserError
from mlenergy.optimize.candidates import CANDIDATE_COLUMNS
from mlenergy.optimize.power_cap import BEST_KEYS, plan_power_cap
from mlenergy.reference import reference_dir

MODEL = "Qwen/Qwen3-30B-A3B-Instruct-2507"


def synthetic_candidates(seed: int, n: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        g = int(rng.choice([1, 2, 4, 8]))
        power = float(rng.uniform(300, 900)) * g
        thr = float(rng.uniform(200, 5000)) * g
        rows.append(
            {
                "model_id": "m",
                "task": "t",
                "gpu": str(rng.choice(["A", "B"])),
                "num_gpus": g,
                "tensor_parallel": g,
                "expert_parallel": 1,
                "data_parallel": 1,
                "max_num_seqs": int(rng.choice([8, 64, 256])),
                "precision": str(rng.choice(["bfloat16", "fp8"])),
                "power_limit_w": float(500 + i),
                "throughput_tokens_per_s": thr,
                "avg_power_w": power,
                "energy_per_token_j": power / thr,
                "median_itl_ms": float(rng.uniform(5, 80)),
                "output_tokens": 500.0,
                "source": "emulated:test",
            }
        )
    return pd.DataFrame(rows, columns=CANDIDATE_COLUMNS)


def _exhaustive(df, budget, itl, pue, host, objective):
    best, best_key = None, None
    for _, r in df.iterrows():
        if r["median_itl_ms"] > itl:
            continue
        per = (r["avg_power_w"] + host * r["num_gpus"]) * pue
        replicas = math.floor(budget / per)
        if replicas < 1:
            continue
        site_tps = replicas * r["throughput_tokens_per_s"]
        jpt = per / r["throughput_tokens_per_s"]
        key = (-site_tps, jpt) if objective == "throughput" else (jpt, -site_tps)
        if best_key is None or key < best_key:
            best, best_key = (r, replicas, site_tps, jpt), key
    return best


@pytest.mark.parametrize(
    "seed,budget,itl,objective",
    list(
        itertools.product(range(5), [5_000, 40_000], [20, 60], ["throughput", "energy-per-token"])
    ),
)
def test_power_cap_equals_exhaustive_search(seed, budget, itl, objective):
    df = synthetic_candidates(seed)
    try:
        result = plan_power_cap(
            budget, "m", "t", itl, candidates=df, objective=objective, pue=1.3, host_w_per_gpu=120
        )
    except UserError:
        assert _exhaustive(df, budget, itl, 1.3, 120, objective) is None
        return
    r, replicas, site_tps, jpt = _exhaustive(df, budget, itl, 1.3, 120, objective)
    best = result.best
    assert set(BEST_KEYS) <= set(best)
    assert best["power_limit_w"] == r["power_limit_w"]
    assert best["replicas"] == replicas
    assert best["site_tokens_per_s"] == pytest.approx(site_tps)
    assert best["energy_per_token_j"] == pytest.approx(jpt)
    assert best["site_power_w"] <= budget
    assert best["median_itl_ms"] <= itl
    assert best["source"] == "emulated:test"


@pytest.mark.parametrize("peak_factor", [1.0, 1.15, 1.5])
@pytest.mark.parametrize("seed", range(4))
def test_every_candidate_holds_the_budget_with_pue_on_all_it_power(seed, peak_factor):
    df = synthetic_candidates(seed)
    budget, pue, host = 40_000.0, 1.3, 120.0
    result = plan_power_cap(
        budget,
        "m",
        "t",
        1000,
        candidates=df,
        pue=pue,
        host_w_per_gpu=host,
        peak_factor=peak_factor,
    )
    cands = result.candidates
    # Recomputed here: PUE on GPUs and hosts, the peak factor on the GPUs' average power.
    peak = (cands["avg_power_w"] * peak_factor + host * cands["num_gpus"]) * pue
    average = (cands["avg_power_w"] + host * cands["num_gpus"]) * pue
    assert (cands["replicas"] * peak <= budget + 1e-9).all()
    assert ((cands["replicas"] + 1) * peak > budget).all()  # and as many as fit
    assert cands["site_peak_power_w"].to_numpy() == pytest.approx(cands["replicas"] * peak)
    assert cands["site_power_w"].to_numpy() == pytest.approx(cands["replicas"] * average)
    assert (result.table["site_peak_power_w"] <= budget + 1e-9).all()


def test_the_audited_100_kw_plan_fits_97_replicas(tmp_path):
    """At 100 kW the 703.08 W B200 replica with 150 W of host, PUE 1.2 on both, fits 97 times."""
    result = plan_power_cap(
        100_000, MODEL, "lm-arena-chat", 50, data_dir=tmp_path, host_w_per_gpu=150, pue=1.2
    )
    best = result.best
    assert best["site_peak_power_w"] <= 100_000
    per = (best["avg_power_w"] + 150 * best["num_gpus"]) * 1.2
    assert best["replicas"] == math.floor(100_000 / per)
    roomier = plan_power_cap(
        100_000, MODEL, "lm-arena-chat", 50, data_dir=tmp_path, peak_factor=1.3
    ).best
    assert roomier["site_peak_power_w"] <= 100_000
    assert roomier["site_power_w"] < best["site_power_w"]


def test_peak_factor_below_one_is_a_user_error():
    with pytest.raises(UserError, match="--peak-factor"):
        plan_power_cap(10_000, "m", "t", 1000, candidates=synthetic_candidates(0), peak_factor=0.9)


def test_budget_below_one_replica_is_a_user_error():
    df = synthetic_candidates(0)
    with pytest.raises(UserError, match="below one replica"):
        plan_power_cap(100, "m", "t", 1000, candidates=df)


def test_cli_json_keys_and_measured_source(tmp_path):
    res = run_cli(
        [
            "optimize",
            "power-cap",
            "--budget-w",
            "100000",
            "--model",
            MODEL,
            "--task",
            "lm-arena-chat",
            "--itl-limit-ms",
            "50",
            "--json",
            "--peak-factor",
            "1.1",
            "--data-dir",
            str(tmp_path),
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["peak_factor"] == 1.1 and out["best"]["site_peak_power_w"] <= 100_000
    for key in (
        "gpu",
        "num_gpus",
        "tensor_parallel",
        "expert_parallel",
        "data_parallel",
        "max_num_seqs",
        "precision",
        "power_limit_w",
        "replicas",
        "site_tokens_per_s",
        "site_power_w",
        "energy_per_token_j",
        "median_itl_ms",
        "source",
    ):
        assert key in out["best"]
    assert out["best"]["source"].startswith("measured:")
    assert out["runners_up"] and out["energy_cost_per_million_tokens"] is None  # no price given


def test_cost_only_with_a_price_the_user_gave(tmp_path):
    args = ["optimize", "power-cap", "--budget-w", "100000", "--model", MODEL, "--task"]
    args += ["lm-arena-chat", "--itl-limit-ms", "50", "--data-dir", str(tmp_path)]
    plain = run_cli(args)
    assert plain.exit_code == 0, plain.output
    assert "energy cost" not in plain.stdout and "/kWh" not in plain.stdout
    priced = run_cli([*args, "--price-kwh", "0.1"])
    assert priced.exit_code == 0, priced.output
    assert "per million tokens at 0.1/kWh" in priced.stdout


def test_estimated_sources_plot_and_labels(tmp_path):
    png = tmp_path / "cap.png"
    res = run_cli(
        [
            "optimize",
            "power-cap",
            "--budget-w",
            "50000",
            "--model",
            MODEL,
            "--task",
            "lm-arena-chat",
            "--itl-limit-ms",
            "40",
            "--sources",
            "all",
            "--gpus",
            "B200",
            "--precisions",
            "fp8,nvfp4",
            "--data-dir",
            str(tmp_path),
            "--plot",
            str(png),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    sources = {r["source"].split(":")[0] for r in [out["best"], *out["runners_up"]]}
    assert sources <= {"measured", "estimated"}
    assert png.stat().st_size > 1000


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--budget-w", "10"], "below one replica"),
        (["--budget-w", "-5"], "--budget-w"),
        (["--model", "nobody/unknown-model", "--sources", "all"], "no measurement and no estimate"),
        (["--model", "nobody/unknown-model"], "no measurement"),
        (["--sources", "guess"], "--sources"),
        (["--task", "no-such-task", "--sources", "all"], "no measured output length"),
        (["--task", "no-such-task"], "no measurement"),
        (["--itl-limit-ms", "0.01"], "no candidate meets"),
        (["--power-limits", "700:400:50", "--sources", "all"], "--power-limits"),
    ],
)
def test_power_cap_bad_input(tmp_path, args, needle):
    base = {
        "--budget-w": "100000",
        "--model": MODEL,
        "--task": "lm-arena-chat",
        "--itl-limit-ms": "50",
    }
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    argv = ["optimize", "power-cap", *itertools.chain(*base.items()), "--data-dir", str(tmp_path)]
    argv += ["--plot", str(tmp_path / "x.png")]
    res = run_cli(argv)
    assert res.exit_code == 2, res.output
    assert needle in res.output
    assert len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "x.png").exists()


def test_best_per_model_one_row_each(tmp_path):
    from mlenergy.optimize.power_cap import best_per_model

    best = best_per_model(100_000, "lm-arena-chat", 50, data_dir=tmp_path)
    table = best.table
    assert len(table) >= 5 and table["model_id"].is_unique
    # A model that fits nothing is named with the planner's reason, never dropped silently.
    assert all(why for _, why in best.left_out)
    assert not set(table["model_id"]) & {m for m, _ in best.left_out}
    tight = best_per_model(100_000, "lm-arena-chat", 5, data_dir=tmp_path)
    assert len(tight.table) < len(table)
    reasons = dict(tight.left_out)
    assert set(reasons) == set(table["model_id"]) - set(tight.table["model_id"])
    assert all("--itl-limit-ms 5" in why for why in reasons.values())
    assert (table["median_itl_ms"] <= 50).all() and (table["site_power_w"] <= 100_000).all()
    assert table["source"].str.startswith("measured:").all()
    assert list(table["site_tokens_per_s"]) == sorted(table["site_tokens_per_s"], reverse=True)


def test_store_seeded_with_the_reference_counts_each_measurement_once(tmp_path):
    from mlenergy.analysis.reference_import import import_reference
    from mlenergy.optimize.power_cap import gather_candidates

    data = tmp_path / "data"
    import_reference(reference_dir(), data)
    from_reference = gather_candidates(MODEL, "lm-arena-chat", "measured")
    both = gather_candidates(MODEL, "lm-arena-chat", "measured", data_dir=data)
    assert len(both) == len(from_reference) > 0  # the stored copies replace the reference rows
    assert both["source"].str.contains(r"\(run ref").all()  # each names its stored run
    assert both["throughput_tokens_per_s"].notna().all()  # request figures where no decode phase
