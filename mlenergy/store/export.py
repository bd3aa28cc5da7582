"""Export of the store's tables to csv, parquet or JSON Lines (written atomically)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from mlenergy.errors import StoreError, UserError
from mlenergy.store import segments as seg

if TYPE_CHECKING:
    from mlenergy.store.reader import StoreReader

FORMATS = ("csv", "parquet", "jsonl")


def export_store(
    store: StoreReader, path: str | Path, fmt: str = "csv", table: str = "runs"
) -> Path:
    """Write ``store``'s flat table (csv, parquet) or full records (jsonl) to ``path``.

    See :meth:`RunStore.export`.
    """
    if fmt not in FORMATS:
        raise UserError(f"unknown export format {fmt!r}", "use csv, parquet or jsonl")
    if table not in ("runs", "quality"):
        raise UserError(f"unknown table {table!r}", "use runs or quality")
    out = Path(path)
    if not out.parent.is_dir():
        raise UserError(f"output folder {out.parent} does not exist", "create it first")
    if fmt == "jsonl":
        records = store._records(table)
        data = "".join(r.model_dump_json() + "\n" for r in records).encode("utf-8")
    else:
        frame = store.runs_frame() if table == "runs" else store.quality_frame()
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
