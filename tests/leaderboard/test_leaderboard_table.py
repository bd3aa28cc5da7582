"""The leaderboard's data layer on pandas frames: prepare, filter, best config, sort, page, CSV."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.html import format_value, render_frame, render_table
from mlenergy.store.tables import flatten_run
from mlenergy.testing.synthetic import synthetic_model, synthetic_run, synthetic_runs

DENSE = synthetic_model("org/dense-7b", 7.0, False)
MOE = synthetic_model("org/moe-a3b", 3.0, True, dtype="fp8")


def _frame(records) -> pd.DataFrame:
    return pd.DataFrame([flatten_run(r) for r in records])


@pytest.fixture(scope="module")
def small() -> pd.DataFrame:
    recs = []
    i = 0
    for model in (DENSE, MOE):
        for gpu, tdp in (("H100-SXM5-80GB", 700.0), ("B200", 1000.0)):
            for bs in (8, 64, 512):
                recs.append(synthetic_run(model, gpu=gpu, tdp_w=tdp, batch_size=bs, index=i))
                i += 1
    recs.append(
        synthetic_run(
            DENSE, batch_size=16, energy_source="estimated:mlenergy-0.1.0", index=i, task="gpqa"
        )
    )
    return lb.prepare_runs(_frame(recs))


def test_prepare_derives_columns(small):
    row = small.iloc[0]
    assert row["energy_per_token_j"] == pytest.approx(row["request_energy_per_token_j"])
    assert row["tokens_per_j"] == pytest.approx(1 / row["energy_per_token_j"])
    assert row["itl_ms"] == pytest.approx(row["itl_p50_s"] * 1000)
    assert row["hardware"] == "H100-SXM5-80GB"
    assert set(small["arch_kind"]) == {"dense", "MoE"}
    assert set(small["source_kind"]) == {"emulated", "estimated"}
    assert small["active_params_b"].iloc[0] == pytest.approx(7.0)


def test_prepare_falls_back_to_decode_and_drops_failed():
    frame = pd.DataFrame(
        {
            "run_id": ["a", "b"],
            "status": ["ok", "failed"],
            "workload_kind": ["inference", "inference"],
            "model_id": ["m", "m"],
            "energy_source": ["modelled:cpu-tdp", "modelled:cpu-tdp"],
            "decode_energy_per_token_j": [0.5, 0.1],
            "cpu_model": ["Xeon", "Xeon"],
            "accelerator_count": [0, 0],
        }
    )
    out = lb.prepare_runs(frame)
    assert len(out) == 1
    assert out["energy_per_token_j"].iloc[0] == 0.5
    assert out["hardware"].iloc[0] == "Xeon"
    assert out["source_kind"].iloc[0] == "modelled"
    assert np.isnan(out["itl_ms"].iloc[0])


def test_training_runs_are_left_out():
    frame = pd.DataFrame(
        {"run_id": ["a", "b"], "model_id": ["m", "m"], "workload_kind": ["training", None]}
    )
    assert lb.prepare_runs(frame)["run_id"].tolist() == ["b"]


def test_missing_energy_is_nan_not_zero():
    frame = pd.DataFrame(
        {"run_id": ["a"], "model_id": ["m"], "energy_source": ["measured:zeus-nvml"]}
    )
    out = lb.prepare_runs(frame)
    assert np.isnan(out["energy_per_token_j"].iloc[0])
    assert np.isnan(out["tokens_per_j"].iloc[0])


@pytest.mark.parametrize(
    "query,column,expected",
    [
        (lb.TableQuery(hardware=("B200",)), "hardware", {"B200"}),
        (lb.TableQuery(arch="MoE"), "arch_kind", {"MoE"}),
        (lb.TableQuery(precisions=("fp8",)), "dtype", {"fp8"}),
        (lb.TableQuery(source_kinds=("estimated",)), "source_kind", {"estimated"}),
    ],
)
def test_filters(small, query, column, expected):
    rows = lb.filter_runs(small, query)
    assert len(rows) > 0
    assert set(rows[column]) == expected


def test_search_is_case_insensitive_and_literal(small):
    assert set(lb.filter_runs(small, lb.TableQuery(search="  MOE-A3B ")).model_id) == {
        "org/moe-a3b"
    }
    assert lb.filter_runs(small, lb.TableQuery(search="(unclosed[")).empty


def test_task_and_gpu_count_filters(small):
    assert set(lb.filter_runs(small, lb.TableQuery(task="gpqa")).task) == {"gpqa"}
    assert lb.filter_runs(small, lb.TableQuery(gpu_counts=(8,))).empty


def test_best_config_per_model_and_hardware_under_deadline(small):
    chat = lb.filter_runs(small, lb.TableQuery(task="lm-arena-chat"))
    best = lb.best_configs(chat)
    assert len(best) == 4  # 2 models x 2 GPUs
    assert set(best["n_configs"]) == {3}
    for _, row in best.iterrows():
        group = chat[(chat.model_id == row.model_id) & (chat.hardware == row.hardware)]
        assert row.energy_per_token_j == group.energy_per_token_j.min()
    # A tight deadline excludes the large batches, so the winner changes.
    deadline = float(chat["itl_ms"].median())
    limited = lb.best_configs(lb.within_limits(chat, deadline, None))
    assert (limited["itl_ms"] <= deadline).all()
    assert limited["energy_per_token_j"].sum() > best["energy_per_token_j"].sum()


def test_energy_budget(small):
    budget = float(small["energy_per_token_j"].median())
    rows = lb.within_limits(small, None, budget)
    assert (rows["energy_per_token_j"] <= budget).all()
    assert 0 < len(rows) < len(small)


def test_query_sort_page(small):
    res = lb.query_table(
        small,
        lb.TableQuery(best_only=False, sort_by="itl_ms", descending=True, page_size=4, page=2),
    )
    assert res.total == len(small)
    assert res.pages == 4
    assert len(res.page_rows) == 4
    itl = res.rows["itl_ms"].to_numpy()
    assert (np.diff(itl) <= 0).all()
    assert res.page_rows.iloc[0]["run_id"] == res.rows.iloc[4]["run_id"]
    clamped = lb.query_table(small, lb.TableQuery(best_only=False, page=99, page_size=4))
    assert clamped.page == 4


def test_sort_puts_missing_last_and_rejects_unknown(small):
    frame = small.copy()
    frame.loc[0, "quality"] = np.nan
    frame.loc[1:, "quality"] = 1.0
    out = lb.sort_rows(frame, "quality", descending=True)
    assert out.iloc[-1]["run_id"] == frame.iloc[0]["run_id"]
    with pytest.raises(KeyError):
        lb.sort_rows(frame, "nope")


def test_empty_frame_answers():
    empty = lb.prepare_runs(pd.DataFrame(columns=["run_id", "model_id", "energy_source"]))
    res = lb.query_table(empty, lb.TableQuery(task="x"))
    assert res.total == 0 and res.pages == 1
    assert "No configuration" in render_table(res.page_rows)
    assert lb.filter_choices(empty)["task"] == []


def test_filter_choices(small):
    ch = lb.filter_choices(small)
    assert ch["hardware"] == ["B200", "H100-SXM5-80GB"]
    assert ch["accelerator_count"] == [1]
    assert ch["max_itl_ms"] == pytest.approx(small["itl_ms"].max())


def test_csv_export_has_units_and_neutralises_formulas(small):
    frame = small.copy()
    frame.loc[0, "model_id"] = "=HYPERLINK(evil)"
    text = lb.to_csv(frame)
    back = pd.read_csv(io.StringIO(text))
    assert "Energy/token (J)" in back.columns
    assert len(back) == len(frame)
    assert back["Model"].iloc[0] == "'=HYPERLINK(evil)"


def test_html_escapes_text_and_has_tooltips(small):
    frame = small.head(1).copy()
    frame["model_id"] = "<script>alert(1)</script>"
    html = render_table(frame)
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'title="Energy per output token in joules' in html
    other = render_frame(pd.DataFrame({"<b>col</b>": ["<img src=x onerror=alert(1)>"]}), "t")
    assert "<img" not in other and "<b>" not in other


def test_format_value():
    assert format_value(None) == "–"
    assert format_value(float("nan"), "float") == "–"
    assert format_value(0.000012, "float") == "1.200e-05"
    assert format_value(3.0, "int") == "3"
    assert format_value("a&b") == "a&amp;b"


def test_large_frame_query():
    """Correct on 3,000 runs; how long it takes is measured by benchmarks/leaderboard_load.py."""
    recs = synthetic_runs(3000, validate=False)
    frame = lb.prepare_runs(_frame(recs))
    res = lb.query_table(
        frame, lb.TableQuery(search="model-01", sort_by="tokens_per_j", descending=True)
    )
    assert res.total > 0


@pytest.mark.parametrize(
    "value,expected", [(449.59, 450), (34.33, 35), (0.0467, 0.047), (0, 1.0), (120, 120)]
)
def test_slider_limit(value, expected):
    assert lb.slider_limit(value) == pytest.approx(expected)


def test_query_best_only_matches_best_configs():
    frame = lb.prepare_runs(_frame(synthetic_runs(600, validate=False)))
    q = lb.TableQuery(max_itl_ms=40.0, page_size=10_000)
    fast = lb.query_table(frame, q).rows
    slow = lb.best_configs(lb.filter_runs(frame, q))
    key = ["model_id", "hardware", "task"]
    merged = fast.merge(slow, on=key, suffixes=("", "_ref"))
    assert len(fast) == len(slow) == len(merged)
    assert (merged["run_id"] == merged["run_id_ref"]).all()
    assert (merged["n_configs"] == merged["n_configs_ref"]).all()


def test_sort_on_configuration_count():
    big, small = synthetic_model("org/big", 8.0, False), synthetic_model("org/small", 1.0, False)
    runs = [synthetic_run(big, batch_size=8 * (i + 1), index=i) for i in range(3)]
    runs.append(synthetic_run(small, index=10))
    frame = lb.prepare_runs(pd.DataFrame([flatten_run(r) for r in runs]))
    res = lb.query_table(frame, lb.TableQuery(sort_by="n_configs", descending=True))
    assert list(res.page_rows["model_id"]) == ["org/big", "org/small"]
    assert list(res.page_rows["n_configs"]) == [3, 1]
