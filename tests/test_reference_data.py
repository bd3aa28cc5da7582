"""The reference data shipped in the package: every file has its source, the override works."""

from __future__ import annotations

import json

import pytest

from mlenergy.cli import main
from mlenergy.errors import UserError
from mlenergy.reference import PACKAGE_DIR, reference_dir, shipped_files, sources


def test_every_shipped_file_has_a_sources_row_and_every_row_a_file():
    rows = sources()
    files = [str(p) for p in shipped_files()]
    assert len(files) > 50
    for f in files:
        assert any(f == s.path or (s.path.endswith("/") and f.startswith(s.path)) for s in rows), f
    for s in rows:
        assert any(f == s.path or f.startswith(s.path) for f in files), s.path
        assert s.source and s.licence and s.date and s.changes


def test_the_default_is_the_shipped_folder(monkeypatch):
    monkeypatch.delenv("MLENERGY_REFERENCE_DIR", raising=False)
    assert reference_dir() == PACKAGE_DIR
    assert (PACKAGE_DIR / "mlenergy-leaderboard" / "v3_llm.csv").is_file()


def test_the_variable_points_every_reader_elsewhere(tmp_path, monkeypatch):
    monkeypatch.setenv("MLENERGY_REFERENCE_DIR", str(tmp_path))
    assert reference_dir() == tmp_path.resolve()
    monkeypatch.setenv("MLENERGY_REFERENCE_DIR", str(tmp_path / "absent"))
    with pytest.raises(UserError, match="not a folder"):
        reference_dir()


def test_reference_command_lists_sources(capsys, monkeypatch):
    monkeypatch.delenv("MLENERGY_REFERENCE_DIR", raising=False)
    assert main(["reference", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    entries = {e["path"]: e for e in out["entries"]}
    assert entries["model-configs/"]["files"] >= 40
    assert entries["mlenergy-leaderboard/v3_llm.csv"]["files"] == 1
    assert "Apache-2.0" in entries["perseus-profiles/gpt3-175b_a40.csv"]["licence"]


def test_a_bad_variable_is_one_error_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLENERGY_REFERENCE_DIR", str(tmp_path / "absent"))
    assert main(["reference"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: $MLENERGY_REFERENCE_DIR") and err.count("\n") == 1
