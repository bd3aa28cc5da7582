"""The Leaderboard tab: the main table, its paging, CSV download and the store reload.

The table answers every change of the filter bar at once (server-side filter, sort, page);
the CSV button offers the rows of the current query (every page) as a file download.
"""

from __future__ import annotations

import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from mlenergy.leaderboard import answers
from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.filters import FilterBar, widget_query

PRIVATE = "private"
"""``api_visibility`` of events that only the page itself calls (the API is in ``api.py``)."""


@dataclass
class TableTab:
    """The widgets of the Leaderboard tab other code wires to."""

    grid: gr.HTML
    status: gr.Markdown
    page: gr.Number
    reload_button: gr.Button
    columns: gr.CheckboxGroup


COLUMN_CHOICES = [(c.label, c.name) for c in lb.COLUMNS if c.name != "model_id"]
"""The columns a reader can hide (the model column is always shown, pinned on the left)."""


def _page(ctx: AppContext, page: int, columns, quality_key: str | None, values: tuple):
    q = widget_query(values, ctx, page)
    return answers.table_page(ctx, quality_key, q, tuple(columns or ()))


def build_table_tab(ctx: AppContext, bar: FilterBar) -> TableTab:
    """Lay out the Leaderboard tab and wire the table to the filter bar."""
    csv_dir = Path(tempfile.mkdtemp(prefix="mlenergy-lb-csv-"))
    all_columns = [name for _, name in COLUMN_CHOICES]
    first = _page(ctx, 1, all_columns, bar.quality.value, tuple(w.value for w in bar.filters))
    with gr.Tab("Leaderboard", id="tab-table"):
        with gr.Accordion("Columns", open=False, elem_id="lb-columns-box"):
            columns = gr.CheckboxGroup(
                COLUMN_CHOICES, value=all_columns, show_label=False, elem_id="lb-columns"
            )
        status = gr.Markdown(first[1], elem_id="lb-status")
        grid = gr.HTML(first[0], elem_id="lb-grid")
        page = gr.Number(1, precision=0, visible=False)
        with gr.Row():
            prev_btn = gr.Button("◀ Previous", size="sm", elem_id="lb-prev")
            next_btn = gr.Button("Next ▶", size="sm", elem_id="lb-next")
            csv_btn = gr.Button("Download CSV of these rows", size="sm", elem_id="lb-csv")
            reload_btn = gr.Button("Reload from store", size="sm", elem_id="lb-reload")
        # Hidden until the button is pressed: no empty upload box under the table.
        csv_out = gr.File(label="CSV", height=60, visible=False, elem_id="lb-csv-file")

    def on_filter(cols, quality_key, *values):
        return _page(ctx, 1, cols, quality_key, values)

    def on_columns(p, cols, quality_key, *values):
        return _page(ctx, int(p or 1), cols, quality_key, values)

    def on_prev(p, cols, quality_key, *values):
        return _page(ctx, max(1, int(p or 1) - 1), cols, quality_key, values)

    def on_next(p, cols, quality_key, *values):
        return _page(ctx, int(p or 1) + 1, cols, quality_key, values)

    def csv_file(quality_key, *values):
        text = answers.table_csv(ctx, quality_key, widget_query(values, ctx))
        out = csv_dir / f"leaderboard-{uuid.uuid4().hex[:8]}.csv"
        out.write_text(text, encoding="utf-8")
        return gr.update(value=str(out), visible=True)

    outputs = [grid, status, page]
    inputs = [columns, *bar.inputs]
    gr.on(  # one event for every filter (a light page config: one dependency, not thirteen)
        [w.change for w in bar.inputs],
        on_filter,
        inputs,
        outputs,
        trigger_mode="always_last",
        api_visibility=PRIVATE,
    )
    columns.change(
        on_columns, [page, *inputs], outputs, trigger_mode="always_last", api_visibility=PRIVATE
    )
    csv_btn.click(csv_file, bar.inputs, csv_out, api_visibility=PRIVATE)
    prev_btn.click(on_prev, [page, *inputs], outputs, api_visibility=PRIVATE)
    next_btn.click(on_next, [page, *inputs], outputs, api_visibility=PRIVATE)
    return TableTab(grid, status, page, reload_btn, columns)
