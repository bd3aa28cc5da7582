"""The leaderboard's three-way architecture label (dense / MoE / hybrid), one rule everywhere."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from mlenergy.leaderboard import plots as plots
from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.arch import ARCH_KINDS, architecture_kind
from mlenergy.leaderboard.data import LeaderboardData
from mlenergy.store.tables import flatten_run
from mlenergy.testing.synthetic import synthetic_model, synthetic_run

DENSE = synthetic_model("org/dense-7b", 7.0, False)
MOE = synthetic_model("org/moe-a3b", 3.0, True)
# A Nemotron-H Mamba-Transformer hybrid as the reference importer records it (not MoE).
HYBRID = synthetic_model("nvidia/NVIDIA-Nemotron-Nano-9B-v2", 9.0, False).model_copy(
    update={"architecture": "nemotron_h"}
)


@pytest.mark.parametrize(
    ("architecture", "is_moe", "model_id", "kind"),
    [
        ("nemotron_h", False, "nvidia/NVIDIA-Nemotron-Nano-12B-v2", "hybrid"),
        ("Mamba-Transformer Hybrid", None, "x", "hybrid"),
        ("jamba", False, "ai21labs/Jamba-v0.1", "hybrid"),
        ("falcon_h1", False, "tiiuae/Falcon-H1-7B", "hybrid"),
        ("zamba2", False, "Zyphra/Zamba2-7B", "hybrid"),
        ("unknown", False, "state-spaces/mamba-2.8b", "hybrid"),
        ("qwen3", False, "Qwen/Qwen3-8B", "dense"),
        ("llama", False, "meta-llama/Llama-3.1-8B", "dense"),
        ("qwen3_moe", True, "Qwen/Qwen3-30B-A3B", "MoE"),
        ("nemotron_h", True, "a hybrid MoE", "MoE"),  # MoE wins, as in ArchitectureSpec.kind
        ("synthetic_moe", math.nan, "m", "MoE"),  # flag missing: the name decides
        ("MoE", None, "m", "MoE"),
        (None, None, None, "dense"),
    ],
)
def test_architecture_kind(architecture, is_moe, model_id, kind):
    assert architecture_kind(architecture, is_moe, model_id) == kind


def _data() -> LeaderboardData:
    recs = [
        synthetic_run(model, batch_size=bs, index=i * 10 + j)
        for i, model in enumerate((DENSE, MOE, HYBRID))
        for j, bs in enumerate((8, 64))
    ]
    return LeaderboardData.from_frames(pd.DataFrame([flatten_run(r) for r in recs]))


def test_hybrid_is_labelled_and_filtered_as_hybrid():
    frame = _data().frame()
    kinds = frame.groupby("model_id")["arch_kind"].agg(set).to_dict()
    assert kinds == {
        DENSE.model_id: {"dense"},
        MOE.model_id: {"MoE"},
        HYBRID.model_id: {"hybrid"},
    }
    assert ARCH_KINDS == ("dense", "MoE", "hybrid")
    for arch, model in (("dense", DENSE), ("MoE", MOE), ("hybrid", HYBRID)):
        rows = lb.filter_runs(frame, lb.TableQuery(arch=arch))
        assert set(rows["model_id"]) == {model.model_id}, arch
    assert set(lb.filter_runs(frame, lb.TableQuery(arch="all"))["model_id"]) == {
        DENSE.model_id,
        MOE.model_id,
        HYBRID.model_id,
    }
    # The table shows the label, and the plots' hover text carries the same one.
    page = lb.query_table(frame, lb.TableQuery(arch="hybrid", best_only=False)).page_rows
    assert set(page["arch_kind"]) == {"hybrid"}
    fig = plots.energy_vs_latency(frame)
    hover = {(row[0], row[5]) for trace in fig.data for row in trace.customdata}
    assert (HYBRID.model_id, "hybrid") in hover and (DENSE.model_id, "dense") in hover
