"""Where the shared reference data lives (never copied into the repository).

The reference folder sits next to the repository root (``../shared/reference``) unless
``$MLENERGY_REFERENCE_DIR`` names another; it holds ``mlenergy-leaderboard/`` (measurements)
and ``model-configs/`` (``<org>__<name>.json`` configs of the measured models).
"""

from __future__ import annotations

import os
from pathlib import Path

REFERENCE_ENV = "MLENERGY_REFERENCE_DIR"


def reference_dir() -> Path | None:
    """The reference folder: ``$MLENERGY_REFERENCE_DIR``, else ``../shared/reference``.

    Returns:
        The folder, or ``None`` when it is missing (tests then skip with a reason).
    """
    env = os.environ.get(REFERENCE_ENV)
    if env:
        p = Path(env).expanduser()
        return p if p.is_dir() else None
    repo_root = Path(__file__).resolve().parents[2]
    for candidate in (
        repo_root.parent / "shared" / "reference",
        Path.cwd().parent / "shared" / "reference",
    ):
        if candidate.is_dir():
            return candidate.resolve()
    return None


def default_configs_dir() -> Path | None:
    """``<reference>/model-configs`` when the reference data is present, else ``None``."""
    ref = reference_dir()
    return ref / "model-configs" if ref is not None else None


def configs_next_to(reference: Path | None, configs_dir: Path | None) -> Path | None:
    """Model configs next to a given reference folder, unless ``configs_dir`` says otherwise.

    Args:
        reference: A reference folder given by the user (or ``None``).
        configs_dir: A configs folder given by the user (wins when given).
    """
    if configs_dir is not None or reference is None:
        return configs_dir
    for candidate in (reference / "model-configs", reference.parent / "model-configs"):
        if candidate.is_dir():
            return candidate
    return None
