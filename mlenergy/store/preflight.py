"""One check, before any long work, that a command will be able to store what it produces.

Every command that measures and then appends (``bench``, ``quality``, the studies) calls
:func:`open_store_for_append` first: an unwritable ``--data-dir``, a full disk or a damaged store
file must fail in a second, not after an hour of measurement. :func:`ensure_room` is the room
check on its own (it really writes the bytes, since a 0-byte probe passes on a full disk).
:func:`check_output_folder` proves any other folder a command writes into (a report folder).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from pathlib import Path

from mlenergy.errors import StoreError, UserError
from mlenergy.store.locking import probe_writable
from mlenergy.store.store import RunStore

APPEND_ROOM_BYTES = 16 * 1024 * 1024
"""Room an append needs at least, in bytes: a new segment plus an automatic compaction's
merged copy of the small segments (16 MiB covers thousands of records)."""
PROBE_CHUNK_BYTES = 1024 * 1024
"""The room probe writes this much at a time."""


def ensure_room(folder: str | Path, needed_bytes: int = APPEND_ROOM_BYTES) -> None:
    """Prove that ``needed_bytes`` can be written in ``folder`` now; leave nothing behind.

    Asks the file system for its free space, then really writes (and fsyncs) a probe file of
    ``needed_bytes`` and removes it: a 0-byte probe passes on a full disk, and free space can
    be reserved for root or cut by a quota. The folder must exist.

    Args:
        folder: Where the data will be written (e.g. ``data_dir/results``).
        needed_bytes: How many bytes the coming write needs.

    Raises:
        StoreError: Not enough room (the message says how much is free), or the folder cannot
            be written (read-only, full).
    """
    path = Path(folder)
    free = shutil.disk_usage(path).free
    if free < needed_bytes:
        raise StoreError(
            f"only {free / 1e6:.1f} MB free in {path}, a result needs {needed_bytes / 1e6:.0f} MB",
            "free disk space (or pass --data-dir on another disk), then retry",
        )
    probe = path / f".tmp-room-{uuid.uuid4().hex}"
    chunk = b"\0" * min(PROBE_CHUNK_BYTES, needed_bytes)
    try:
        with open(probe, "wb") as fh:
            left = needed_bytes
            while left > 0:
                fh.write(chunk[:left])
                left -= len(chunk)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise StoreError(
            f"cannot write {needed_bytes / 1e6:.0f} MB in {path} ({exc.strerror or exc})",
            "free disk space or make the folder writable, then retry",
        ) from exc
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


def open_store_for_append(data_dir: str | Path) -> RunStore:
    """Open the run store and prove that an append would succeed; create nothing.

    The folder (or the one it would be created in) is really written to, since root passes
    permission checks on folders it cannot write, and every stored file is read fully.

    Args:
        data_dir: The store folder (``--data-dir``).

    Returns:
        The store, ready for :meth:`RunStore.append`.

    Raises:
        StoreError: The folder is a file, cannot be created or written, has no room for an
            append (:func:`ensure_room`), or a store file is damaged (named).
    """
    store = RunStore(data_dir)
    store.ensure_writable()
    if store.results_dir.is_dir():
        store.check()
    ensure_room(_existing(store.results_dir))
    return store


def _existing(folder: Path) -> Path:
    """``folder`` or its nearest existing parent (the disk a new folder would be on)."""
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    return folder


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
