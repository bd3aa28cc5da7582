"""The measured Perseus pipeline profiles of the reference data, in the planner's columns.

``../shared/reference/perseus-profiles/`` holds GPT-3 175B and Bloom 176B split into 8 stages
(tensor parallel 8) measured on A40 GPUs at 60 SM clocks (Perseus, SOSP 2024; columns
``stage,instruction,frequency,time,energy``). The blocking power measured there is 70.38 W.
"""

from __future__ import annotations

import csv
from pathlib import Path

from mlenergy.errors import UserError
from mlenergy.estimate.reference import reference_dir
from mlenergy.optimize.profile import PipelineProfile, profile_from_table

PERSEUS_A40_BLOCKING_W = 70.38
"""Blocking (communication-wait) power of an A40 measured in the Perseus paper (W)."""
PERSEUS_PROFILES = {"gpt3-175b": "gpt3-175b_a40.csv", "bloom-176b": "bloom-176b_a40.csv"}


def load_perseus_profile(
    name: str = "gpt3-175b", reference: str | Path | None = None
) -> PipelineProfile:
    """Read one reference profile (``gpt3-175b`` or ``bloom-176b``).

    Raises:
        UserError: Unknown name or no reference data.
    """
    if name not in PERSEUS_PROFILES:
        raise UserError(
            f"no reference profile {name!r}", f"Use one of {', '.join(PERSEUS_PROFILES)}"
        )
    root = Path(reference) if reference is not None else reference_dir()
    path = root / "perseus-profiles" / PERSEUS_PROFILES[name] if root is not None else None
    if path is None or not path.is_file():
        raise UserError(
            "reference Perseus profiles not found", "Point --reference at shared/reference"
        )
    with path.open(encoding="utf-8") as fh:
        rows = [
            {
                "stage": r["stage"],
                "instruction": r["instruction"],
                "frequency_mhz": r["frequency"],
                "time_s": r["time"],
                "energy_j": r["energy"],
            }
            for r in csv.DictReader(fh)
        ]
    return profile_from_table(rows, f"measured:perseus-{name}-a40")
