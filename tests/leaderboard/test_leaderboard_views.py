"""Quality join, model detail, compare, plots and the store-backed LeaderboardData."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import pytest

from mlenergy.leaderboard import plots as plots
from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard import views as views
from mlenergy.leaderboard.data import LeaderboardData
from mlenergy.store import RunStore
from mlenergy.store.tables import flatten_quality, flatten_run
from mlenergy.testing.synthetic import (
    synthetic_model,
    synthetic_quality,
    synthetic_run,
)

A = synthetic_model("org/a", 7.0, False)
B = synthetic_model("org/b", 3.0, True)
C = synthetic_model("org/c", 14.0, False)


@pytest.fixture(scope="module")
def records():
    runs = [
        synthetic_run(m, batch_size=bs, index=i * 10 + j, timeline=(i == 0 and j == 0))
        for i, m in enumerate((A, B, C))
        for j, bs in enumerate((8, 128))
    ]
    quality = [
        synthetic_quality(A, 0.61, linked=[runs[0].run_id]),  # same run
        synthetic_quality(A, 0.55),  # same model (should not override the linked run)
        synthetic_quality(B, 0.70),
    ]
    return runs, quality


@pytest.fixture(scope="module")
def data(records):
    runs, quality = records
    return LeaderboardData.from_frames(
        pd.DataFrame([flatten_run(r) for r in runs]),
        pd.DataFrame([flatten_quality(q) for q in quality]),
    )


def test_quality_link_priority(data, records):
    runs, _ = records
    key = data.quality_keys()[0]
    assert key == "lm-eval:synthetic / acc"
    frame = data.frame(key).set_index("run_id")
    first, second = runs[0].run_id, runs[1].run_id
    assert frame.loc[first, "quality"] == pytest.approx(0.61)
    assert frame.loc[first, "quality_link"] == "same run"
    assert frame.loc[second, "quality"] == pytest.approx((0.61 + 0.55) / 2)
    assert frame.loc[second, "quality_link"] == "same model"
    c_runs = frame[frame["model_id"] == "org/c"]
    assert c_runs["quality"].isna().all()
    assert data.frame(None)["quality"].isna().all()
    assert data.frame(key) is data.frame(key)  # cached


def test_model_detail_lists_every_config(data):
    rows = views.model_configs(data.frame(None), "org/a")
    assert len(rows) == 2
    assert {"run_id", "energy_source", "submitter", "itl_ms"} <= set(rows.columns)
    assert views.model_configs(data.frame(None), "nope").empty


def test_compare_side_by_side(data):
    table = views.compare_models(data.frame(None), ["org/a", "org/b", "org/missing"])
    assert list(table.columns) == ["Metric", "org/a", "org/b", "org/missing"]
    energy = table.set_index("Metric").loc["Energy per output token (J)"]
    frame = data.frame(None)
    assert energy["org/a"] == pytest.approx(
        frame[frame.model_id == "org/a"].energy_per_token_j.min()
    )
    assert energy["org/missing"] == "-"
    fig = plots.compare_bars(table)
    assert list(fig.data[0].x) == ["org/a", "org/b"]


def test_scatter_plots_draw_frontier(data):
    key = data.quality_keys()[0]
    frame = data.frame(key)
    fig = plots.energy_vs_latency(frame)
    names = [t.name for t in fig.data]
    assert "Pareto frontier" in names
    front = fig.data[names.index("Pareto frontier")]
    assert len(front.x) >= 1
    qfig = plots.energy_vs_quality(frame, key)
    assert "Pareto frontier" in [t.name for t in qfig.data]
    assert isinstance(plots.efficiency_by_hardware(frame), go.Figure)


def test_plots_on_empty_input():
    empty = lb.prepare_runs(pd.DataFrame(columns=["run_id", "model_id", "energy_source"]))
    for fig in (
        plots.energy_vs_latency(empty),
        plots.efficiency_by_hardware(empty),
        plots.power_timeline(None),
    ):
        assert fig.layout.annotations  # a "no data" note, not an exception
    assert plots.breakdown_bars({}, "t", "J").layout.annotations


def test_power_timeline_and_provenance(records):
    run = records[0][0]
    fig = plots.power_timeline(run.power_timeline)
    assert len(fig.data[0].x) == 21
    prov = views.run_provenance(run)
    assert prov["energy_source"] == "emulated:synthetic"
    assert "power_timeline" not in prov


def test_load_from_store_and_reload(tmp_path, records):
    runs, quality = records
    store = RunStore(tmp_path)
    store.append(runs[:3] + quality)
    data = LeaderboardData.load(tmp_path, reference=False)
    assert len(data.runs) == 3
    assert data.get_run(runs[0].run_id).power_timeline is not None
    assert data.get_run("missing-run-id") is None
    store.append(runs[3:])
    data.reload()
    assert len(data.runs) == len(runs)


def test_load_empty_store(tmp_path):
    data = LeaderboardData.load(tmp_path / "fresh", reference=False)
    assert data.runs.empty
    assert lb.query_table(data.frame(None), lb.TableQuery()).total == 0


def test_plot_text_is_escaped():
    evil = synthetic_model("<img src=x onerror=alert(1)>", 2.0, False)
    frame = lb.prepare_runs(pd.DataFrame([flatten_run(synthetic_run(evil, index=1))]))
    fig = plots.energy_vs_latency(frame)
    hover = fig.data[0].customdata[0][0]
    assert "<img" not in hover and "&lt;img" in hover
    bars = plots.compare_bars(views.compare_models(frame, [evil.model_id, "x"]))
    assert all("<img" not in str(x) for x in bars.data[0].x)
