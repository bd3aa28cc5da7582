"""The Gradio app builds over an empty and a seeded store without a browser or a server."""

from __future__ import annotations

import importlib

import pytest

from mlenergy.store import RunStore
from mlenergy.testing.synthetic import synthetic_model, synthetic_run

gr = pytest.importorskip("gradio")


def test_app_does_no_io_at_import(monkeypatch):
    from mlenergy.leaderboard.data import LeaderboardData

    def _refuse(*args, **kwargs):
        raise AssertionError("the app read the store at import time")

    monkeypatch.setattr(LeaderboardData, "load", classmethod(_refuse))
    import sys

    sys.modules.pop("mlenergy.leaderboard.app", None)
    module = importlib.import_module("mlenergy.leaderboard.app")  # must not touch the store
    assert callable(module.build_app)


@pytest.mark.slow
@pytest.mark.parametrize("seeded", [False, True])
def test_build_app(tmp_path, seeded):
    if seeded:  # emulated runs: stored, counted, but not in the default view
        model = synthetic_model("org/m", 2.0, False)
        RunStore(tmp_path).append(
            [synthetic_run(model, index=i, batch_size=8 * (i + 1)) for i in range(3)]
        )
    module = importlib.import_module("mlenergy.leaderboard.app")
    demo = module.build_app(tmp_path)
    assert isinstance(demo, gr.Blocks)
    assert demo.delete_cache == module.UPLOAD_CACHE_S  # unsubmitted uploads are swept
    by_id = {getattr(b, "elem_id", None): b for b in demo.blocks.values()}
    grid = by_id["lb-grid"].value
    assert "org/m" not in grid and "meta-llama/" in grid  # the reference, no import step
    status = by_id["lb-status"].value
    assert "ML.ENERGY reference runs" in status
    assert ("3 runs from the store" in status) == seeded
    assert by_id["detail-model"].value  # opens on the top row
    assert len(by_id["compare-models"].value) >= 2


def test_panel_shows_only_on_filtered_tabs():
    from mlenergy.leaderboard.app import panel_visible

    assert all(panel_visible(t) for t in ("Leaderboard", "Plots", "Compare", "Model detail"))
    assert not any(panel_visible(t) for t in ("Estimator", "Submit", "About"))


def test_damaged_store_fails_in_one_line_before_any_url(tmp_path, capsys, monkeypatch):
    from mlenergy.cli import main
    from mlenergy.leaderboard import app as module

    model = synthetic_model("org/m", 2.0, False)
    RunStore(tmp_path).append([synthetic_run(model, index=0)])
    segment = next((tmp_path / "results").glob("runs-*.parquet"))
    segment.write_bytes(segment.read_bytes()[:200])  # truncated: unreadable
    monkeypatch.setattr(module, "launch", lambda *a, **k: pytest.fail("launched a damaged store"))
    assert main(["leaderboard", "--data-dir", str(tmp_path), "--port", "7999"]) == 2
    out = capsys.readouterr()
    assert "http://" not in out.out + out.err
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "corrupted" in lines[0]


def test_validation_hint_names_fields_only_when_fields_are_listed():
    from mlenergy.errors import ValidationFailed

    assert ValidationFailed(["runs[0].workload.batch_size: must be > 0"]).fix.startswith(
        "Fix the listed fields"
    )
    assert ValidationFailed(["line 2.model.model_id: not a model id"]).fix.startswith(
        "Fix the listed fields"
    )
    for problem in ("bundle is empty", "cannot read bundle /x/y.json: gone", "line 3: not JSON"):
        assert "fields" not in ValidationFailed([problem]).fix
