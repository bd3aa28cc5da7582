import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from mlenergy.records import (
    Hardware,
    ModelInfo,
    Phase,
    PhaseResult,
    QualityResult,
    RepeatStats,
    RunRecord,
    Software,
    Submission,
    Workload,
    export_schemas,
)


def _model(**kw):
    base = dict(
        model_id="preset:tiny-moe",
        config_fingerprint="0123456789abcdef",
        architecture="mixtral",
        is_moe=True,
        num_experts=8,
        experts_per_token=2,
        total_params=1_000_000,
        active_params=400_000,
        dtype="float32",
        weights="random",
    )
    base.update(kw)
    return ModelInfo(**base)


def _run(**kw):
    base = dict(
        model=_model(),
        workload=Workload(
            kind="inference", batch_size=4, input_tokens=64, output_tokens=64, num_requests=4
        ),
        hardware=Hardware(cpu_model="Test CPU", cpu_cores=2, cpu_tdp_w=30.0, memory_gb=24),
        software=Software(python="3.11.7", mlenergy="0.1.0"),
        energy_source="modelled:cpu-tdp",
        phases=(
            PhaseResult(
                phase=Phase.DECODE,
                duration_s=2.0,
                energy_j=40.0,
                avg_power_w=20.0,
                tokens=252,
                energy_per_token_j=40.0 / 252,
                throughput_tokens_per_s=126.0,
                energy_j_repeats=RepeatStats.from_values([39.0, 40.0, 41.0]),
            ),
        ),
        started_at=datetime(2026, 11, 30, tzinfo=UTC),
    )
    base.update(kw)
    return RunRecord(**base)


def test_json_round_trip_is_identity():
    rec = _run()
    again = RunRecord.model_validate_json(rec.model_dump_json())
    assert again == rec
    assert again.content_hash() == rec.content_hash()


def test_unknown_field_rejected():
    data = json.loads(_run().model_dump_json())
    data["energy_joules"] = 1.0
    with pytest.raises(ValidationError, match="energy_joules"):
        RunRecord.model_validate(data)


def test_records_are_frozen():
    rec = _run()
    with pytest.raises(ValidationError):
        rec.energy_source = "measured:zeus-nvml"


@pytest.mark.parametrize("label", ["zeus", "measured", "measured:", "guessed:x", "measured: x"])
def test_bad_energy_source_rejected(label):
    with pytest.raises(ValidationError, match="energy_source"):
        _run(energy_source=label)


def test_negative_energy_and_nan_rejected():
    with pytest.raises(ValidationError):
        PhaseResult(phase=Phase.DECODE, duration_s=1.0, energy_j=-1.0, tokens=1)
    with pytest.raises(ValidationError):
        PhaseResult(phase=Phase.DECODE, duration_s=float("nan"), tokens=1)


def test_missing_energy_is_none_not_zero():
    p = PhaseResult(phase=Phase.DECODE, duration_s=1.0, tokens=10)
    assert p.energy_j is None


def test_moe_needs_expert_counts_and_active_le_total():
    with pytest.raises(ValidationError, match="num_experts"):
        _model(num_experts=None)
    with pytest.raises(ValidationError, match="active_params"):
        _model(active_params=2_000_000)


def test_failed_run_needs_error_and_ok_run_needs_phase():
    with pytest.raises(ValidationError, match="error"):
        _run(status="failed")
    failed = _run(status="failed", error="out of memory at batch size 64", phases=())
    assert failed.status == "failed"
    with pytest.raises(ValidationError, match="phase"):
        _run(phases=())


def test_inference_needs_output_tokens():
    with pytest.raises(ValidationError, match="output_tokens"):
        Workload(kind="inference", batch_size=1, input_tokens=8, output_tokens=0, num_requests=1)
    with pytest.raises(ValidationError):
        Workload(kind="inference", batch_size=0, input_tokens=8, output_tokens=8, num_requests=1)


