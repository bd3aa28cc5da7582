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

from mlenergy.errors import UserError
from mlenergy.leaderboard import answers
from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.client_errors import public_message
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.filters import FilterBar, widget_query
from mlenergy.leaderboard.footprint_view import ViewFootprint, region_choices, view_footprint

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
    footprint: list
    footprint_line: gr.Markdown


DEFAULT_FOOTPRINT = ("", None, 1.0, None)
"""The carbon and cost selector as the page opens: no region, no price (no derived column)."""

COLUMN_CHOICES = [(c.label, c.name) for c in lb.COLUMNS if c.name != "model_id"]
"""The columns a reader can hide (the model column is always shown, pinned on the left)."""


def footprint_of(settings: tuple) -> tuple[ViewFootprint | None, str]:
    """The carbon and cost settings from the selector's values, and the line naming them.

    A bad value gives no derived columns and a line saying what to fix.
    """
    try:
        fp = view_footprint(*settings)
    except UserError as exc:
        return None, f"Carbon and cost: {public_message(exc.message)}"
    return fp, fp.label()


def _page(ctx: AppContext, page: int, columns, settings: tuple, quality_key, values: tuple):
    """``(html, status, page, footprint line)`` of one table request."""
    q = widget_query(values, ctx, page)
    fp, line = footprint_of(settings)
    return (*answers.table_page(ctx, quality_key, q, tuple(columns or ()), fp), line)


def build_table_tab(ctx: AppContext, bar: FilterBar) -> TableTab:
    """Lay out the Leaderboard tab and wire the table to the filter bar."""
    csv_dir = Path(tempfile.mkdtemp(prefix="mlenergy-lb-csv-"))
    all_columns = [name for _, name in COLUMN_CHOICES]
    values = tuple(w.value for w in bar.filters)
    first = _page(ctx, 1, all_columns, DEFAULT_FOOTPRINT, bar.quality.value, values)
    with gr.Tab("Leaderboard", id="tab-table"):
        with gr.Accordion("Columns", open=False, elem_id="lb-columns-box"):
            columns = gr.CheckboxGroup(
                COLUMN_CHOICES, value=all_columns, show_label=False, elem_id="lb-columns"
            )
        with (
            gr.Accordion(
                "Carbon and cost (region, PUE, price per kWh)", open=False, elem_id="fp-box"
            ),
            gr.Row(elem_id="lb-footprint"),
        ):
            region = gr.Dropdown(
                ["", *region_choices()],
                value=DEFAULT_FOOTPRINT[0],
                label="Region (grid carbon intensity)",
                info="Yearly average of the shipped table",
                elem_id="fp-region",
            )
            intensity = gr.Number(
                None,
                label="or gCO2e per kWh",
                info="0: the region's",
                minimum=0,
                elem_id="fp-intensity",
            )
            pue = gr.Number(DEFAULT_FOOTPRINT[2], label="PUE", minimum=1, elem_id="fp-pue")
            price = gr.Number(
                None,
                label="Price per kWh (your currency)",
                info="0: no cost column",
                minimum=0,
                elem_id="fp-price",
            )
        footprint_line = gr.Markdown(first[3], elem_id="fp-line")
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

    settings = [region, intensity, pue, price]
    n = len(settings)

    def on_filter(cols, *rest):
        return _page(ctx, 1, cols, rest[:n], rest[n], rest[n + 1 :])

    def on_columns(p, cols, *rest):
        return _page(ctx, int(p or 1), cols, rest[:n], rest[n], rest[n + 1 :])

    def on_prev(p, cols, *rest):
        return _page(ctx, max(1, int(p or 1) - 1), cols, rest[:n], rest[n], rest[n + 1 :])

    def on_next(p, cols, *rest):
        return _page(ctx, int(p or 1) + 1, cols, rest[:n], rest[n], rest[n + 1 :])

    def csv_file(*rest):
        fp, _ = footprint_of(rest[:n])
        q = widget_query(rest[n + 1 :], ctx)
        text = answers.table_csv(ctx, rest[n], q, fp)
        out = csv_dir / f"leaderboard-{uuid.uuid4().hex[:8]}.csv"
        out.write_text(text, encoding="utf-8")
        return gr.update(value=str(out), visible=True)

    outputs = [grid, status, page, footprint_line]
    inputs = [columns, *settings, *bar.inputs]
    gr.on(  # one event for every filter (a light page config: one dependency, not thirteen)
        [w.change for w in [*settings, *bar.inputs]],
        on_filter,
        inputs,
        outputs,
        trigger_mode="always_last",
        api_visibility=PRIVATE,
    )
    columns.change(
        on_columns, [page, *inputs], outputs, trigger_mode="always_last", api_visibility=PRIVATE
    )
    csv_btn.click(csv_file, [*settings, *bar.inputs], csv_out, api_visibility=PRIVATE)
    prev_btn.click(on_prev, [page, *inputs], outputs, api_visibility=PRIVATE)
    next_btn.click(on_next, [page, *inputs], outputs, api_visibility=PRIVATE)
    return TableTab(grid, status, page, reload_btn, columns, settings, footprint_line)
