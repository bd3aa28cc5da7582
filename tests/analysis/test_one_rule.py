"""Each shared rule is written once and every view reads it."""

from __future__ import annotations

import pytest

from mlenergy.estimate.reference import read_reference
from mlenergy.leaderboard.arch import architecture_kind
from mlenergy.records.model_kind import model_kind
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
