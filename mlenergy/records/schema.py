"""Export the records' JSON Schemas (what submitters validate against)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from mlenergy.records.quality import QualityResult
from mlenergy.records.run import RunRecord
from mlenergy.records.submission import Submission


def schemas() -> dict[str, dict]:
    """Return the JSON Schema of each top-level record, keyed by file stem."""
    return {
        "run_record": RunRecord.model_json_schema(),
        "quality_result": QualityResult.model_json_schema(),
        "submission": Submission.model_json_schema(),
    }


def export_schemas(out_dir: str | Path) -> list[Path]:
    """Write ``<name>.schema.json`` for every record into ``out_dir`` (atomically per file).

    Args:
        out_dir: Destination folder, created if missing (``data/schema`` in the repo).

    Returns:
        The written paths.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in schemas().items():
        path = out / f"{name}.schema.json"
        text = json.dumps(schema, indent=2, sort_keys=True) + "\n"
        fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; the schema is meant to be read by anyone
        os.replace(tmp, path)
        written.append(path)
    return written
