"""The Power budget view: the planner's best configuration per model, and its inputs checked."""

from __future__ import annotations

import math

import pytest

from mlenergy.errors import UserError
from mlenergy.leaderboard import power_budget as pb
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.power_tab import view
from mlenergy.optimize.power_cap import plan_power_cap
from mlenergy.store import RunStore
from mlenergy.testing.synthetic import synthetic_model, synthetic_run

DENSE = synthetic_model("org/dense-8b", 8.0, False)
MOE = synthetic_model("org/moe-a3b", 3.0, True)
BIG = synthetic_model("org/big-400b", 400.0, False)
MEASURED = "measured:zeus-nvml"


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    runs, i = [], 0
    for model in (DENSE, MOE, BIG):
        for gpu, tdp in (("H100-SXM5-80GB", 700.0), ("B200", 1000.0)):
            for n in (1, 8):
                for bs in (16, 64, 256):
                    runs.append(
                        synthetic_run(
                            model, gpu=gpu, tdp_w=tdp, num_gpus=n, batch_size=bs,
                            energy_source=MEASURED, index=i,
                        )
                    )  # fmt: skip
                    i += 1
    # not measured: never a candidate
    runs.append(synthetic_run(synthetic_model("org/emulated-1b", 1.0, False), index=900))
    data_dir = tmp_path_factory.mktemp("power-store")
    RunStore(data_dir).append(runs)
    return AppContext.load(data_dir, reference=False)


def _exhaustive(cands, q: pb.BudgetQuery) -> tuple[float, int]:
    """Most site tokens/s over every candidate, by brute force: (tokens/s, replicas)."""
    best = (-1.0, 0)
    for r in cands.itertuples():
        if r.median_itl_ms > q.itl_limit_ms:
            continue
        replicas = math.floor(q.budget_w / (r.avg_power_w * q.pue + q.host_w_per_gpu * r.num_gpus))
        if replicas >= 1:
            best = max(best, (replicas * r.throughput_tokens_per_s, replicas))
    return best


@pytest.mark.parametrize("budget_w,itl_ms", [(100_000.0, 50.0), (20_000.0, 15.0), (5_000.0, 30.0)])
def test_best_per_model_is_the_planners_answer_and_the_exhaustive_best(ctx, budget_w, itl_ms):
    q = pb.BudgetQuery(budget_w=budget_w, itl_limit_ms=itl_ms)
    answer = pb.best_per_model(ctx, q)
    cands = pb.task_candidates(ctx, q.task)
    assert set(cands) == {DENSE.model_id, MOE.model_id, BIG.model_id}
    shown = set(answer.table["model_id"]) | {m for m, _ in answer.left_out}
    assert shown == set(cands)
    for row in answer.table.itertuples():
        planner = plan_power_cap(
            budget_w, row.model_id, q.task, itl_ms, candidates=cands[row.model_id]
        )
        assert row.site_tokens_per_s == pytest.approx(planner.best["site_tokens_per_s"])
        assert row.source == planner.best["source"] and row.source.startswith(MEASURED)
        tokens, replicas = _exhaustive(cands[row.model_id], q)
        assert row.site_tokens_per_s == pytest.approx(tokens)
        assert row.replicas == replicas and row.median_itl_ms <= itl_ms
        assert row.site_power_w <= budget_w
    for model, _ in answer.left_out:
        assert _exhaustive(cands[model], q)[0] < 0  # nothing fits: rightly left out
    site = answer.table["site_tokens_per_s"].tolist()
    assert site == sorted(site, reverse=True)


def test_models_that_fit_nothing_are_listed_with_the_reason(ctx):
    tiny = pb.best_per_model(ctx, pb.BudgetQuery(budget_w=100.0))
    assert tiny.table.empty and len(tiny.left_out) == 3
    assert all("below one replica's power" in why for _, why in tiny.left_out)
    fast = pb.best_per_model(ctx, pb.BudgetQuery(itl_limit_ms=0.5))
    assert fast.table.empty and all("no candidate meets" in why for _, why in fast.left_out)


def test_candidates_are_measured_runs_with_their_figures(ctx):
    cands = pb.task_candidates(ctx, "lm-arena-chat")
    assert "org/emulated-1b" not in cands
    dense = cands[DENSE.model_id]
    assert len(dense) == 12 and set(dense["num_gpus"]) == {1, 8}
    frame = ctx.frame(None).set_index("run_id")
    row = dense.iloc[0]
    run_id = row["source"].split("(run ")[1].rstrip(")")
    assert row["avg_power_w"] == pytest.approx(frame.loc[run_id, "avg_power_w"])
    assert row["median_itl_ms"] == pytest.approx(frame.loc[run_id, "itl_ms"])
    assert pb.task_candidates(ctx, "no-such-task") == {}


@pytest.mark.parametrize(
    "change,field",
    [
        ({"budget_w": 0.0}, "budget_w"),
        ({"itl_limit_ms": -1.0}, "itl_limit_ms"),
        ({"pue": 0.9}, "pue"),
        ({"host_w_per_gpu": -5.0}, "host_w_per_gpu"),
        ({"objective": "cheapest"}, "objective"),
        ({"task": ""}, "task"),
    ],
)
def test_bad_input_names_the_field(ctx, change, field):
    with pytest.raises(UserError, match=field):
        pb.best_per_model(ctx, pb.BudgetQuery(**change))


def test_tab_view_renders_table_and_note(ctx):
    table, note = view(ctx, pb.BudgetQuery())
    assert 'id="power-table"' in table and "Site tokens/s" in table and "org/moe-a3b" in table
    assert "models fit 100,000 W within 50 ms" in note
    _, tiny = view(ctx, pb.BudgetQuery(budget_w=100.0))
    assert "3 models left out</summary>" in tiny and "<li>org/dense-8b: " in tiny
    _, bad = view(ctx, pb.BudgetQuery(pue=0.5))
    assert "pue is 0.5" in bad
