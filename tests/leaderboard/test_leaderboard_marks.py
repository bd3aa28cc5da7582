"""Energy per response from the exact mean length; host-stalled and unverified runs marked."""

from __future__ import annotations

import pandas as pd
import pytest

from mlenergy.leaderboard.data import LeaderboardData
from mlenergy.leaderboard.published import attach_published, published_key
from mlenergy.leaderboard.reference_layer import reference_layer
from mlenergy.quality.published import PublishedScore
from mlenergy.store import RunStore
from mlenergy.store.tables import flatten_run
from mlenergy.testing.synthetic import synthetic_model, synthetic_run

DENSE = synthetic_model("org/dense-8b", 8.0, False)
GPQA = published_key("GPQA-Diamond")


def with_mean_length(run, mean: float):
    """``run`` with an exact mean output length ``mean`` (``output_tokens`` its rounding)."""
    work = run.workload.model_copy(
        update={"avg_output_tokens": mean, "output_tokens": max(1, round(mean))}
    )
    return run.model_copy(update={"workload": work})


def test_energy_per_response_uses_the_exact_mean_length():
    run = with_mean_length(synthetic_run(DENSE, task="gpqa", index=1), 900.4)
    data = LeaderboardData.from_frames(pd.DataFrame([flatten_run(run)]))
    row = data.runs.iloc[0]
    assert row["energy_per_response_j"] == pytest.approx(row["energy_per_token_j"] * 900.4)
    score = PublishedScore(
        model_id=DENSE.model_id,
        benchmark="GPQA-Diamond",
        score=40.0,
        unit="% accuracy",
        setting="0-shot CoT",
        source="Model card",
        source_date="2024-07",
        mode=None,
        line=2,
    )
    out = attach_published(data.runs, [score], GPQA).iloc[0]
    assert out["energy_per_response_j"] == pytest.approx(row["energy_per_token_j"] * 900.4)
    assert out["energy_per_correct_j"] == pytest.approx(row["energy_per_token_j"] * 900.4 / 0.4)


def test_reference_rows_carry_the_exact_mean_length():
    layer = reference_layer()
    frame = layer.frame.set_index("run_id")
    exact = {rid: r.workload.avg_output_tokens for rid, r in layer.records.items()}
    assert any(v is not None and v != round(v) for v in exact.values())
    for rid, mean in list(exact.items())[:50]:
        assert frame.loc[rid, "avg_output_tokens"] == pytest.approx(mean)


def test_a_store_without_the_column_falls_back_to_the_rounded_length(tmp_path):
    import pyarrow.parquet as pq

    from mlenergy.store import segments as seg

    run = with_mean_length(synthetic_run(DENSE, task="gpqa", index=2), 900.4)
    RunStore(tmp_path).append([run])
    path = seg.list_segments(tmp_path / "results", "runs")[0]
    pq.write_table(pq.read_table(path).drop_columns(["avg_output_tokens"]), path)
    data = LeaderboardData.load(tmp_path, published=[], reference=False)
    row = data.runs.iloc[0]
    assert pd.isna(row["avg_output_tokens"])
    assert row["energy_per_response_j"] == pytest.approx(row["energy_per_token_j"] * 900)


MEASURED = "measured:zeus-nvml"
REASONS = ("no driver version recorded", "no power timeline covering the request phase")


def marked_runs() -> list:
    """A stalled-kind measured run, its H100 twin, an emulated one, and an unverified one."""
    stalled = synthetic_run(
        DENSE, gpu="B200", tdp_w=1000.0, task="gpqa", energy_source=MEASURED, index=10
    )
    h100 = synthetic_run(DENSE, task="gpqa", energy_source=MEASURED, index=11)
    emulated = synthetic_run(DENSE, gpu="B200", tdp_w=1000.0, task="gpqa", index=12)
    other = synthetic_run(
        synthetic_model("org/lab-7b", 7.0, False),
        task="lm-arena-chat",
        energy_source=MEASURED,
        submitter="Some Lab",
        index=13,
    )
    sub = other.submission.model_copy(update={"unverified": REASONS})
    return [stalled, h100, emulated, other.model_copy(update={"submission": sub})]


