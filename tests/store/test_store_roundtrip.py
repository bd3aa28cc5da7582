"""Records round-trip through JSON and the store; flat columns; dedup; export."""

from __future__ import annotations

import json
import math

import pandas as pd
import pyarrow.parquet as pq
import pytest

from mlenergy.errors import StoreError, UserError
from mlenergy.records import QualityResult, RunRecord, SubmissionInfo, TrainingCheckpoint
from mlenergy.store import QUALITY_COLUMNS, RUN_COLUMNS, RunStore, flatten_run
from mlenergy.store.tables import PHASES

CONTRACT_COLUMNS = [
    "run_id",
    "created_at",
    "status",
    "error",
    "energy_source",
    "source_kind",
    "model_id",
    "config_fingerprint",
    "architecture",
    "is_moe",
    "num_experts",
    "experts_per_token",
    "total_params",
    "active_params",
    "dtype",
    "weights",
    "workload_kind",
    "task",
    "batch_size",
    "avg_batch_size",
    "max_num_seqs",
    "input_tokens",
    "output_tokens",
    "avg_output_tokens",
    "num_requests",
    "device",
    "tensor_parallel",
    "expert_parallel",
    "data_parallel",
    "pipeline_parallel",
    "accelerator_model",
    "accelerator_count",
    "cpu_model",
    "repeats",
    "submitter",
    "unverified",
    "idle_power_w",
    "ttft_s",
    "itl_p50_s",
    "itl_p90_s",
    "itl_p99_s",
    "final_val_perplexity",
    "train_energy_j_total",
    "content_hash",
    "tags_json",
]
PHASE_SUFFIXES = [
    "duration_s",
    "energy_j",
    "avg_power_w",
    "tokens",
    "energy_per_token_j",
    "throughput_tokens_per_s",
    "energy_j_ci95_low",
    "energy_j_ci95_high",
]


def test_flat_columns_match_the_team_contract():
    expected = CONTRACT_COLUMNS + [f"{p}_{s}" for p in PHASES for s in PHASE_SUFFIXES]
    assert list(RUN_COLUMNS) == expected
    assert PHASES == ("prefill", "decode", "request", "train")


def test_json_round_trip(factory):
    for rec in (factory.make_run(), factory.make_cpu_run(), factory.make_quality()):
        again = type(rec).model_validate_json(rec.model_dump_json())
        assert again == rec
        assert again.content_hash() == rec.content_hash()


def test_store_round_trip_runs_and_quality(data_dir, factory):
    store = RunStore(data_dir)
    assert not data_dir.exists(), "opening a store creates nothing"
    assert store.runs() == [] and store.quality() == []
    assert list(store.runs_frame().columns) == list(RUN_COLUMNS)
    assert list(store.quality_frame().columns) == list(QUALITY_COLUMNS)

    runs = [factory.make_run(seed=i) for i in range(3)] + [factory.make_cpu_run(seed=5)]
    qual = factory.make_quality(linked_run_ids=(runs[0].run_id,))
    res = store.append([*runs, qual])
    assert (res.added, res.duplicates) == (5, 0)

    fresh = RunStore(data_dir)  # another process would see the same
    assert fresh.runs() == runs  # oldest first; full equality incl. nested phases
    assert fresh.quality() == [qual]
    assert fresh.get(runs[2].run_id) == runs[2]
    frame = fresh.runs_frame()
    assert list(frame["run_id"]) == [r.run_id for r in runs]
    assert frame["created_at"].dt.tz is not None
    row = frame.iloc[0]
    expected = flatten_run(runs[0])
    for col in (
        "model_id",
        "decode_energy_j",
        "decode_energy_per_token_j",
        "content_hash",
        "prefill_energy_j_ci95_low",
        "itl_p50_s",
        "ttft_s",
        "source_kind",
    ):
        assert row[col] == expected[col], col
    assert math.isnan(row["train_energy_j"]) and pd.isna(row["final_val_perplexity"])
    assert fresh.quality_frame()["linked_run_ids_json"].iloc[0] == json.dumps([runs[0].run_id])
    assert fresh.count() == 4 and bool(RunStore(data_dir / "empty"))


