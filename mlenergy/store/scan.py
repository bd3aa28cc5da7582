"""Reading the segments: DuckDB views, fetching record JSON by row, damage diagnostics."""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from mlenergy.errors import StoreError, first_line
from mlenergy.records import QualityResult, RunRecord
from mlenergy.store import segments as seg
from mlenergy.store.tables import (
    QUALITY_COLUMNS,
    QUALITY_SCHEMA,
    RECORD_JSON,
    RUN_COLUMNS,
    RUN_SCHEMA,
)

if TYPE_CHECKING:
    import duckdb

KIND_ID = {"runs": "run_id", "quality": "quality_id"}
"""Id column of each segment kind."""
KIND_SCHEMA = {"runs": RUN_SCHEMA, "quality": QUALITY_SCHEMA}
"""Arrow schema of each segment kind."""
KIND_COLUMNS = {"runs": RUN_COLUMNS, "quality": QUALITY_COLUMNS}
"""Flat columns of each segment kind."""


def sql_str(text: str) -> str:
    """Quote ``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def corrupted(path: Path, reason: str) -> StoreError:
    """The error for a damaged store file: names it and says how to fix it."""
    reason = reason.replace(f"Could not open Parquet input source '{path}': ", "")
    return StoreError(
        f"store file {path} is corrupted or unreadable ({reason})",
        f"move it out of {path.parent} (or restore it from a backup), then retry",
    )


def connect(results_dir: Path) -> duckdb.DuckDBPyConnection:
    """Open an in-memory DuckDB over the segments: views ``runs`` and ``quality`` (flat).

    The ``_*_all`` views add ``record_json``, ``filename`` and ``file_row_number``.
    """
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone='UTC'")
    # Duplicates across segments exist only while a crashed compaction awaits recovery.
    dedupe = bool(seg.pending_journals(results_dir))
    for kind in seg.KINDS:
        view = "runs" if kind == "runs" else "quality"
        cols = ", ".join(f'"{c}"' for c in KIND_COLUMNS[kind])
        paths = seg.list_segments(results_dir, kind)
        # A typed empty table fixes every column's type, and UNION BY NAME gives columns
        # that older segments lack (schema growth) as NULL.
        empty = (
            KIND_SCHEMA[kind]
            .empty_table()
            .append_column("filename", pa.array([], pa.string()))
            .append_column("file_row_number", pa.array([], pa.int64()))
        )
        con.register(f"_empty_{kind}", empty)
        source = f"_empty_{kind}"
        if paths:
            files = "[" + ", ".join(sql_str(str(p)) for p in paths) + "]"
            scan = f"read_parquet({files}, union_by_name=true, filename=true, file_row_number=true)"
            source = f"(SELECT * FROM _empty_{kind} UNION ALL BY NAME SELECT * FROM {scan})"
            if dedupe and len(paths) > 1:
                source = (
                    f"(SELECT * FROM {source} QUALIFY row_number() OVER "
                    f"(PARTITION BY content_hash ORDER BY filename) = 1)"
                )
        con.execute(f"CREATE VIEW _{view}_all AS SELECT * FROM {source}")
        con.execute(f"CREATE VIEW {view} AS SELECT {cols} FROM _{view}_all")
    return con


def diagnose(results_dir: Path, *, records: bool = False) -> int:
    """Read every segment fully and check its key columns; return the number of records.

    While a compaction has committed but not finished (a journal is pending), the old
    segments and the merged one both exist: records are then counted once per content hash,
    as the readers see them.

    Args:
        results_dir: The store's results folder.
        records: Also parse every stored record (``runs check``): a record that fails its
            schema (e.g. a NaN written as ``null`` by an older version) names its segment.

    Raises:
        StoreError: Naming the first damaged file and how to fix it.
    """
    dedupe = bool(seg.pending_journals(results_dir))
    total = 0
    hashes: dict[str, set[str]] = {kind: set() for kind in seg.KINDS}
    for kind in seg.KINDS:
        for path in seg.list_segments(results_dir, kind):
            try:
                table = pq.read_table(path)
            except FileNotFoundError:
                continue
            except (OSError, pa.ArrowException) as exc:
                raise corrupted(path, first_line(exc)) from exc
            missing = {KIND_ID[kind], "content_hash", RECORD_JSON} - set(table.column_names)
            if missing:
                raise corrupted(path, f"missing columns {sorted(missing)}")
            if records:
                _check_records(path, kind, table)
            if dedupe:
                hashes[kind].update(table.column("content_hash").to_pylist())
            else:
                total += table.num_rows
    return total + sum(len(h) for h in hashes.values())


def _check_records(path: Path, kind: str, table: pa.Table) -> None:
    """Parse every record of a segment; the first that fails names the segment and the id."""
    model = RunRecord if kind == "runs" else QualityResult
    ids = table.column(KIND_ID[kind]).to_pylist()
    for rid, text in zip(ids, table.column(RECORD_JSON).to_pylist(), strict=True):
        try:
            model.model_validate_json(text or "")
        except (ValidationError, ValueError) as exc:
            if isinstance(exc, ValidationError) and exc.error_count():
                err = exc.errors(include_url=False, include_input=False)[0]
                why = f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
            else:
                why = first_line(exc, 200)
            raise corrupted(path, f"record {str(rid)[:64]} fails its schema: {why}") from exc


def read_json_rows(path: Path, rows: list[int]) -> dict[tuple[str, int], str]:
    """Read ``record_json`` of the given rows of one segment, decoding only their row groups."""
    try:
        pf = pq.ParquetFile(path)
        starts = []
        total = 0
        for i in range(pf.num_row_groups):
            starts.append(total)
            total += pf.metadata.row_group(i).num_rows
        by_group: dict[int, list[int]] = {}
        for row in rows:
            group = bisect.bisect_right(starts, row) - 1
            by_group.setdefault(group, []).append(row)
        out: dict[tuple[str, int], str] = {}
        for group, group_rows in by_group.items():
            column = pf.read_row_group(group, columns=[RECORD_JSON]).column(0)
            for row in group_rows:
                out[(str(path), row)] = column[row - starts[group]].as_py()
        return out
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException, IndexError, KeyError) as exc:
        raise corrupted(path, first_line(exc)) from exc


def is_duckdb(exc: BaseException) -> bool:
    """Whether ``exc`` comes from DuckDB."""
    return "duckdb" in type(exc).__module__


def is_read_error(exc: BaseException) -> bool:
    """Whether ``exc`` means a file could not be read (rather than bad SQL)."""
    if isinstance(exc, OSError | pa.ArrowException):
        return True
    name = type(exc).__name__
    return is_duckdb(exc) and name in {
        "IOException",
        "InvalidInputException",
        "SerializationException",
        "InternalException",
        "HTTPException",
    }
