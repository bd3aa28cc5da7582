"""The Power budget tab: the best configuration per model under a site budget and a deadline.

The figures come from the power-cap planner (see :mod:`mlenergy.leaderboard.power_budget`);
the tab redraws on every change of its inputs or of the task filter.
"""

from __future__ import annotations

import html

import gradio as gr

from mlenergy.errors import UserError
from mlenergy.leaderboard import power_budget as pb
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.filters import FilterBar
from mlenergy.leaderboard.html import render_frame
from mlenergy.leaderboard.table_tab import PRIVATE
from mlenergy.optimize.site import SITE_HOST_W_PER_GPU, SITE_PUE

INTRO = (
    "The configuration of each model that serves the most output tokens per second inside a "
    "site power budget, among its measured configurations of the task chosen above whose "
    "median inter-token latency meets the deadline. A configuration (one replica) draws its "
    "measured GPU power x PUE plus the host power of its GPUs; the budget holds "
    "floor(budget / that) replicas. *Site J/token* counts PUE and host power; *GPU J/token* is "
    "the measured figure."
)


def view(ctx: AppContext, q: pb.BudgetQuery) -> tuple[str, str]:
    """The tab's table and note, both as escaped HTML, for one request.

    The note says how many models fit and lists the others with the planner's reason (folded).
    """
    try:
        answer = pb.best_per_model(ctx, q)
    except UserError as exc:
        table = render_frame(pb.labelled(pb.empty_table()), "power-table", "Fix the input.")
        return table, f'<p class="lb-problems">{html.escape(exc.message)}</p>'
    note = (
        f"<p>{len(answer.table)} models fit {q.budget_w:,.0f} W within {q.itl_limit_ms:g} ms "
        f"(task {html.escape(q.task)}).</p>"
    )
    if answer.left_out:
        items = "".join(
            f"<li>{html.escape(m)}: {html.escape(why)}</li>" for m, why in answer.left_out
        )
        note += (
            f"<details><summary>{len(answer.left_out)} models left out</summary>"
            f"<ul>{items}</ul></details>"
        )
    empty = f"No model of task {q.task!r} fits this budget and deadline."
    return render_frame(pb.labelled(answer.table), "power-table", empty), note


def build_power_tab(ctx: AppContext, bar: FilterBar) -> None:
    """Lay out the Power budget tab and wire it to its inputs and the task filter."""
    with gr.Tab("Power budget", id="tab-power") as tab:
        gr.Markdown(INTRO)
        with gr.Row():
            budget = gr.Number(pb.DEFAULT_BUDGET_W, label="Site budget (W)", elem_id="pw-budget")
            itl = gr.Number(pb.DEFAULT_ITL_MS, label="ITL deadline (ms, median)", elem_id="pw-itl")
            pue = gr.Number(SITE_PUE, label="PUE", elem_id="pw-pue")
            host = gr.Number(SITE_HOST_W_PER_GPU, label="Host power per GPU (W)", elem_id="pw-host")
        note = gr.HTML(elem_id="pw-note")
        table = gr.HTML(elem_id="pw-table")

    def draw(task, budget_w, itl_ms, pue_value, host_w):
        q = pb.BudgetQuery(
            budget_w=float(budget_w or 0),
            itl_limit_ms=float(itl_ms or 0),
            task=task or ctx.default_task or "lm-arena-chat",
            pue=float(pue_value or 0),
            host_w_per_gpu=float(host_w if host_w is not None else -1),
        )
        return view(ctx, q)

    gr.on(
        [tab.select, *(w.change for w in (bar.task, budget, itl, pue, host))],
        draw,
        [bar.task, budget, itl, pue, host],
        [table, note],
        trigger_mode="always_last",
        api_visibility=PRIVATE,
    )
