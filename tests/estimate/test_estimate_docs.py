"""Estimator docs: the coefficient count comes from the code, the accuracy from the command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mlenergy.estimate.coefficients import Coefficients

ROOT = Path(__file__).resolve().parents[2]
COUNTED = re.compile(r"(\d+)\s+\**global\**\s+coefficients", re.IGNORECASE)


@pytest.mark.parametrize("doc", ["README.md", "mlenergy/estimate/README.md", "docs/estimate.md"])
def test_docs_state_the_coefficient_count_of_the_code(doc):
    text = (ROOT / doc).read_text()
    stated = [int(n) for n in COUNTED.findall(text)]
    stated += [int(n) for n in re.findall(r"len\(Coefficients\.FITTED\)`: (\d+)", text)]
    if doc != "README.md":  # the front page may leave the count to the manual
        assert stated, f"{doc} states no coefficient count"
    assert all(n == len(Coefficients.FITTED) for n in stated), (doc, stated)


def test_accuracy_tables_in_docs_are_the_commands_output():
    text = (ROOT / "docs/estimate.md").read_text()
    for block in ("validate-architecture", "validate-gpu"):
        body = text.split(f"<!-- {block}:begin -->")[1].split(f"<!-- {block}:end -->")[0]
        first = body.strip().splitlines()[0]
        assert first.startswith("Printed by `mlenergy estimate validate"), block
        assert "--markdown`" in first and "| all |" in body
