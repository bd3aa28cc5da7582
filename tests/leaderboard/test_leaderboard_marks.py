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
