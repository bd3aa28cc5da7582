"""Compact HTML tables for notebooks: one escaped table, and a figure with its unit.

The run record's own table (``RunRecord._repr_html_``) and the notebook's tables of several
runs and of results (:mod:`mlenergy.notebook.display`) are built with these. A missing figure
shows as ``n/a``, never as 0. Knows no record type, so every record module may use it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

_STYLE = "border-collapse:collapse;font-size:12px"
_CELL = "border:1px solid #ddd;padding:2px 6px;text-align:right"


def num_cell(value: float | None, unit: str, digits: int = 4) -> str:
    """``value`` with ``digits`` significant digits and its unit, or ``n/a`` when missing."""
    return "n/a" if value is None else f"{value:.{digits}g} {unit}"


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]], caption: str = "") -> str:
    """An escaped HTML table with a header row and an optional caption."""
    head = "".join(f"<th style='{_CELL}'>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td style='{_CELL}'>{html.escape(str(c))}</td>" for c in row) + "</tr>"
        for row in rows
    )
    cap = f"<caption style='text-align:left'>{html.escape(caption)}</caption>" if caption else ""
    return (
        f"<table style='{_STYLE}'>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )
