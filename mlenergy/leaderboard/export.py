"""``mlenergy leaderboard export DIR``: the JSON API's answers as static files.

For a board served by any static host or CDN: each file holds the exact bytes the JSON API
(:mod:`.json_api`) answers for one query of the default views, made by the same functions
(:func:`.api.api_functions`) and the same encoder. ``index.json`` lists every file with the
API path it stands for, the time of the export and the store snapshot the answers come from
(:func:`.catalog.snapshot`). The folder is written whole in a hidden sibling and renamed at the
end: an export that fails leaves no half-written folder.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

import orjson

from mlenergy.errors import UserError
from mlenergy.leaderboard import catalog
from mlenergy.leaderboard.api import ALL, api_functions
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.json_api import PREFIX, encode

FULL_PAGE = 1000
"""Rows per exported table page (the API's largest page)."""


def file_name(model_id: str) -> str:
    """A model id as one safe file name (``org/name`` -> ``org__name``)."""
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in model_id.replace("/", "__"))
    return safe.strip(".") or "_"


class _Writer:
    """Writes answers under a folder and remembers what each file stands for."""

    def __init__(self, root: Path, functions: dict[str, Callable[..., dict]]) -> None:
        self.root, self.functions = root, functions
        self.files: list[dict] = []

    def answer(self, path: str, api: str, name: str, **args) -> dict:
        """Write function ``name``'s answer to ``args`` at ``path``; return the answer."""
        value = self.functions[name](**args)
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(encode(value).body)
        self.files.append({"file": path, "api": api})
        return value


def _query(args: dict) -> str:
    pairs = {k: ",".join(map(str, v)) if isinstance(v, list) else v for k, v in args.items()}
    text = urlencode({k: str(v).lower() if isinstance(v, bool) else v for k, v in pairs.items()})
    return f"?{text}" if text else ""


def _tables(w: _Writer, ctx: AppContext) -> list[str]:
    """The table as the page opens, and each task's opening view (all rows, pages of 1,000).

    Returns:
        The run ids these views show, in order.
    """
    first = w.answer("leaderboard.json", f"{PREFIX}/leaderboard", "leaderboard_table")
    shown = [r["run_id"] for r in first["rows"]]
    for task in [ALL, *ctx.view(None).choices["task"]]:
        page, pages = 1, 1
        while page <= pages:
            args = {"task": task, "page_size": FULL_PAGE, "page": page}
            suffix = "" if page == 1 else f"-page-{page}"
            answer = w.answer(
                f"leaderboard/{file_name(task)}{suffix}.json",
                f"{PREFIX}/leaderboard{_query(args)}",
                "leaderboard_table",
                **args,
            )
            shown += [r["run_id"] for r in answer["rows"]]
            page, pages = page + 1, answer["pages"]
    return list(dict.fromkeys(shown))


def export_board(ctx: AppContext, folder: Path) -> dict:
    """Write the default views' answers, figures and runs under ``folder`` (new or empty).

    Writes ``leaderboard.json`` (the page as it opens), ``leaderboard/<task>.json`` (each
    task's opening view, and ``all``, every row in pages of 1,000), ``plots/<kind>.json``
    (the Plots tab's figures as Plotly JSON), ``models.json``, ``models/<org__name>.json``,
    ``runs/<run_id>.json`` (each run those views show), ``filters.json``, ``reference.json``,
    ``estimate.json`` (when the estimator is installed) and ``index.json``.

    Args:
        ctx: The app's state (the store snapshot to export).
        folder: Where to write; it must not exist or be empty.

    Returns:
        The manifest written as ``index.json``.

    Raises:
        UserError: ``folder`` is a file or a folder that is not empty.
    """
    folder = Path(folder)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UserError(
            f"{folder} is not an empty folder", "give a new or empty folder to export into"
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        functions = api_functions(ctx)
        w = _Writer(work, functions)
        runs = _tables(w, ctx)
        for kind in ("latency", "quality", "hardware"):
            w.answer(f"plots/{kind}.json", f"{PREFIX}/plots/{kind}", "plot", kind=kind)
        models = w.answer("models.json", f"{PREFIX}/models", "models")
        for m in models["models"]:
            model_id = m["model_id"]
            w.answer(
                f"models/{file_name(model_id)}.json", f"{PREFIX}/models/{model_id}",
                "model_detail", model_id=model_id,
            )  # fmt: skip
        for run_id in runs:
            w.answer(f"runs/{file_name(run_id)}.json", f"{PREFIX}/runs/{run_id}", "provenance",
                     run_id=run_id)  # fmt: skip
        w.answer("filters.json", f"{PREFIX}/filters", "filter_choices")
        w.answer("reference.json", f"{PREFIX}/reference", "reference")
        if "estimate" in functions:
            w.answer("estimate.json", f"{PREFIX}/estimate", "estimate")
        manifest = {
            "exported_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "snapshot": catalog.snapshot(ctx),
            "note": "each file holds the JSON API's answer to the path beside it",
            "files": w.files,
        }
        (work / "index.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
        if folder.exists():
            folder.rmdir()
        os.replace(work, folder)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return manifest
