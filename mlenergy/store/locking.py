"""The inter-process lock that serialises every change to the store and the submission queue."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import filelock

from mlenergy.errors import StoreError, UserError


@contextlib.contextmanager
def locked_folders(
    lock_path: Path, folders: Iterable[Path], data_dir: Path, timeout_s: float, what: str
) -> Iterator[None]:
    """Create ``folders`` if needed and hold the file lock at ``lock_path`` for the block.

    Args:
        lock_path: The lock file (created beside the data it protects).
        folders: Folders to create before locking (the lock file lives in one of them).
        data_dir: The user's ``--data-dir``, named in error messages.
        timeout_s: How long to wait for another process holding the lock, in seconds.
        what: What is locked, for messages (e.g. ``"the store"``).

    Raises:
        StoreError: The folder cannot be written, the lock stayed taken for ``timeout_s``, or
            the block failed to write (an ``OSError``: disk full, read-only file system).
    """
    try:
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(str(lock_path), timeout=timeout_s)
        lock.acquire()
    except filelock.Timeout as exc:
        raise StoreError(
            f"{what} in {data_dir} stayed locked for {timeout_s:.0f} s",
            "wait for the other mlenergy process to finish, then retry",
        ) from exc
    except OSError as exc:
        raise _not_writable("data directory", data_dir, "--data-dir", exc) from exc
    try:
        yield
    except OSError as exc:  # disk full, read-only file system, ... while changing the data
        raise StoreError(
            f"cannot write to {what} in {data_dir} ({exc.strerror or exc})",
            "free disk space or make the folder writable, then retry (nothing was half-written)",
        ) from exc
    finally:
        lock.release()


def _not_writable(
    what: str, named: Path, option: str, exc: OSError, error: type[UserError] = StoreError
) -> UserError:
    """The one-line error for a folder the user named that cannot be written."""
    return error(
        f"{what} {named} is not writable ({exc.strerror or exc})",
        f"pass {option} pointing to a folder you can write (or fix its permissions)",
    )


def probe_writable(
    folder: Path,
    named: Path,
    *,
    what: str = "data directory",
    option: str = "--data-dir",
    error: type[UserError] = StoreError,
) -> None:
    """Create ``folder``, write and remove a temp file in it, remove the folders it created.

    A real write, because root passes ``os.access`` checks on folders it cannot write (e.g.
    under ``/proc``). Leaves nothing behind.

    Args:
        folder: The folder a later write needs (e.g. ``data_dir/results``).
        named: The folder the user named (e.g. ``--data-dir``), shown in the error message.
        what: What that folder is, for the message.
        option: The command-line option that sets it, for the fix.
        error: The error class raised.

    Raises:
        StoreError: (or ``error``) The folder cannot be created or written.
    """
    created: list[Path] = []
    probe = folder
    while not probe.exists() and probe.parent != probe:
        created.append(probe)
        probe = probe.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".tmp-probe-{uuid.uuid4().hex}"
        tmp.write_bytes(b"")
        tmp.unlink()
    except OSError as exc:
        raise _not_writable(what, named, option, exc, error) from exc
    finally:
        for made in created:  # innermost first
            with contextlib.suppress(OSError):
                made.rmdir()
