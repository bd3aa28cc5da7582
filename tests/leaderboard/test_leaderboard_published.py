"""Published quality on the leaderboard: menu keys, mode matching, labels, energy per correct."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mlenergy.errors import UserError
from mlenergy.leaderboard import answers
from mlenergy.leaderboard import plots as plots
from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.columns import COLUMNS
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.data import LeaderboardData
from mlenergy.leaderboard.html import render_table
from mlenergy.leaderboard.published import (
    attach_published,
    load_published,
    published_key,
    published_keys,
)
from mlenergy.quality.published import read_published_quality
from mlenergy.records.metrics import energy_per_correct_j
from mlenergy.store import RunStore
from mlenergy.store.tables import flatten_quality, flatten_run
from mlenergy.testing.synthetic import synthetic_model, synthetic_quality, synthetic_run

THINKER = synthetic_model("org/thinker-30b", 3.0, True)
THINKER_FP8 = synthetic_model("org/thinker-30b-FP8", 3.0, True, dtype="fp8")
DENSE = synthetic_model("org/dense-8b", 8.0, False)
UNSCORED = synthetic_model("org/unscored-1b", 1.0, False)

CSV = """model_id,benchmark,score,unit,setting,source,source_date
org/thinker-30b,GPQA-Diamond,70.0,% accuracy,thinking mode; avg of 10,Tech report Table 1,2025-05
org/thinker-30b,GPQA-Diamond,50.0,% accuracy,non-thinking mode,Tech report Table 2,2025-05
org/dense-8b,GPQA-Diamond,40.0,% accuracy,0-shot CoT,Model card,2024-07
org/dense-8b,LMArena text score,1250,Elo-scale (Bradley-Terry),snapshot 2025-11,lmarena.ai,2025-11
org/nobody,MMLU-Pro,60.0,% accuracy,5-shot,Somewhere,2025
"""
GPQA = published_key("GPQA-Diamond")

# (model, task, output tokens per request)
RUNS = [
    (THINKER, "gpqa", 6000),
    (THINKER, "lm-arena-chat", 600),
    (THINKER_FP8, "gpqa", 7000),
    (DENSE, "gpqa", 900),
    (DENSE, "lm-arena-chat", 400),
    (UNSCORED, "gpqa", 800),
]


@pytest.fixture(scope="module")
def published_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("published") / "published-quality.csv"
    path.write_text(CSV, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def records():
    out = []
    for i, (model, task, tokens) in enumerate(RUNS):
        run = synthetic_run(model, task=task, index=i)
        work = run.workload.model_copy(update={"output_tokens": tokens})
        out.append(run.model_copy(update={"workload": work}))
    return out


@pytest.fixture(scope="module")
def data(records, published_file):
    return LeaderboardData.from_frames(
        pd.DataFrame([flatten_run(r) for r in records]),
        pd.DataFrame([flatten_quality(synthetic_quality(DENSE, 0.6))]),
        published=read_published_quality(published_file),
    )


def _row(frame: pd.DataFrame, model, task: str) -> pd.Series:
    rows = frame[(frame["model_id"] == model.model_id) & (frame["task"] == task)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_menu_lists_stored_figures_then_benchmarks_that_score_a_stored_model(data):
    keys = data.quality_keys()
    assert keys == ["lm-eval:synthetic / acc", GPQA, published_key("LMArena text score")]
    # MMLU-Pro scores only a model the store does not hold: not offered
    assert published_key("MMLU-Pro") not in keys


def test_published_keys_order_preferred_first(published_file):
    scores = read_published_quality(published_file)
    keys = published_keys(scores, ["org/dense-8b", "org/nobody"])
    assert keys == [GPQA, published_key("MMLU-Pro"), published_key("LMArena text score")]


def test_run_mode_picks_thinking_or_non_thinking_score(data):
    frame = data.frame(GPQA)
    thinking = _row(frame, THINKER, "gpqa")
    chat = _row(frame, THINKER, "lm-arena-chat")
    assert thinking["quality"] == 70.0
    assert chat["quality"] == 50.0
    assert "thinking run" in thinking["quality_link"]
    assert "Tech report Table 1" in thinking["quality_link"]
    assert "Tech report Table 2" in chat["quality_link"]


def test_published_figures_are_labelled_published_never_measured(data):
    frame = data.frame(GPQA)
    scored = frame[frame["quality"].notna()]
    assert set(scored["quality_source"]) == {"published:GPQA-Diamond"}
    assert scored["quality_link"].str.contains("not measured in this run").all()
    stored = data.frame("lm-eval:synthetic / acc")
    linked = stored[stored["quality"].notna()]
    assert set(linked["quality_source"]) == {"measured:lm-eval:synthetic / acc"}


def test_fp8_checkpoint_inherits_and_unscored_model_has_none(data):
    frame = data.frame(GPQA)
    fp8 = _row(frame, THINKER_FP8, "gpqa")
    assert fp8["quality"] == 70.0
    assert "FP8 checkpoint inherits" in fp8["quality_link"]
    none = _row(frame, UNSCORED, "gpqa")
    assert np.isnan(none["quality"]) and none["quality_source"] == ""
    assert np.isnan(none["energy_per_correct_j"])


def test_energy_per_correct_is_energy_per_response_over_accuracy(data):
    frame = data.frame(GPQA)
    row = _row(frame, THINKER, "gpqa")
    per_response = row["energy_per_token_j"] * 6000
    assert row["energy_per_response_j"] == pytest.approx(per_response)
    assert row["energy_per_correct_j"] == pytest.approx(per_response / 0.70)
    dense = _row(frame, DENSE, "gpqa")
    assert dense["quality"] == 40.0  # setting states no mode: used for the run as is
    assert dense["energy_per_correct_j"] == pytest.approx(dense["energy_per_response_j"] / 0.4)


def test_no_energy_per_correct_for_chat_runs_or_non_accuracy_scores(data):
    gpqa = data.frame(GPQA)
    assert np.isnan(_row(gpqa, THINKER, "lm-arena-chat")["energy_per_correct_j"])
    arena = data.frame(published_key("LMArena text score"))
    chat = _row(arena, DENSE, "lm-arena-chat")
    assert chat["quality"] == 1250.0
    assert arena["energy_per_correct_j"].isna().all()


def test_energy_per_correct_identity_and_edges():
    out = energy_per_correct_j(
        np.array([100.0, 100.0, np.nan, 100.0]),
        np.array([50.0, 0.0, 50.0, 1200.0]),
        np.array([True, True, True, False]),
    )
    assert out[0] == pytest.approx(200.0)
    assert np.isnan(out[1:]).all()


def test_attach_published_without_output_lengths_leaves_mode_unknown(records, published_file):
    frame = lb.prepare_runs(pd.DataFrame([flatten_run(records[0])]).drop(columns="output_tokens"))
    out = attach_published(frame, read_published_quality(published_file), GPQA)
    assert out["quality"].iloc[0] == 70.0  # first published row
    assert "mode is unknown" in out["quality_link"].iloc[0]
    assert np.isnan(out["energy_per_correct_j"].iloc[0])


def test_quality_plot_uses_published_scores_with_their_source(data):
    fig = plots.energy_vs_quality(data.frame(GPQA), GPQA)
    points = [t for t in fig.data if t.name != "Pareto frontier"]
    assert sum(len(t.x) for t in points) == 5  # every scored run; none made up
    assert "published score, not measured" in fig.layout.xaxis.title.text
    hover = points[0].hovertemplate
    assert "quality source" in hover and "quality from" in hover
    custom = np.concatenate([t.customdata for t in points])
    assert any("published:GPQA-Diamond" in str(c) for c in custom[:, 6])


def test_table_shows_columns_and_source_on_hover(data):
    res = lb.query_table(data.frame(GPQA), lb.TableQuery(task="gpqa"))
    html = render_table(res.page_rows, COLUMNS)
    assert "Energy/correct (J)" in html and "Quality source" in html
    assert 'data-col="quality" title="published GPQA-Diamond 70' in html


def test_load_published_default_path_and_missing(tmp_path, monkeypatch, published_file):
    empty = tmp_path / "ref"
    empty.mkdir()
    monkeypatch.setenv("MLENERGY_REFERENCE_DIR", str(empty))
    assert load_published() == []  # the app works without the file
    (empty / "published-quality.csv").write_text(CSV, encoding="utf-8")
    assert len(load_published()) == 5
    with pytest.raises(UserError, match="not found"):
        load_published(tmp_path / "missing.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text(CSV.replace("70.0", "seventy"), encoding="utf-8")
    with pytest.raises(UserError, match="line 2"):
        load_published(bad)


def test_app_context_offers_published_figures(tmp_path, records, published_file):
    RunStore(tmp_path / "store").append(records)
    ctx = AppContext.load(tmp_path / "store", published_file, reference=False)
    # the opening task (lm-arena-chat) opens on its figure, LMArena's, not the first listed
    assert ctx.default_quality == published_key("LMArena text score")
    assert ctx.view(["emulated"]).quality_for("gpqa") == GPQA
    fig = answers.plot_figure(ctx, answers.PLOTS[0], GPQA, lb.TableQuery(best_only=False))
    assert sum(len(t.x) for t in fig.data if t.name != "Pareto frontier") == 5
    assert ctx.reload() is False and GPQA in ctx.quality_keys
