"""Each shared rule is written once and every view reads it."""

from __future__ import annotations

import pytest

from mlenergy.leaderboard.arch import architecture_kind
from mlenergy.records.model_kind import model_kind
from mlenergy.reference.runs import read_reference
from mlenergy.studies.measured import measured_frame


@pytest.fixture(scope="module")
def reference_runs():
    return read_reference()


@pytest.mark.parametrize(
    "architecture,is_moe,expected",
    [
        ("recurrent_gemma", False, "hybrid"),
        ("nemotron_h", False, "hybrid"),
        ("jamba", True, "moe"),
        ("llama", False, "dense"),
        ("qwen3_moe", None, "moe"),
        ("Mamba-Transformer Hybrid", False, "hybrid"),
    ],
)
def test_model_kind_rule(architecture, is_moe, expected):
    assert model_kind(architecture, is_moe) == expected
    label = {"moe": "MoE"}.get(expected, expected)
    assert architecture_kind(architecture, is_moe) == label


def test_every_view_reads_the_records_kind(reference_runs):
    frame = measured_frame(reference_runs, include_legacy=True)
    kinds = {r.run_id: r.model.kind for r in reference_runs}
    assert (frame["arch"] == frame["run_id"].map(kinds)).all()
    for r in reference_runs:
        label = architecture_kind(r.model.architecture, r.model.is_moe, r.model.model_id)
        assert label.lower() == r.model.kind
    assert {r.model.kind for r in reference_runs} == {"dense", "moe", "hybrid"}


def test_architecture_spec_kind_agrees_with_the_record(reference_runs):
    from mlenergy.models.architecture import ArchitectureSpec

    spec = ArchitectureSpec.from_config(
        {"model_type": "recurrent_gemma", "hidden_size": 64, "num_hidden_layers": 2,
         "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}
    )  # fmt: skip
    assert spec.kind == "hybrid"


def _two_phase_runs():
    """Runs measured with a request phase and a decode phase whose figures differ."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "studies"))
    from measured_fixture import fixture_runs

    from mlenergy.records import Phase, PhaseResult

    out = []
    for r in fixture_runs():
        req = r.phases[0]
        decode = PhaseResult.from_totals(
            Phase.DECODE,
            duration_s=req.duration_s,
            energy_j=req.energy_j * 0.5,  # decode alone: half the request's J/token
            tokens=req.tokens,
            itl_p50_s=req.itl_p50_s,
        )
        out.append(r.model_copy(update={"phases": (req, decode)}))
    return out


def test_every_view_takes_the_request_phase_and_the_same_best_configuration(tmp_path):
    from mlenergy.leaderboard.query import best_configs, prepare_runs, within_limits
    from mlenergy.optimize.candidates import store_candidates
    from mlenergy.records.metrics import headline_phase
    from mlenergy.store import RunStore
    from mlenergy.studies.measured import best_configurations

    runs = _two_phase_runs()
    data = tmp_path / "data"
    RunStore(data).append(runs)
    expected = {r.run_id: headline_phase(r).energy_per_token_j for r in runs}
    assert all(headline_phase(r).phase.value == "request" for r in runs)
    # The leaderboard's table.
    board = prepare_runs(RunStore(data).runs_frame())
    assert dict(zip(board["run_id"], board["energy_per_token_j"], strict=True)) == pytest.approx(
        expected
    )
    # The study's configurations.
    frame = measured_frame(runs)
    assert dict(zip(frame["run_id"], frame["energy_per_token_j"], strict=True)) == pytest.approx(
        expected
    )
    # The planner's candidates.
    cands = store_candidates("org/dense-a", "gpqa", data)
    ids = [s.split("(run ")[1].rstrip(")") for s in cands["source"]]
    assert dict(zip(ids, cands["energy_per_token_j"], strict=True)) == pytest.approx(
        {i: expected[i] for i in ids}
    )
    # Best configuration within 50 ms: the study and the leaderboard pick the same runs.
    study = best_configurations(frame, 50.0).dropna(subset=["energy_per_token_j"])
    lb = best_configs(within_limits(board, 50.0, None))
    lb = lb[lb["itl_ms"].notna()]
    assert set(study["run_id"]) == set(lb["run_id"])
