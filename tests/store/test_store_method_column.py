"""`mlenergy runs` and the leaderboard name a run's method with one rule."""

from __future__ import annotations

import pandas as pd

from mlenergy.records.generation import method_label
from mlenergy.store.listing import method_cells


def test_runs_list_and_the_leaderboard_share_the_method_label():
    frame = pd.DataFrame(
        {
            "method_kind": ["static-batch", "static-batch", "serving-steady-state", None],
            "workload_kind": ["inference", "inference", "inference", "training"],
            "generation_backend": ["compiled-static-cache", None, None, None],
            "batch_size": [8, 8, 64, 4],
        }
    )
    assert method_cells(frame) == [
        "static-batch · compiled-static-cache",
        "static-batch",
        "serving-steady-state (level 64)",
        "training",
    ]
    assert method_label("static-batch", "eager") == "static-batch · eager"
    assert method_label("serving-steady-state", "") == "serving-steady-state"
