"""The reference frame is read once per process and read again when a file of it changes."""

from __future__ import annotations

import shutil

import pandas as pd

from mlenergy.reference import reference_dir
from mlenergy.reference.measurements import load_reference


def test_a_second_load_is_the_same_frame_and_a_changed_file_is_read_again(tmp_path):
    shutil.copytree(reference_dir(), tmp_path / "ref")
    root = tmp_path / "ref"
    first = load_reference(root, include_v2=False)
    first.loc[:, "energy_per_token_j"] = -1.0  # a caller's change never reaches the cache
    second = load_reference(root, include_v2=False)
    assert (second["energy_per_token_j"] > 0).all()
    pd.testing.assert_frame_equal(second, load_reference(root, include_v2=False))
    # One run fewer in a table: the frame follows the file.
    table = root / "mlenergy-leaderboard" / "v3_llm.csv"
    lines = table.read_text(encoding="utf-8").splitlines(keepends=True)
    table.write_text("".join(lines[:-1]), encoding="utf-8")
    third = load_reference(root, include_v2=False)
    assert len(third) < len(second)
