"""One rule for a run's quality figure, shared by the leaderboard and the measured study."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd
import pytest

from mlenergy.analysis.quality_attach import pick_quality, store_quality
from mlenergy.leaderboard.data import LeaderboardData
from mlenergy.leaderboard.published import published_key
from mlenergy.quality.published import PublishedScore
from mlenergy.records import QualityResult
from mlenergy.store.tables import flatten_run
from mlenergy.testing.synthetic import synthetic_model, synthetic_run

MEASURED = "measured:zeus-nvml"
OWN = synthetic_model("org/own-8b", 8.0, False)
OTHER = synthetic_model("org/other-8b", 8.0, False)
GPQA = "GPQA-Diamond"
IMPORTED = {"imported_from": "lm-eval", "origin": "lm-eval 0.4.13"}


def score(model_id: str, value: float) -> PublishedScore:
    return PublishedScore(
        model_id=model_id,
        benchmark=GPQA,
        score=value,
        unit="% accuracy",
        setting="0-shot CoT",
        source="Model card",
        source_date="2025-01",
        mode=None,
        line=2,
    )


def record(value: float, day: int, tags: dict | None = None) -> QualityResult:
    return QualityResult(
        model=OWN,
        software=synthetic_run(OWN).software,
        task="lm-eval:gpqa_diamond_cot_zeroshot",
        metric="exact_match",
        value=value,
        higher_is_better=True,
        created_at=datetime(2026, 1, day, tzinfo=UTC),
        tags=tags or {},
    )


SCORES = [score(OWN.model_id, 40.0), score(OTHER.model_id, 30.0)]


def test_the_stores_record_wins_over_the_published_score():
    fig = pick_quality([record(0.6, 1)], SCORES, OWN.model_id, GPQA, mean_output_tokens=900)
    assert fig.score == pytest.approx(60.0) and fig.is_accuracy
    assert fig.source_label == "measured:lm-eval:gpqa_diamond_cot_zeroshot"
    assert "published 40" in fig.how and fig.published is None
    other = pick_quality([record(0.6, 1)], SCORES, OTHER.model_id, GPQA, mean_output_tokens=900)
    assert other.score == 30.0 and other.source_label == "published:GPQA-Diamond"
    assert other.published is SCORES[1]


def test_measured_records_come_before_imported_ones_even_older():
    measured = record(0.55, 1)
    imported = [
        record(0.7, 5, {**IMPORTED, "filter": "strict-match"}),
        record(0.8, 5, {**IMPORTED, "filter": "none"}),
    ]
    fig = store_quality([*imported, measured], OWN.model_id, GPQA)
    assert fig.score == pytest.approx(55.0) and fig.source_label.startswith("measured:")
    fig = store_quality(imported, OWN.model_id, GPQA)  # then filter none before strict-match
    assert fig.score == pytest.approx(80.0) and fig.source_label.startswith("imported:")
    assert "other figures of that evaluation: exact_match 70" in fig.how


def test_leaderboard_and_study_attach_the_same_figure():
    from mlenergy.studies.measured import attach_quality, best_configurations, measured_frame

    runs = [
        synthetic_run(m, task="gpqa", energy_source=MEASURED, index=i)
        for i, m in enumerate((OWN, OTHER))
    ]
    records = [record(0.6, 1)]
    board = LeaderboardData.from_frames(
        pd.DataFrame([flatten_run(r) for r in runs]), published=SCORES, quality_records=records
    ).frame(published_key(GPQA))
    study = attach_quality(
        best_configurations(measured_frame(runs), 1e9), SCORES, records, {"gpqa": GPQA}
    )
    board = board.set_index("model_id")
    for row in study.itertuples():
        assert board.loc[row.model_id, "quality"] == pytest.approx(row.quality_score)
        assert board.loc[row.model_id, "quality_source"] == row.quality_source
        assert board.loc[row.model_id, "energy_per_correct_j"] == pytest.approx(
            row.energy_per_correct_j
        )
    assert board.loc[OWN.model_id, "quality_source"].startswith("measured:")
    assert "preferred to published scores" in board.loc[OWN.model_id, "quality_link"]
