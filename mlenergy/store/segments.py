"""Crash-safe file operations of the store: segment names, atomic commits, recovery.

The store is a folder of immutable Parquet *segments*. A change (an append, a compaction) is
written to hidden temporary files first, flushed to disk, and then published by renaming. A
change that touches several files is described first in a small *journal* file, written
atomically; the journal is the commit point, and whoever next holds the store lock rolls it
forward. So a crash or Ctrl-C leaves either the old state or the new one, never a mix:

* before the journal exists, only hidden ``.tmp-*`` files exist; they are deleted later;
* after it, the change is completed by :func:`recover`.

All functions here expect the caller to hold the store's file lock unless stated otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

import pyarrow as pa
import pyarrow.parquet as pq

from mlenergy.errors import StoreError

SEGMENT_SUFFIX = ".parquet"
TMP_PREFIX = ".tmp-"
JOURNAL_PREFIX = ".journal-"
KINDS = ("runs", "quality")
ROW_GROUP_ROWS = 4096
"""Rows per Parquet row group: small enough that fetching one record decodes little JSON."""


def segment_name(kind: str) -> str:
    """Return a fresh, unique segment file name, e.g. ``runs-20260101T120000123456Z-ab12.parquet``.

    Args:
        kind: ``runs`` or ``quality``.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown segment kind {kind!r}")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{kind}-{stamp}-{uuid.uuid4().hex[:12]}{SEGMENT_SUFFIX}"


def list_segments(results_dir: Path, kind: str) -> list[Path]:
    """Return the published segments of ``kind`` in ``results_dir``, sorted by name.

    Hidden files (temporary files, journals, the lock) are never segments. Safe without the
    lock: a listed segment may vanish if a compaction commits meanwhile (callers retry).
    """
    try:
        names = os.listdir(results_dir)
    except FileNotFoundError:
        return []
    prefix = f"{kind}-"
    ext = SEGMENT_SUFFIX
    return [results_dir / n for n in sorted(names) if n.startswith(prefix) and n.endswith(ext)]


def fsync_dir(path: Path) -> None:
    """Flush a directory entry table to disk (makes renames durable; no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_tmp_parquet(table: pa.Table, directory: Path) -> Path:
    """Write ``table`` to a hidden temporary Parquet file in ``directory`` and fsync it.

    Returns:
        The temporary path; publish it with :func:`commit`.
    """
    tmp = directory / f"{TMP_PREFIX}{uuid.uuid4().hex}{SEGMENT_SUFFIX}"
    try:
        with open(tmp, "wb") as fh:
            pq.write_table(table, fh, compression="zstd", row_group_size=ROW_GROUP_ROWS)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return tmp


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, fsync, rename)."""
    tmp = path.parent / f"{TMP_PREFIX}{uuid.uuid4().hex}.part"
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold back Ctrl-C (SIGINT) during a short critical section, then deliver it.

    Only effective in the main thread (elsewhere Python delivers no signals anyway).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[tuple[int, FrameType | None]] = []

    def _handler(signum: int, frame: FrameType | None) -> None:
        received.append((signum, frame))

    try:
        previous = signal.signal(signal.SIGINT, _handler)
    except (ValueError, OSError):  # not allowed here (e.g. embedded interpreter)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received and callable(previous):
            previous(*received[0])
        elif received and previous != signal.SIG_IGN:
            raise KeyboardInterrupt


def commit(results_dir: Path, adds: list[tuple[Path, str]], removes: Sequence[str] = ()) -> None:
    """Publish temporary files and delete replaced segments as one atomic change.

    Args:
        results_dir: The store's results folder.
        adds: ``(temporary path, final segment name)`` pairs, temporaries in ``results_dir``.
        removes: Segment names (in ``results_dir``) that the change replaces.
    """
    with deferred_interrupts():
        if len(adds) == 1 and not removes:  # a single rename is atomic by itself
            tmp, final = adds[0]
            os.replace(tmp, results_dir / final)
            fsync_dir(results_dir)
            return
        journal = results_dir / f"{JOURNAL_PREFIX}{uuid.uuid4().hex}.json"
        payload = {"adds": [[tmp.name, final] for tmp, final in adds], "removes": list(removes)}
        write_bytes_atomic(journal, json.dumps(payload).encode("utf-8"))  # commit point
        _apply_journal(results_dir, journal, payload)


def _apply_journal(results_dir: Path, journal: Path, payload: dict) -> None:
    for tmp_name, final in payload["adds"]:
        tmp = results_dir / tmp_name
        if tmp.exists():
            os.replace(tmp, results_dir / final)
    fsync_dir(results_dir)
    for name in payload["removes"]:
        with contextlib.suppress(FileNotFoundError):
            (results_dir / name).unlink()
    fsync_dir(results_dir)
    journal.unlink()
    fsync_dir(results_dir)


def pending_journals(results_dir: Path) -> list[Path]:
    """Return journals of changes that committed but did not finish (safe without the lock)."""
    try:
        names = os.listdir(results_dir)
    except FileNotFoundError:
        return []
    return [
        results_dir / n
        for n in sorted(names)
        if n.startswith(JOURNAL_PREFIX) and n.endswith(".json")
    ]


def recover(results_dir: Path) -> int:
    """Finish committed changes and delete leftovers of interrupted ones (needs the lock).

    Returns:
        How many journals were rolled forward.
    """
    rolled = 0
    with deferred_interrupts():
        for journal in pending_journals(results_dir):
            try:
                payload = json.loads(journal.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:  # written atomically, so this is outside damage
                raise StoreError(
                    f"store journal {journal} is unreadable ({exc})",
                    "move it out of the results folder and check the newest segments",
                ) from exc
            _apply_journal(results_dir, journal, payload)
            rolled += 1
        # With the lock held and no journal left, every temporary file is an orphan.
        for name in os.listdir(results_dir):
            if name.startswith(TMP_PREFIX):
                with contextlib.suppress(OSError):
                    (results_dir / name).unlink()
    return rolled
