"""Reading the store: DuckDB queries over the Parquet segments, parsed records, export.

:class:`StoreReader` takes no lock: a read that meets a segment list changed under it (a
compaction by another process) runs again. :class:`mlenergy.store.store.RunStore` adds
appending and compaction; the layout is described there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import ValidationError

from mlenergy.errors import StoreError, UserError, first_line
from mlenergy.records import QualityResult, RunRecord
from mlenergy.store import scan
from mlenergy.store import segments as seg

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

_T = TypeVar("_T")
EXPORT_FORMATS = ("csv", "parquet", "jsonl")
"""Formats of :meth:`StoreReader.export`."""
_READ_RETRIES = 4


class StoreReader:
    """The reading half of :class:`~mlenergy.store.store.RunStore` (which sets its folders).

    Attributes:
        data_dir: The data folder.
        results_dir: ``data_dir/results``, where the segments are.
    """

    data_dir: Path
    results_dir: Path

    # ------------------------------------------------------------------ reading

    def _retry(self, fn: Callable[[], _T]) -> _T:
        """Run a read; if the segment list changed under it (a compaction), run it again."""
        for attempt in range(_READ_RETRIES):
            before = self._listing()
            try:
                return fn()
            except StoreError:
                if attempt + 1 < _READ_RETRIES and self._listing() != before:
                    continue
                raise
            except Exception as exc:
                if attempt + 1 < _READ_RETRIES and self._listing() != before:
                    continue
                if not scan.is_read_error(exc):
                    raise
                scan.diagnose(self.results_dir)
                raise StoreError(
                    f"the store in {self.results_dir} could not be read ({first_line(exc)})",
                    "run `mlenergy runs check` to find the damaged file",
                ) from exc
        raise AssertionError("unreachable")

    def _listing(self) -> tuple[str, ...]:
        return tuple(p.name for k in seg.KINDS for p in seg.list_segments(self.results_dir, k))

    def check(self, *, records: bool = False) -> int:
        """Read every segment fully and check its columns; return the number of records.

        Args:
            records: Also parse every stored record against its schema (about 0.3 ms each).

        Raises:
            StoreError: Naming the first damaged file (and record) and how to fix it.
        """
        return scan.diagnose(self.results_dir, records=records)

    def _connect(self) -> duckdb.DuckDBPyConnection:
        return scan.connect(self.results_dir)

    def query(self, sql: str, params: list | None = None) -> pd.DataFrame:
        """Run DuckDB SQL over the views ``runs`` and ``quality`` (flat columns).

        Integer columns holding missing values come back as float64 with NaN.

        Args:
            sql: The query, e.g. ``"SELECT model_id, avg(decode_energy_per_token_j) FROM runs
                GROUP BY 1"``.
            params: Values for ``?`` placeholders.

        Raises:
            UserError: The SQL is invalid.
            StoreError: A store file is damaged.
        """
        return self._query_arrow(sql, params).to_pandas()

    def _query_arrow(self, sql: str, params: list | None = None) -> pa.Table:
        def _run() -> pa.Table:
            con = self._connect()
            try:
                return con.sql(sql, params=params or None).to_arrow_table()
            finally:
                con.close()

        try:
            return self._retry(_run)
        except StoreError:
            raise
        except Exception as exc:
            if scan.is_duckdb(exc) and not scan.is_read_error(exc):
                raise UserError(f"query failed: {first_line(exc)}", "fix the SQL") from exc
            raise

    def runs_frame(self) -> pd.DataFrame:
        """Return one row per run with the flat columns, oldest first."""
        return self.query("SELECT * FROM runs ORDER BY created_at, run_id")

    def quality_frame(self) -> pd.DataFrame:
        """Return one row per quality result with the flat columns, oldest first."""
        return self.query("SELECT * FROM quality ORDER BY created_at, quality_id")

    def _records(self, kind: str, where: str = "", params: list | None = None) -> list:
        """Parse the records matching ``where``, oldest first.

        Finds matching rows on the small columns first, then decodes ``record_json`` only
        from the row groups that hold them.
        """
        model = RunRecord if kind == "runs" else QualityResult
        view = "_runs_all" if kind == "runs" else "_quality_all"
        order = scan.KIND_ID[kind]
        sql = f"SELECT filename, file_row_number FROM {view} {where} ORDER BY created_at, {order}"

        def _run() -> list[tuple[str, str]]:
            hits = self._query_arrow(sql, params)
            wanted: dict[str, list[int]] = {}
            for name, row in zip(
                hits.column(0).to_pylist(), hits.column(1).to_pylist(), strict=True
            ):
                wanted.setdefault(name, []).append(row)
            texts: dict[tuple[str, int], str] = {}
            for name, rows in wanted.items():
                texts.update(scan.read_json_rows(Path(name), rows))
            return [
                (texts[(n, r)], n)
                for n, r in zip(hits.column(0).to_pylist(), hits.column(1).to_pylist(), strict=True)
            ]

        out = []
        for text, filename in self._retry(_run):
            try:
                out.append(model.model_validate_json(text))
            except ValidationError as exc:
                raise scan.corrupted(
                    Path(filename), f"a stored record fails validation: {first_line(exc)}"
                ) from exc
        return out

    def runs(self) -> list[RunRecord]:
        """Return every stored run, oldest first.

        Parses every record (about 0.3 ms each): use :meth:`runs_frame` for large stores.
        """
        return self._records("runs")

    def quality(self) -> list[QualityResult]:
        """Return every stored quality result, oldest first."""
        return self._records("quality")

    def get(self, run_id: str) -> RunRecord:
        """Return the run with ``run_id``.

        Raises:
            UserError: No such run.
        """
        found = self._records("runs", "WHERE run_id = ?", [run_id])
        if not found:
            raise UserError(
                f"no run {run_id!r} in the store at {self.data_dir}",
                "list the stored runs with `mlenergy runs list`",
            )
        return found[0]

    def count(self) -> int:
        """Return the number of stored runs (no ``__len__``: an empty store stays truthy)."""
        return int(self.query("SELECT count(*) AS n FROM runs")["n"].iloc[0])

    # ------------------------------------------------------------------ export

    def export(
        self,
        path: str | Path,
        fmt: Literal["csv", "parquet", "jsonl"] = "csv",
        table: Literal["runs", "quality"] = "runs",
    ) -> Path:
        """Write the flat table (csv, parquet) or full records (jsonl) to ``path`` atomically.

        Args:
            path: Output file; its folder must exist.
            fmt: ``csv``, ``parquet`` (flat columns) or ``jsonl`` (one full record per line).
            table: ``runs`` or ``quality``.

        Returns:
            The written path.
        """
        if fmt not in EXPORT_FORMATS:
            raise UserError(f"unknown export format {fmt!r}", "use csv, parquet or jsonl")
        if table not in ("runs", "quality"):
            raise UserError(f"unknown table {table!r}", "use runs or quality")
        out = Path(path)
        if not out.parent.is_dir():
            raise UserError(f"output folder {out.parent} does not exist", "create it first")
        if fmt == "jsonl":
            records = self._records(table)
            data = "".join(r.model_dump_json() + "\n" for r in records).encode("utf-8")
        else:
            frame = self.runs_frame() if table == "runs" else self.quality_frame()
            if fmt == "csv":
                data = frame.to_csv(index=False).encode("utf-8")
            else:
                sink = pa.BufferOutputStream()
                pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sink)
                data = sink.getvalue().to_pybytes()
        try:
            seg.write_bytes_atomic(out, data)
        except OSError as exc:
            raise StoreError(
                f"cannot write {out} ({exc.strerror or exc})", "choose a writable --out path"
            ) from exc
        return out
