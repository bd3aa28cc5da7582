"""One check, before any long work, that a command will be able to store what it produces.

Every command that measures and then appends (``bench``, ``quality``, the studies) calls
:func:`open_store_for_append` first: an unwritable ``--data-dir`` or a damaged store file must
fail in a second, not after an hour of measurement. :func:`check_output_folder` does the same
for any other folder a command writes into (e.g. a report folder).
"""

from __future__ import annotations

from pathlib import Path

from mlenergy.errors import UserError
from mlenergy.store.locking import probe_writable
from mlenergy.store.store import RunStore


def open_store_for_append(data_dir: str | Path) -> RunStore:
    """Open the run store and prove that an append would succeed; create nothing.

    The folder (or the one it would be created in) is really written to, since root passes
    permission checks on folders it cannot write, and every stored file is read fully.

    Args:
        data_dir: The store folder (``--data-dir``).

    Returns:
        The store, ready for :meth:`RunStore.append`.

    Raises:
        StoreError: The folder is a file, cannot be created or written, or a store file is
            damaged (named).
    """
    store = RunStore(data_dir)
    store.ensure_writable()
    if store.results_dir.is_dir():
        store.check()
    return store


def check_output_folder(folder: str | Path, *, what: str, option: str) -> None:
    """Prove that ``folder`` can be created and written; leave nothing behind.

    Args:
        folder: The folder a command will write into.
        what: What the folder is, for the message (e.g. ``"report directory"``).
        option: The option that sets it, for the fix (e.g. ``"--report-dir"``).

    Raises:
        UserError: The folder cannot be created or written.
    """
    path = Path(folder)
    probe_writable(path, path, what=what, option=option, error=UserError)
