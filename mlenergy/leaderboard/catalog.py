"""What is on the board: its models, and the reference data that ships with mlenergy.

The answers of the ``models`` and ``reference`` API functions (see :mod:`.api`), as JSON data.
They name no server folder: shipped files are named by their path inside the reference folder.
"""

from __future__ import annotations

import hashlib

import pandas as pd

from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.estimate_tab import estimator_choices
from mlenergy.reference import reference_dir, shipped_files, sources


def _ordered_sources(values: pd.Series) -> list[str]:
    """Energy-source classes present, in the filter's order."""
    present = set(values.dropna())
    return [c for c in lb.SOURCE_CLASSES if c in present]


def models_answer(ctx: AppContext) -> dict:
    """Every model on the board and the reference model ids the estimator takes.

    Returns:
        ``models``: one object per model id (sorted): ``runs`` (count), ``tasks``,
        ``hardware``, ``sources`` (energy-source classes, e.g. ``measured-gpu``) and ``layers``
        (``reference`` and/or ``store``); ``estimator_models``: the ids ``/estimate`` takes.
    """
    frame = ctx.frame(None)
    out = []
    if not frame.empty:
        for model_id, rows in frame.groupby("model_id", sort=True):
            out.append(
                {
                    "model_id": str(model_id),
                    "runs": len(rows),
                    "tasks": sorted(rows["task"].dropna().unique().tolist()),
                    "hardware": sorted(rows["hardware"].dropna().unique().tolist()),
                    "sources": _ordered_sources(rows.get("source_class", pd.Series(dtype=str))),
                    "layers": sorted(rows.get("layer", pd.Series(dtype=str)).dropna().unique()),
                }
            )
    return {"models": out, "estimator_models": estimator_choices()["models"]}


def reference_answer(ctx: AppContext) -> dict:
    """The shipped reference: what of it the board shows, and each shipped file's source.

    Returns:
        ``shown`` (false for a board of the store alone), ``runs``, ``models``, ``tasks``,
        ``hardware``, ``energy_sources`` and ``submitters`` of the reference rows on the board;
        ``files``: each entry of the shipped ``SOURCES.md`` (``path`` inside the reference
        folder, ``what``, ``source``, ``licence``, ``date``, ``changes``, ``files`` present).
    """
    layer = ctx.data.reference
    frame = layer.frame if layer is not None else pd.DataFrame()

    def _values(name: str) -> list:
        if frame.empty or name not in frame.columns:
            return []
        return sorted(str(v) for v in frame[name].dropna().unique())

    names = [str(p) for p in shipped_files(reference_dir())]
    entries = []
    for s in sources():
        folder = s.path.endswith("/")
        count = sum(n.startswith(s.path) if folder else n == s.path for n in names)
        entries.append(
            {
                "path": s.path,
                "what": s.what,
                "source": s.source,
                "licence": s.licence,
                "date": s.date,
                "changes": s.changes,
                "files": count,
            }
        )
    return {
        "shown": layer is not None,
        "runs": len(frame),
        "models": len(_values("model_id")),
        "tasks": _values("task"),
        "hardware": _values("accelerator_model"),
        "energy_sources": _values("energy_source"),
        "submitters": _values("submitter"),
        "files": entries,
    }


def snapshot(ctx: AppContext) -> dict:
    """Which data the answers come from: run counts per layer and a digest of their content.

    Returns:
        ``runs``, ``store_runs``, ``reference_runs``, ``latest_run`` (the newest run's
        ``created_at``, ISO) and ``digest``: SHA-256 of every shown run's id and content hash,
        sorted (the same runs give the same digest, whatever the store's files).
    """
    runs = ctx.data.runs
    if runs.empty:
        return {"runs": 0, "store_runs": 0, "reference_runs": 0, "latest_run": None,
                "digest": hashlib.sha256(b"").hexdigest()}  # fmt: skip
    hashes = runs["content_hash"] if "content_hash" in runs.columns else runs["run_id"]
    pairs = sorted(f"{r}:{h}" for r, h in zip(runs["run_id"], hashes.fillna(""), strict=True))
    layers = runs["layer"] if "layer" in runs.columns else pd.Series("store", index=runs.index)
    latest = pd.to_datetime(runs["created_at"], utc=True, errors="coerce").max()
    return {
        "runs": len(runs),
        "store_runs": int((layers != "reference").sum()),
        "reference_runs": int((layers == "reference").sum()),
        "latest_run": None if pd.isna(latest) else latest.isoformat(),
        "digest": hashlib.sha256("\n".join(pairs).encode("utf-8")).hexdigest(),
    }
