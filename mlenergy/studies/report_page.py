"""The parts both study reports share: an HTML table, the page around it, an atomic write.

A report folder holds ``summary.md``, ``summary.csv``, ``index.html`` and the figures it
names; :func:`publish_report` writes them into a hidden folder first and moves them into
place only when all are written, so a failed run never leaves a half-written report.
"""

from __future__ import annotations

import html
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def html_table(header: list[str], rows: list[list[str]], table_id: str) -> str:
    """Render an escaped HTML table (``None.`` in a paragraph when there are no rows)."""
    if not rows:
        return f'<p id="{table_id}">None.</p>'
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows
    )
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def html_page(title: str, css: str, body: list[str], figures: list[str]) -> str:
    """Render a report page: ``body`` (HTML lines), then a ``Figures`` section of images.

    Args:
        title: The page title (escaped).
        css: The page's style sheet.
        body: HTML lines between ``<body>`` and the figures.
        figures: Image file names, relative to the page.
    """
    page = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        f"<style>{css}</style></head><body>",
        *body,
        "<h2>Figures</h2>",
        *[f"<p><img src='{f}' alt='{f}'></p>" for f in figures],
        "</body></html>",
    ]
    return "\n".join(page)


def publish_report(report_dir: Path, write: Callable[[Path], list[str]]) -> Path:
    """Write a report with ``write`` into a scratch folder, then move its files into place.

    Args:
        report_dir: The report folder (created if missing).
        write: Writes the report's files into the folder it is given and returns their
            names (``index.html`` among them).

    Returns:
        Path of ``index.html`` in ``report_dir``.
    """
    report_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".report-", dir=report_dir))
    try:
        for name in write(tmp):
            os.replace(tmp / name, report_dir / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return report_dir / "index.html"
