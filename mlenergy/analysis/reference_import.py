"""Import the ML.ENERGY Leaderboard's published measurements into a store.

The records come from the one reader of the reference tables,
:func:`mlenergy.reference.runs.read_reference` (see there what each record says and what
it labels as unknown); this module only appends them to a :class:`~mlenergy.store.RunStore`.
"""

from __future__ import annotations

from pathlib import Path

from mlenergy.reference import reference_dir as default_reference_dir
from mlenergy.reference.runs import read_reference
from mlenergy.store import RunStore

__all__ = ["default_reference_dir", "import_reference", "read_reference"]


def import_reference(reference_dir: Path | None, data_dir: Path) -> tuple[int, int]:
    """Append the reference records to the store at ``data_dir``.

    Args:
        reference_dir: The reference folder (``None``: ``$MLENERGY_REFERENCE_DIR``, else
            the one shipped in ``mlenergy/reference/``).
        data_dir: The store folder.

    Returns:
        ``(added, duplicates)``.

    Raises:
        UserError: No reference folder, or no leaderboard table in it.
    """
    records = read_reference(reference_dir)
    result = RunStore(data_dir).append(records)
    return result.added, result.duplicates
