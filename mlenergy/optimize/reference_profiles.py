"""The measured Perseus pipeline profiles shipped with mlenergy, by name.

The reference's ``perseus-profiles/`` holds GPT-3 175B and Bloom 176B split into 8 stages
(tensor parallel 8) measured on A40 GPUs at 60 SM clocks and on A100-SXM GPUs at 38 SM clocks
(Perseus, SOSP 2024; columns ``stage,instruction,frequency,time,energy``, read as shipped by
:func:`~mlenergy.optimize.profile.read_profile_csv`). The paper's blocking power, the power of a
GPU waiting on communication, is 70.38 W on an A40 and 83.64 W on an A100. On the command line a
profile is named ``perseus:<name>``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from mlenergy.errors import UserError
from mlenergy.optimize.profile import PipelineProfile, read_profile_csv
from mlenergy.reference import reference_dir

PERSEUS_A40_BLOCKING_W = 70.38
"""Blocking (communication-wait) power of an A40 measured in the Perseus paper (W)."""
PERSEUS_A100_BLOCKING_W = 83.64
"""Blocking (communication-wait) power of an A100 measured in the Perseus paper (W)."""
PERSEUS_PROFILES = {
    "gpt3-175b-a40": "gpt3-175b_a40.csv",
    "bloom-176b-a40": "bloom-176b_a40.csv",
    "gpt3-175b-a100": "gpt3-175b_a100.csv",
    "bloom-176b-a100": "bloom-176b_a100.csv",
}
"""Shipped profile names and their files."""
PERSEUS_A40_PROFILES = ("gpt3-175b-a40", "bloom-176b-a40")
"""The shipped profiles measured on A40 (the estimator's training-clock checks use these)."""
PERSEUS_BLOCKING_W = {
    "gpt3-175b-a40": PERSEUS_A40_BLOCKING_W,
    "bloom-176b-a40": PERSEUS_A40_BLOCKING_W,
    "gpt3-175b-a100": PERSEUS_A100_BLOCKING_W,
    "bloom-176b-a100": PERSEUS_A100_BLOCKING_W,
}
"""The paper's blocking power of the GPU each shipped profile was measured on (W)."""
PREFIX = "perseus:"
"""How a shipped profile is named where a profile file is expected."""


def _key(name: str) -> str:
    key = name.removeprefix(PREFIX)
    if key not in PERSEUS_PROFILES:
        raise UserError(
            f"no shipped profile {name!r}",
            f"Use one of {', '.join(PREFIX + n for n in PERSEUS_PROFILES)}",
        )
    return key


def load_perseus_profile(
    name: str = "gpt3-175b-a40", reference: str | Path | None = None
) -> PipelineProfile:
    """Read one shipped profile (a key of :data:`PERSEUS_PROFILES`).

    Args:
        name: The profile's name, with or without the ``perseus:`` prefix.
        reference: A reference folder (default: the shipped one, or
            ``$MLENERGY_REFERENCE_DIR``).

    Raises:
        UserError: Unknown name, or the reference folder lacks the file.
    """
    key = _key(name)
    root = Path(reference) if reference is not None else reference_dir()
    path = root / "perseus-profiles" / PERSEUS_PROFILES[key]
    if not path.is_file():
        raise UserError(
            f"no Perseus profile {PERSEUS_PROFILES[key]} in {root / 'perseus-profiles'}",
            "Point --reference at a folder laid out like the shipped reference",
        )
    return replace(read_profile_csv(path), energy_source=f"measured:perseus-{key}")


def perseus_blocking_w(name: str) -> float:
    """The paper's blocking power for a shipped profile's GPU (W).

    Raises:
        UserError: Unknown name.
    """
    return PERSEUS_BLOCKING_W[_key(name)]


def is_perseus_name(text: str) -> bool:
    """Whether a ``--profile`` value names a shipped profile (``perseus:...``)."""
    return text.startswith(PREFIX)
