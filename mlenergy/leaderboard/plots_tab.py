"""The Plots tab: energy against quality or latency (Pareto frontier), efficiency by hardware.

The figure is drawn when the tab is opened and redrawn on every change of the filter bar or of
the figure picker; with *Best configuration* ticked it shows the table's rows, and its
subtitle says which rows it shows.
"""

from __future__ import annotations

import gradio as gr

from mlenergy.leaderboard import answers
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.filters import FilterBar, widget_query
from mlenergy.leaderboard.table_tab import PRIVATE


def build_plots_tab(ctx: AppContext, bar: FilterBar) -> gr.Plot:
    """Lay out the Plots tab and wire it to the filter bar; return its figure.

    The figure is drawn when the tab is opened (not sent with the page, which keeps every
    page load light) and redrawn on each change of the filters or the figure picker.
    """
    default = answers.PLOTS[1]
    with gr.Tab("Plots", id="tab-plots") as tab:
        kind = gr.Radio(list(answers.PLOTS), value=default, label="Plot", elem_id="plot-kind")
        figure = gr.Plot(elem_id="plot-figure")

    def draw(plot_kind, quality_key, *values):
        q = widget_query(values, ctx)
        return answers.plot_figure(ctx, plot_kind or default, quality_key or None, q)

    gr.on(
        [tab.select, *(w.change for w in [kind, *bar.inputs])],
        draw,
        [kind, *bar.inputs],
        figure,
        trigger_mode="always_last",
        api_visibility=PRIVATE,
    )
    return figure
