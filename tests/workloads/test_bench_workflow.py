"""The bench workflow: Ctrl-C says what was stored; one store preflight before any work."""

from __future__ import annotations

import pytest
import torch

import mlenergy.workloads.inference as inference
from mlenergy.cli import main
from mlenergy.errors import StoreError, UserError
from mlenergy.store import RunStore
from mlenergy.store.preflight import check_output_folder, open_store_for_append

torch.set_num_threads(1)

FAST = ["--input-tokens", "4", "--output-tokens", "2", "--repeats", "1", "--idle-s", "0"]


def _interrupt_after(monkeypatch, points: int) -> None:
    """Make the runner raise Ctrl-C when point ``points + 1`` starts."""
    real = inference.run_point
    calls = {"n": 0}

    def run_point(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > points:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(inference, "run_point", run_point)


@pytest.mark.slow
def test_ctrl_c_in_bench_says_what_was_stored(tmp_path, monkeypatch, capsys):
    _interrupt_after(monkeypatch, 2)
    data = tmp_path / "data"
    args = ["bench", "-m", "preset:tiny-dense", "-b", "1,2,4", *FAST, "--data-dir", str(data)]
    assert main(args) == 130
    err = capsys.readouterr().err.strip().splitlines()[-1]
    stored = RunStore(data).runs()
    assert len(stored) == 2
    assert err.startswith("interrupted: 2 finished point(s) stored in ")
    assert all(r.run_id in err for r in stored)
    assert f"mlenergy runs list --data-dir {data}" in err


def test_ctrl_c_before_any_point_and_without_store(tmp_path, monkeypatch, capsys):
    _interrupt_after(monkeypatch, 0)
    data = tmp_path / "data"
    args = ["bench", "-m", "preset:tiny-dense", "-b", "1", *FAST, "--data-dir", str(data)]
    assert main(args) == 130
    assert "no point had finished" in capsys.readouterr().err
    assert main([*args[:-2], "--no-store"]) == 130
    assert "nothing was stored (--no-store)" in capsys.readouterr().err


def test_store_preflight_refuses_before_work_and_leaves_nothing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="not writable"):
        open_store_for_append(blocker / "data")
    fresh = tmp_path / "new" / "data"
    store = open_store_for_append(fresh)
    assert store.data_dir == fresh and not (tmp_path / "new").exists()
    with pytest.raises(UserError, match=r"report directory .* --report-dir"):
        check_output_folder(blocker / "report", what="report directory", option="--report-dir")
    check_output_folder(tmp_path / "r" / "s", what="report directory", option="--report-dir")
    assert not (tmp_path / "r").exists()