def test_repeat_stats_ci():
    st = RepeatStats.from_values([1.0, 2.0, 3.0])
    assert st.mean == pytest.approx(2.0)
    assert st.std == pytest.approx(1.0)
    # t(0.975, 2) = 4.303; half width = 4.303 / sqrt(3)
    assert st.ci95.high - st.mean == pytest.approx(4.3027 / 3**0.5, rel=1e-3)
    assert RepeatStats.from_values([5.0]).ci95 is None


def test_repeat_stats_ci_truncated_at_zero_for_nonnegative_quantities():
    # n=2, spread out: the Student-t interval reaches far below 0 (t(0.975, 1) = 12.706)
    vals = [0.01, 0.05]
    half = 12.7062 * (0.04 / 2**0.5) / 2**0.5
    st = RepeatStats.from_values(vals)  # all >= 0: inferred non-negative
    assert st.ci95.low == 0.0
    assert st.ci95.high == pytest.approx(0.03 + half, rel=1e-4)
    assert st.ci95.low <= st.mean <= st.ci95.high
    assert RepeatStats.from_values(vals, nonnegative=True).ci95 == st.ci95
    # opting out keeps the plain Student-t interval, negative low end included
    raw = RepeatStats.from_values(vals, nonnegative=False)
    assert raw.ci95.low == pytest.approx(0.03 - half, rel=1e-4) and raw.ci95.low < 0
    assert raw.ci95.high == st.ci95.high
    # a quantity with negative values is inferred signed: no clamp
    signed = RepeatStats.from_values([-1.0, 1.0])
    assert signed.ci95.low == pytest.approx(-12.7062, rel=1e-4)
    # an interval already above 0 is unchanged by the clamp
    tight = RepeatStats.from_values([10.0, 11.0, 12.0], nonnegative=True)
    assert tight.ci95.low == pytest.approx(11.0 - 4.3027 / 3**0.5, rel=1e-3)
    with pytest.raises(ValueError, match="nonnegative"):
        RepeatStats.from_values([-1.0, 2.0], nonnegative=True)


def test_content_hash_ignores_submission_only():
    from mlenergy.records import SubmissionInfo

    rec = _run()
    sub = rec.model_copy(
        update={
            "submission": SubmissionInfo(
                submission_id="s1", submitter="lab", submitted_at=datetime.now(UTC)
            )
        }
    )
    assert sub.content_hash() == rec.content_hash()
    other = _run(tags={"seed": "1"})
    assert other.content_hash() != rec.content_hash()


def test_submission_and_quality_round_trip():
    rec = _run()
    q = QualityResult(
        model=rec.model,
        software=rec.software,
        task="perplexity:pydoc",
        metric="perplexity",
        value=42.0,
        higher_is_better=False,
        linked_run_ids=(rec.run_id,),
    )
    sub = Submission(submitter="lab", runs=(rec,), quality=(q,))
    assert Submission.model_validate_json(sub.model_dump_json()) == sub


def test_schema_export(tmp_path):
    paths = export_schemas(tmp_path)
    names = sorted(p.name for p in paths)
    assert names == [
        "quality_result.schema.json",
        "run_record.schema.json",
        "submission.schema.json",
    ]
    schema = json.loads((tmp_path / "run_record.schema.json").read_text())
    assert schema["additionalProperties"] is False
    assert not list(tmp_path.glob("*.tmp"))


def test_phase_from_totals_derives_rates_and_never_invents_figures():
    p = PhaseResult.from_totals(Phase.DECODE, 2.0, 40.0, 100, itl_p50_s=0.02)
    assert (p.avg_power_w, p.energy_per_token_j, p.throughput_tokens_per_s) == (20.0, 0.4, 50.0)
    assert p.itl_p50_s == 0.02
    missing = PhaseResult.from_totals(Phase.DECODE, 2.0, None, 100)
    assert missing.energy_j is None and missing.avg_power_w is None
    assert missing.energy_per_token_j is None and missing.throughput_tokens_per_s == 50.0
    empty = PhaseResult.from_totals(Phase.PREFILL, 0.0, 0.0, 0)
    assert (empty.avg_power_w, empty.energy_per_token_j, empty.throughput_tokens_per_s) == (
        None,
        None,
        None,
    )
