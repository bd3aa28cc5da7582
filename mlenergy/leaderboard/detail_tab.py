"""The Model detail tab: every configuration of a model, a run's provenance and power timeline.

It opens on the model of the leaderboard's top row, drawn when the tab is first shown.
"""

from __future__ import annotations

import json

import gradio as gr

from mlenergy.leaderboard import answers
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.filters import FilterBar
from mlenergy.leaderboard.table_tab import PRIVATE


def provenance_text(ctx: AppContext, run_id: str | None):
    """``(JSON text, power timeline figure)`` of one run (empty text for an unknown run)."""
    data, figure = answers.provenance(ctx, run_id or "")
    text = "" if data is None else json.dumps(data, indent=2, ensure_ascii=False)
    return text, figure


def build_detail_tab(ctx: AppContext, bar: FilterBar) -> gr.Dropdown:
    """Lay out the Model detail tab; return its model picker (the reload refreshes it)."""
    top = answers.top_models(ctx, 1)
    with gr.Tab("Model detail", id="tab-detail") as tab:
        model = gr.Dropdown(
            ctx.choices["model_id"],
            value=top[0] if top else None,
            label="Model",
            info="Opens on the top row of the leaderboard",
            elem_id="detail-model",
        )
        table = gr.HTML(elem_id="detail-table")
        run_pick = gr.Dropdown(
            [], label="Run (provenance and power timeline)", elem_id="detail-run"
        )
        prov = gr.Code(
            language="json", label="Provenance", lines=12, max_lines=40, elem_id="detail-provenance"
        )
        timeline = gr.Plot(elem_id="detail-timeline")

    def detail(model_id, quality_key):
        runs = answers.model_runs(ctx, model_id or "", quality_key)
        first = runs[0][1] if runs else None
        html = answers.model_detail_html(ctx, model_id or "", quality_key)
        return html, gr.update(choices=runs, value=first)

    gr.on(  # drawn when the tab opens (on the top row's model) and on each pick
        [tab.select, model.change],
        detail,
        [model, bar.quality],
        [table, run_pick],
        trigger_mode="always_last",
        api_visibility=PRIVATE,
    )
    run_pick.change(
        lambda run_id: provenance_text(ctx, run_id), run_pick, [prov, timeline],
        api_visibility=PRIVATE,
    )  # fmt: skip
    return model