@pytest.fixture(scope="module")
def marked_ctx(tmp_path_factory):
    from mlenergy.leaderboard.context import AppContext

    data_dir = tmp_path_factory.mktemp("marked-store")
    RunStore(data_dir).append(marked_runs())
    return AppContext.load(data_dir, reference=False)


def _by_run(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.set_index("run_id")


def test_host_bound_runs_are_the_rules_and_only_measured_ones(marked_ctx):
    stalled, h100, emulated, other = marked_runs()
    rows = _by_run(marked_ctx.frame(None))
    assert bool(rows.loc[stalled.run_id, "host_bound"])
    assert rows.loc[stalled.run_id, "marks"] == "host-bound"
    assert "300 W" in rows.loc[stalled.run_id, "marks_why"]
    for run in (h100, emulated, other):
        assert not rows.loc[run.run_id, "host_bound"]


def test_the_leaderboard_flags_what_the_measured_study_flags():
    from mlenergy.studies.measured import measured_frame

    layer = reference_layer()
    study = measured_frame(layer.records.values(), include_legacy=True)
    data = LeaderboardData.from_frames(layer.frame)
    board = set(data.runs.loc[data.runs["host_bound"], "run_id"])
    assert board == set(study.loc[study["host_bound"], "run_id"])
    assert len(board) > 10


def test_unverified_submissions_carry_their_reasons(marked_ctx):
    *_, other = marked_runs()
    row = _by_run(marked_ctx.frame(None)).loc[other.run_id]
    assert bool(row["unverified"]) and row["marks"] == "unverified"
    assert row["unverified_reasons"] == "; ".join(REASONS)
    assert "Unverified submission: no driver version recorded" in row["marks_why"]


def test_table_page_shows_marks_with_their_reasons_on_hover(marked_ctx):
    import html

    from mlenergy.leaderboard import answers
    from mlenergy.leaderboard import query as lb

    q = lb.TableQuery(task=None, source_kinds=("measured",), best_only=False)
    page, _, _ = answers.table_page(marked_ctx, None, q)
    text = html.unescape(page)
    assert '<th title="host-bound: a measured run' in text
    assert 'title="Suspect, host-bound: runs on one B200' in text
    assert ">host-bound</td>" in text
    assert 'title="Unverified submission: no driver version recorded; no power' in text
    assert ">unverified</td>" in text
    assert 'data-col="marks_why"' not in page  # a hover, not a column


def test_model_detail_shows_the_marks(marked_ctx):
    from mlenergy.leaderboard import answers

    page = answers.model_detail_html(marked_ctx, DENSE.model_id, None)
    assert ">host-bound</td>" in page and 'title="Suspect, host-bound' in page
    assert 'data-col="host_bound"' not in page
    rows = answers.model_rows(marked_ctx, DENSE.model_id, None)
    assert {"host_bound", "unverified", "unverified_reasons"} <= set(rows.columns)


def test_api_rows_carry_the_booleans(marked_ctx):
    from mlenergy.leaderboard import query as lb
    from mlenergy.leaderboard.api import _table_answer

    stalled, h100, _, other = marked_runs()
    q = lb.TableQuery(task=None, source_kinds=("measured",), best_only=False)
    rows = {r["run_id"]: r for r in _table_answer(marked_ctx, None, q)["rows"]}
    assert rows[stalled.run_id]["host_bound"] is True
    assert rows[h100.run_id]["host_bound"] is False
    assert rows[other.run_id]["unverified"] is True
    assert rows[other.run_id]["unverified_reasons"] == "; ".join(REASONS)
    assert rows[stalled.run_id]["unverified"] is False
