"""The embedded store: append-only Parquet segments under ``<data_dir>/results``, read by DuckDB.

Layout::

    <data_dir>/results/
        runs-<utc>-<id>.parquet      one per append (or per compaction): flat run columns
                                     (see :mod:`mlenergy.store.tables`) + ``record_json``
        quality-<utc>-<id>.parquet   the same for quality results
        .lock                        the file lock every writer holds
        .journal-*.json, .tmp-*      transient files of a change in progress (see segments.py)

Every append writes new files next to the old ones and publishes them atomically under the
lock, after checking content hashes against what is already stored, so concurrent processes
neither lose nor duplicate records. Readers take no lock: reading and querying are in
:mod:`mlenergy.store.reader`, which :class:`RunStore` extends with appending and compaction.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from mlenergy.errors import StoreError, first_line
from mlenergy.records import QualityResult, RunRecord
from mlenergy.store import scan
from mlenergy.store import segments as seg
from mlenergy.store.locking import locked_folders, probe_writable
from mlenergy.store.reader import StoreReader
from mlenergy.store.tables import rebuild_table, segment_table

AUTO_COMPACT_SEGMENTS = 256
"""An append that leaves more segments than this of one kind merges the small ones."""
AUTO_COMPACT_MAX_ROWS = 20_000
"""Segments with at least this many records are left alone by the automatic compaction."""

Record = RunRecord | QualityResult
"""A record the store holds."""


@dataclass(frozen=True)
class AppendResult:
    """What an append did.

    Attributes:
        added: Records written.
        duplicates: Records skipped because the store (or the same batch) already held
            their content hash.
        added_ids: ``run_id`` / ``quality_id`` of the written records.
        duplicate_ids: Ids of the skipped records.
    """

    added: int
    duplicates: int
    added_ids: tuple[str, ...] = ()
    duplicate_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class _SegmentIndex:
    ids: tuple[str, ...]
    hashes: tuple[str, ...]


def _batches(
    records: Iterable[RunRecord | QualityResult],
) -> dict[str, list[tuple[str, str, RunRecord | QualityResult]]]:
    """``(id, content hash, record)`` of the records, by segment kind."""
    runs: list[RunRecord] = []
    quality: list[QualityResult] = []
    for rec in records:
        if isinstance(rec, RunRecord):
            runs.append(rec)
        elif isinstance(rec, QualityResult):
            quality.append(rec)
        else:
            raise TypeError(f"cannot store {type(rec).__name__}: expected RunRecord/QualityResult")
    return {
        "runs": [(r.run_id, r.content_hash(), r) for r in runs],
        "quality": [(q.quality_id, q.content_hash(), q) for q in quality],
    }


class RunStore(StoreReader):
    """Append-only store of :class:`RunRecord` and :class:`QualityResult` records.

    Args:
        data_dir: The data folder; records live in ``data_dir/results``. Nothing is created
            until the first append.
        lock_timeout_s: How long an append waits for another process's append, in seconds.

    Raises:
        StoreError: ``data_dir`` or its ``results`` folder exists but is not a folder.
    """

    def __init__(self, data_dir: str | Path, *, lock_timeout_s: float = 120.0) -> None:
        self.data_dir = Path(data_dir)
        self.results_dir = self.data_dir / "results"
        self.lock_timeout_s = lock_timeout_s
        for path in (self.data_dir, self.results_dir):
            if path.exists() and not path.is_dir():
                raise StoreError(
                    f"data directory {path} is not a folder",
                    "pass --data-dir pointing to a folder (or set MLENERGY_DATA_DIR)",
                )
        self._index: dict[str, _SegmentIndex] = {}

    def __repr__(self) -> str:
        return f"RunStore({str(self.data_dir)!r})"

    def ensure_writable(self) -> None:
        """Check, cheaply and before any long work, that an append could write the store.

        Creates the results folder if needed, writes and removes a temp file in it, then
        removes the folders it created, so nothing is left behind. Root passes permission
        checks, so this really tries instead of asking ``os.access``.

        Raises:
            StoreError: The folder cannot be created or written (names ``data_dir``).
        """
        probe_writable(self.results_dir, self.data_dir)

    # ------------------------------------------------------------------ writing

    @contextlib.contextmanager
    def _locked(self):
        """Create the results folder if needed, hold the store lock, finish crashed changes."""
        with locked_folders(
            self.results_dir / ".lock",
            [self.results_dir],
            self.data_dir,
            self.lock_timeout_s,
            "the store",
        ):
            seg.recover(self.results_dir)
            yield

    def append(self, records: Iterable[RunRecord | QualityResult]) -> AppendResult:
        """Add records atomically, skipping those whose content hash is already stored.

        Safe with several processes appending at once. Either every new record of the call
        is stored or none is (also on a crash or Ctrl-C).

        Args:
            records: Run records and/or quality results.

        Returns:
            Counts and ids of added and duplicate records.

        Raises:
            StoreError: The folder is not writable, a segment is corrupted, or a record
                reuses the id of a stored record with different content (nothing written).
        """
        batches = _batches(records)
        if not any(batches.values()):
            return AppendResult(0, 0)
        with self._locked():
            return self._append_locked(batches)

    def append_if(
        self, records: Iterable[RunRecord | QualityResult], still_wanted: Callable[[], bool]
    ) -> AppendResult | None:
        """Append only if ``still_wanted()``, asked while holding the store's lock.

        Checking and appending under one lock is what makes "store this point unless someone
        stored it meanwhile" safe between processes (two sweep drivers on one plan).

        Args:
            records: Run records and/or quality results.
            still_wanted: Reads the store (e.g. the sweep keys stored) and says whether to
                append; called with the lock held, so no other writer changes the answer.

        Returns:
            The append's result, or ``None`` when ``still_wanted()`` said no (nothing written).
        """
        batches = _batches(records)
        with self._locked():
            if not still_wanted():
                return None
            if not any(batches.values()):
                return AppendResult(0, 0)
            return self._append_locked(batches)

    def _append_locked(self, batches: dict[str, list[tuple[str, str, Record]]]) -> AppendResult:
        """The body of an append (the caller holds the lock)."""
        added_ids: list[str] = []
        dup_ids: list[str] = []
        adds: list[tuple[Path, str]] = []
        try:
            for kind, batch in batches.items():
                if not batch:
                    continue
                new = self._filter_new(kind, batch, dup_ids)
                if not new:
                    continue
                table = segment_table(kind, [r for _, _, r in new], [h for _, h, _ in new])
                tmp = seg.write_tmp_parquet(table, self.results_dir)
                name = seg.segment_name(kind)
                adds.append((tmp, name))
                self._index[name] = _SegmentIndex(
                    tuple(i for i, _, _ in new), tuple(h for _, h, _ in new)
                )
                added_ids.extend(i for i, _, _ in new)
            if adds:
                seg.commit(self.results_dir, adds)
        except BaseException as exc:
            self._abandon(adds)
            if isinstance(exc, OSError):
                raise StoreError(
                    f"cannot write to the store in {self.results_dir} ({exc.strerror or exc})",
                    "free disk space or fix the folder's permissions, then retry",
                ) from exc
            raise
        for kind in seg.KINDS:
            if len(seg.list_segments(self.results_dir, kind)) > AUTO_COMPACT_SEGMENTS:
                self._compact_locked(kind, max_rows=AUTO_COMPACT_MAX_ROWS)
        return AppendResult(len(added_ids), len(dup_ids), tuple(added_ids), tuple(dup_ids))

    def _abandon(self, adds: list[tuple[Path, str]]) -> None:
        """Clean up after a failed change: drop its temporaries unless it already committed."""
        if seg.pending_journals(self.results_dir):  # committed: the next writer finishes it
            self._index.clear()
            return
        for tmp, name in adds:
            self._index.pop(name, None)
            with contextlib.suppress(OSError):
                tmp.unlink()

    def _filter_new(
        self, kind: str, batch: list[tuple[str, str, Record]], dup_ids: list[str]
    ) -> list[tuple[str, str, Record]]:
        """Drop records already stored (by hash); refuse id reuse with different content."""
        id_to_hash = self._stored_ids(kind)
        hashes = set(id_to_hash.values())
        new: list[tuple[str, str, Record]] = []
        for rid, h, rec in batch:
            if h in hashes:
                dup_ids.append(rid)
                continue
            if rid in id_to_hash:
                raise StoreError(
                    f"{scan.KIND_ID[kind]} {rid} is already in the store with different content",
                    "give the new record a fresh id (or keep the stored one)",
                )
            hashes.add(h)
            id_to_hash[rid] = h
            new.append((rid, h, rec))
        return new

    def _stored_ids(self, kind: str) -> dict[str, str]:
        """Map id -> content hash of every stored record of ``kind`` (index cached per segment)."""
        out: dict[str, str] = {}
        paths = seg.list_segments(self.results_dir, kind)
        live = {p.name for p in paths}
        for name in [n for n in self._index if n.startswith(f"{kind}-") and n not in live]:
            del self._index[name]  # merged away by a compaction
        for path in paths:
            idx = self._index.get(path.name)
            if idx is None:
                try:
                    table = pq.read_table(path, columns=[scan.KIND_ID[kind], "content_hash"])
                except FileNotFoundError:
                    raise  # compacted away meanwhile (only without the lock): callers retry
                except (OSError, pa.ArrowException) as exc:
                    raise scan.corrupted(path, str(exc).splitlines()[0]) from exc
                idx = _SegmentIndex(
                    tuple(table.column(0).to_pylist()), tuple(table.column(1).to_pylist())
                )
                self._index[path.name] = idx
            out.update(zip(idx.ids, idx.hashes, strict=True))
        return out

    def run_hashes(self) -> dict[str, str]:
        """Return ``run_id -> content hash`` of every stored run."""
        return self._retry(lambda: dict(self._stored_ids("runs")))

    def quality_hashes(self) -> dict[str, str]:
        """Return ``quality_id -> content hash`` of every stored quality result."""
        return self._retry(lambda: dict(self._stored_ids("quality")))

    def content_hashes(self) -> set[str]:
        """Return the content hashes of every stored record (runs and quality)."""
        hashes: set[str] = set()
        for kind in seg.KINDS:
            hashes.update(self._retry(functools.partial(self._stored_ids, kind)).values())
        return hashes

    def compact(self, *, rebuild: bool = False) -> int:
        """Merge all segments of each kind into one, atomically.

        Args:
            rebuild: Also recompute every flat column from the stored record JSON (after the
                flat columns changed); slower, about 0.3 ms per record.

        Returns:
            How many segment files were merged away.
        """
        if not self.results_dir.exists():
            return 0
        with self._locked():
            return sum(self._compact_locked(kind, rebuild=rebuild) for kind in seg.KINDS)

    def _compact_locked(
        self, kind: str, *, rebuild: bool = False, max_rows: int | None = None
    ) -> int:
        """Merge segments of ``kind`` (only those under ``max_rows`` records, if given)."""
        paths = seg.list_segments(self.results_dir, kind)
        if max_rows is not None:
            self._stored_ids(kind)  # fills the per-segment index
            paths = [p for p in paths if len(self._index[p.name].ids) < max_rows]
        if len(paths) <= (0 if rebuild else 1):
            return 0
        schema = scan.KIND_SCHEMA[kind]
        tables = []
        for path in paths:
            try:
                table = pq.read_table(path)
            except (OSError, pa.ArrowException) as exc:
                raise scan.corrupted(path, first_line(exc)) from exc
            for field in schema:  # columns added to the schema since this segment was written
                if field.name not in table.column_names:
                    table = table.append_column(field, pa.nulls(table.num_rows, field.type))
            try:
                tables.append(table.select(schema.names).cast(schema))
            except (pa.ArrowException, KeyError) as exc:
                raise scan.corrupted(path, first_line(exc)) from exc
        merged = pa.concat_tables(tables)
        # Keep the first copy of each content hash (duplicates only come from outside damage).
        hashes = merged.column("content_hash").to_pylist()
        seen: set[str] = set()
        keep = []
        for h in hashes:
            keep.append(h not in seen)
            seen.add(h)
        merged = merged.filter(pa.array(keep, pa.bool_()))
        if rebuild:
            merged = rebuild_table(kind, merged)
        merged = merged.sort_by([("created_at", "ascending"), (scan.KIND_ID[kind], "ascending")])
        tmp = seg.write_tmp_parquet(merged, self.results_dir)
        name = seg.segment_name(kind)
        try:
            seg.commit(self.results_dir, [(tmp, name)], [p.name for p in paths])
        except BaseException:
            self._abandon([(tmp, name)])
            raise
        for p in paths:
            self._index.pop(p.name, None)
        ids = merged.column(scan.KIND_ID[kind]).to_pylist()
        self._index[name] = _SegmentIndex(
            tuple(ids), tuple(merged.column("content_hash").to_pylist())
        )
        return len(paths)