def test_duplicates_by_content_hash(data_dir, factory):
    store = RunStore(data_dir)
    run = factory.make_run()
    assert store.append([run, run]).added == 1  # within one batch
    res = store.append([run])
    assert (res.added, res.duplicates, res.duplicate_ids) == (0, 1, (run.run_id,))
    # The submission info is not part of the content: an approved copy is a duplicate.
    approved = run.model_copy(
        update={
            "submission": SubmissionInfo(
                submission_id="s1", submitter="lab", submitted_at=run.created_at
            )
        }
    )
    assert store.append([approved]).duplicates == 1
    assert len(RunStore(data_dir).runs()) == 1


def test_same_id_different_content_is_refused_and_nothing_written(data_dir, factory):
    store = RunStore(data_dir)
    run = factory.make_run()
    store.append([run])
    before = sorted(p.name for p in (data_dir / "results").iterdir())
    other = factory.make_run(seed=3, run_id=run.run_id)
    with pytest.raises(StoreError, match="already in the store with different content"):
        store.append([factory.make_run(seed=4), other])
    assert sorted(p.name for p in (data_dir / "results").iterdir()) == before


def test_get_missing_is_a_user_error(data_dir, factory):
    RunStore(data_dir).append([factory.make_run()])
    with pytest.raises(UserError, match="no run 'nope'"):
        RunStore(data_dir).get("nope")


def test_training_columns(data_dir, factory):
    ckpts = (
        TrainingCheckpoint(
            step=10, tokens_seen=10_240, duration_s=5.0, energy_j=100.0, val_perplexity=80.0
        ),
        TrainingCheckpoint(
            step=20, tokens_seen=20_480, duration_s=10.0, energy_j=210.0, val_perplexity=55.5
        ),
    )
    run = factory.make_cpu_run(phases=(), checkpoints=ckpts)
    row = flatten_run(run)
    assert row["final_val_perplexity"] == 55.5 and row["train_energy_j_total"] == 210.0
    assert row["decode_energy_j"] is None


def test_query_and_export(data_dir, tmp_path, factory):
    store = RunStore(data_dir)
    store.append([factory.make_run(seed=i) for i in range(4)] + [factory.make_quality()])
    agg = store.query("SELECT model_id, count(*) AS n FROM runs GROUP BY model_id")
    assert agg["n"].tolist() == [4]
    with pytest.raises(UserError, match="query failed"):
        store.query("SELECT nope FROM runs")
    csv = store.export(tmp_path / "runs.csv", fmt="csv")
    assert pd.read_csv(csv).shape == (4, len(RUN_COLUMNS))
    parquet = store.export(tmp_path / "runs.parquet", fmt="parquet")
    assert pq.read_table(parquet).num_rows == 4
    jsonl = store.export(tmp_path / "q.jsonl", fmt="jsonl", table="quality")
    assert QualityResult.model_validate_json(jsonl.read_text().splitlines()[0])
    lines = store.export(tmp_path / "r.jsonl", fmt="jsonl").read_text().splitlines()
    assert [RunRecord.model_validate_json(x) for x in lines] == store.runs()
    with pytest.raises(UserError, match="unknown export format"):
        store.export(tmp_path / "x.xml", fmt="xml")  # type: ignore[arg-type]
    assert not (tmp_path / "x.xml").exists()


def test_compact_keeps_everything(data_dir, factory):
    store = RunStore(data_dir)
    runs = [factory.make_run(seed=i) for i in range(6)]
    for run in runs:
        store.append([run])
    store.append([factory.make_quality()])
    assert len(list((data_dir / "results").glob("runs-*.parquet"))) == 6
    assert store.compact() == 6
    assert len(list((data_dir / "results").glob("runs-*.parquet"))) == 1
    fresh = RunStore(data_dir)
    assert fresh.runs() == runs
    assert fresh.append(runs).duplicates == 6


def test_automatic_compaction_merges_small_segments(data_dir, factory, monkeypatch):
    import mlenergy.store.store as store_module

    monkeypatch.setattr(store_module, "AUTO_COMPACT_SEGMENTS", 4)
    monkeypatch.setattr(store_module, "AUTO_COMPACT_MAX_ROWS", 3)
    store = RunStore(data_dir)
    big = [factory.make_run(seed=i) for i in range(3)]
    store.append(big)  # 3 records: not small, never merged automatically
    big_segment = next((data_dir / "results").glob("runs-*.parquet")).name
    singles = [factory.make_run(seed=10 + i) for i in range(5)]
    for run in singles:
        store.append([run])
    names = sorted(p.name for p in (data_dir / "results").glob("runs-*.parquet"))
    assert big_segment in names and len(names) <= 4
    assert RunStore(data_dir).runs() == big + singles
