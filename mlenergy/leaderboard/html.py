"""HTML rendering of leaderboard tables: every text cell escaped, headers with unit tooltips.

The UI shows tables as plain HTML so that sorting and paging stay server-side and so that
a hostile model name (``<script>...``) is shown as text, never run.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

from mlenergy.leaderboard.columns import COLUMN_BY_NAME, COLUMNS, HOVER_ONLY, Column


def format_value(value: Any, fmt: str = "text") -> str:
    """Format one cell as escaped text.

    Args:
        value: The cell value.
        fmt: ``"int"``, ``"float"`` (4 significant digits) or ``"text"``.

    Returns:
        HTML-safe text; missing values show as an en dash.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if fmt == "int" and isinstance(value, int | float):
        return f"{int(value)}"
    if fmt == "float" and isinstance(value, int | float) and not isinstance(value, bool):
        v = float(value)
        if v != 0 and (abs(v) >= 1e9 or abs(v) < 1e-3):
            return f"{v:.3e}"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.4g}"
    if isinstance(value, float):
        return f"{value:.4g}"
    if not isinstance(value, list | tuple | dict | set) and pd.isna(value):
        return "–"
    return html.escape(str(value))


def render_table(
    rows: pd.DataFrame,
    columns: Sequence[Column] = COLUMNS,
    table_id: str = "lb-table",
    empty_text: str = "No configuration matches these filters.",
) -> str:
    """Render rows as an HTML table with escaped cells and ``title`` tooltips on headers.

    Args:
        rows: The rows to show.
        columns: Columns to show, in order (those missing from ``rows`` are skipped).
        table_id: The table's ``id`` attribute.
        empty_text: Text shown when there are no rows.

    Returns:
        An HTML fragment.
    """
    cols = [c for c in columns if c.name in rows.columns]
    head = "".join(
        f'<th title="{html.escape(c.tooltip, quote=True)}" '
        f'data-col="{html.escape(c.name, quote=True)}">'
        f"{html.escape(c.label)}</th>"
        for c in cols
    )
    if rows.empty:
        span = max(1, len(cols))
        body = f'<tr><td colspan="{span}" class="lb-empty">{html.escape(empty_text)}</td></tr>'
    else:
        body = _body(rows, cols)
    return (
        f'<div class="lb-scroll"><table id="{html.escape(table_id)}" class="lb-table">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def _cell(name: str, value: object, col: Column, hover: object) -> str:
    """One ``<td>``; a non-empty ``hover`` text becomes its ``title`` (escaped)."""
    title = ""
    if isinstance(hover, str) and hover:
        title = f' title="{html.escape(hover, quote=True)}"'
    return f'<td data-col="{name}"{title}>{format_value(value, col.fmt)}</td>'


APART_NOTE = (
    "Not measured on GPUs (modelled, estimated, emulated or CPU figures): listed apart, not "
    "comparable with the measured GPU rows above"
)
"""The separator row above the rows that are not measured on GPUs."""


def _body(rows: pd.DataFrame, cols: Sequence[Column]) -> str:
    """The table rows, with each cell's hover text where its column names one.

    Rows flagged ``apart`` (not measured on GPUs) get the class ``lb-apart``, under a
    separator row (class ``lb-apart-head``) saying why.
    """
    attrs = [html.escape(c.name, quote=True) for c in cols]
    hovers = [c.hover if c.hover in rows.columns else None for c in cols]
    values = rows[[c.name for c in cols]].itertuples(index=False, name=None)
    extra = {h: rows[h].tolist() for h in hovers if h is not None}
    apart = rows["apart"].tolist() if "apart" in rows.columns else [False] * len(rows)
    lines = []
    for i, rec in enumerate(values):
        cells = "".join(
            _cell(a, v, c, extra[h][i] if h is not None else None)
            for a, c, v, h in zip(attrs, cols, rec, hovers, strict=True)
        )
        if apart[i] and (i == 0 or not apart[i - 1]):
            lines.append(
                f'<tr class="lb-apart-head"><td colspan="{len(cols)}">'
                f"{html.escape(APART_NOTE)}</td></tr>"
            )
        lines.append(f'<tr class="lb-apart">{cells}</tr>' if apart[i] else f"<tr>{cells}</tr>")
    return "".join(lines)


def render_frame(rows: pd.DataFrame, table_id: str, empty_text: str = "Nothing to show.") -> str:
    """Render any frame (e.g. a model's configurations, a comparison) with escaped cells.

    Columns known to the main table get its labels, formats and tooltips; other columns are
    shown under their own name, except :data:`~.columns.HOVER_ONLY` ones (shown on hover).
    """
    cols = [
        COLUMN_BY_NAME.get(
            str(name),
            Column(
                str(name),
                str(name),
                str(name),
                "float" if pd.api.types.is_float_dtype(rows[name]) else "text",
            ),
        )
        for name in rows.columns
        if name not in HOVER_ONLY
    ]
    return render_table(rows, cols, table_id=table_id, empty_text=empty_text)


def render_problems(problems: Sequence[str], title: str) -> str:
    """Render a list of validation problems (escaped) under a title, as HTML."""
    items = "".join(f"<li>{html.escape(p)}</li>" for p in problems)
    return f'<div class="lb-problems"><strong>{html.escape(title)}</strong><ul>{items}</ul></div>'
