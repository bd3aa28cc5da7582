"""No message, docstring or page sends users to ``leaderboard import-reference`` (a no-op now).

The shipped reference is read where it ships (the leaderboard's reference layer, the measured
study, the estimator); a mention of the old command must say that it is a no-op.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAYS_NO_OP = ("no-op", "only says so", "old scripts")
DEFINED_IN = "mlenergy/commands/leaderboard.py"
"""Where the no-op command itself is defined (its note says what it does)."""


def _texts():
    for pattern in ("mlenergy/**/*.py", "mlenergy/**/*.md", "docs/**/*.md", "notebooks/*.ipynb"):
        yield from ROOT.glob(pattern)
    for name in ("README.md", "leaderboard/README.md"):
        if (ROOT / name).is_file():
            yield ROOT / name


def test_every_mention_of_import_reference_says_it_is_a_no_op():
    stale = []
    for path in _texts():
        if path.relative_to(ROOT).as_posix() == DEFINED_IN:
            continue
        text = path.read_text(encoding="utf-8")
        for hit in re.finditer(r"import-reference", text):
            around = text[max(0, hit.start() - 300) : hit.end() + 300]
            if not any(word in around for word in SAYS_NO_OP):
                line = text.count("\n", 0, hit.start()) + 1
                stale.append(f"{path.relative_to(ROOT)}:{line}")
    assert not stale, f"hints at the retired import-reference: {stale}"


def test_nothing_points_at_a_folder_beside_the_repository():
    """The reference ships in the package: no code or page sends users to ``../shared``."""
    stale = [
        f"{path.relative_to(ROOT)}:{path.read_text(encoding='utf-8').count(chr(10), 0, i) + 1}"
        for path in _texts()
        if (i := path.read_text(encoding="utf-8").find("../shared")) >= 0
    ]
    assert not stale, f"mentions of ../shared: {stale}"
