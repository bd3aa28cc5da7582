"""The Compare tab: 2 to 4 models side by side, each at its best configuration under the filters.

It opens on the models of the leaderboard's top rows. A model without runs under the filters
gets a note saying why and, when the task filter is the cause, which tasks it has.
"""

from __future__ import annotations

import html

import gradio as gr

from mlenergy.leaderboard import answers
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.filters import FilterBar, widget_query
from mlenergy.leaderboard.table_tab import PRIVATE


def build_compare_tab(ctx: AppContext, bar: FilterBar) -> gr.Dropdown:
    """Lay out the Compare tab; return its model picker (the reload refreshes it)."""
    with gr.Tab("Compare", id="tab-compare") as tab:
        pick = gr.Dropdown(
            ctx.choices["model_id"],
            value=answers.top_models(ctx, 3),
            multiselect=True,
            max_choices=4,
            label="Models (2 to 4)",
            elem_id="compare-models",
        )
        note = gr.Markdown(elem_id="compare-note")
        table = gr.HTML(elem_id="compare-table")
        figure = gr.Plot(elem_id="compare-plot")

    def show_compare(models, quality_key, *values):
        q = widget_query(values, ctx)
        table, figure, note = answers.compare_view(ctx, list(models or []), quality_key or None, q)
        return table, figure, html.escape(note)  # model names are text, never markup

    gr.on(
        [tab.select, *(w.change for w in [pick, *bar.inputs])],
        show_compare,
        [pick, *bar.inputs],
        [table, figure, note],
        trigger_mode="always_last",
        api_visibility=PRIVATE,
    )
    return pick
