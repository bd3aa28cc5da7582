"""The mlenergy leaderboard: a Gradio UI over :mod:`mlenergy.leaderboard.answers`.

UI only: every figure, filter and check comes from the data layer and the store. Nothing is
read at import time; :func:`build_app` loads the store once and hands it to one builder per
tab (``table_tab``, ``plots_tab``, ``detail_tab``, ``compare_tab``, ``power_tab``, ``estimate_tab``,
``submit_tab``, ``about_tab``) and to the program API (``api``: Gradio endpoints, and the
same functions as the JSON API under ``/api/v1``, ``json_api``). Run
``mlenergy leaderboard --data-dir data`` or, as a Hugging Face Space, the entry point
``leaderboard/app.py`` (store: ``$MLENERGY_DATA_DIR``, else ``data``).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import gradio as gr
from starlette.middleware import Middleware

from mlenergy.leaderboard import answers
from mlenergy.leaderboard.about_tab import build_about_tab
from mlenergy.leaderboard.api import api_functions, register_api
from mlenergy.leaderboard.call_guard import CallGuard, cap_log_lines
from mlenergy.leaderboard.compare_tab import build_compare_tab
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.detail_tab import build_detail_tab
from mlenergy.leaderboard.estimate_tab import build_estimate_tab
from mlenergy.leaderboard.filters import (
    FILTERS,
    build_filter_bar,
    source_choices,
    view_outputs,
    view_updates,
    widget_query,
    wire_view,
)
from mlenergy.leaderboard.gradio_costs import lighten_gradio_events, quiet_idle_queue
from mlenergy.leaderboard.json_api import JsonApiMount, build_json_api
from mlenergy.leaderboard.page_cache import PageCache
from mlenergy.leaderboard.plots_tab import build_plots_tab
from mlenergy.leaderboard.power_tab import build_power_tab
from mlenergy.leaderboard.submit_tab import build_submit_tab
from mlenergy.leaderboard.table_tab import PRIVATE, TableTab, build_table_tab, footprint_of

CONCURRENCY = 16
"""Events of the page served at once (the API's read-only endpoints have no limit)."""


UPLOAD_CACHE_S = (3600, 3600)
"""Gradio's cache sweep: every hour, delete cached uploads older than an hour (s, s)."""


def css() -> str:
    """The app's style sheet (``leaderboard.css``, shipped with the package)."""
    return resources.files("mlenergy.leaderboard").joinpath("leaderboard.css").read_text("utf-8")


FILTERED_TABS = ("Leaderboard", "Plots", "Model detail", "Compare", "Power budget")
"""The tabs the filter panel applies to; it is hidden above the others (Estimator, Submit,
About)."""


def panel_visible(tab_label: object) -> bool:
    """Whether the filter panel shows above the tab labelled ``tab_label``."""
    return str(tab_label) in FILTERED_TABS


def _wire_panel(tabs: gr.Tabs, bar) -> None:
    """Show the filter panel only on :data:`FILTERED_TABS`."""

    def on_tab(evt: gr.SelectData):
        return gr.update(visible=panel_visible(evt.value))

    tabs.select(on_tab, None, bar.panel, api_visibility=PRIVATE)


def _wire_reload(ctx: AppContext, bar, table: TableTab, models: list) -> None:
    """The *Reload from store* button: re-read the store, refresh the table and pickers."""
    n = len(table.footprint)

    def reload_view(columns, *rest):
        settings, quality_key, values = rest[:n], rest[n], rest[n + 1 :]
        ctx.reload()
        named = dict(zip(FILTERS, values, strict=True))
        view = ctx.view(named.get("sources"))
        q = widget_query(values, ctx)
        fp, line = footprint_of(settings)
        page = (*answers.table_page(ctx, quality_key, q, tuple(columns or ()), fp), line)
        pickers = view_updates(
            view, named["task"], quality_key, named["hardware"], named["precisions"],
            named["gpus"],
        )  # fmt: skip
        sources = gr.update(choices=source_choices(ctx.choices["source_class"]))
        lists = [gr.update(choices=ctx.choices["model_id"]) for _ in models]
        return (*page, *pickers, sources, *lists)

    outputs = [table.grid, table.status, table.page, table.footprint_line]
    outputs += [*view_outputs(bar), bar.sources, *models]
    table.reload_button.click(
        reload_view,
        [table.columns, *table.footprint, *bar.inputs],
        outputs,
        concurrency_limit=1,
        api_visibility=PRIVATE,
    )


def build_app(
    data_dir: str | Path, published_quality: str | Path | None = None, reference: bool = True
) -> gr.Blocks:
    """Build the leaderboard app over the store at ``data_dir`` (read once, here).

    Args:
        data_dir: The store folder; the shipped reference is always shown beside it (an
            empty store shows the reference rows).
        published_quality: Published quality scores (CSV) offered in the Quality figure menu;
            ``None``: the reference's ``published-quality.csv`` when present.
        reference: Show the shipped ML.ENERGY reference beside the store (``False``: the
            store alone, e.g. a private board of one's own runs).

    Returns:
        The Gradio app; serve it with :func:`launch` (which serves the JSON API beside it:
        the app's ``json_api`` attribute).

    Raises:
        StoreError: The store exists but cannot be read.
        UserError: The published-quality file is missing (when given) or has a bad row.
    """
    ctx = AppContext.load(data_dir, published_quality, reference)
    # Uploads that were never submitted leave Gradio's cache within two hours.
    blocks = gr.Blocks(
        title="mlenergy leaderboard", analytics_enabled=False, delete_cache=UPLOAD_CACHE_S
    )
    with blocks as demo:
        gr.Markdown(
            "# mlenergy leaderboard\nJoules per output token against quality and latency, "
            "measured, modelled and estimated figures kept apart, provenance on every run."
        )
        bar = build_filter_bar(ctx)
        wire_view(ctx, bar, PRIVATE)
        with gr.Tabs() as tabs:
            table = build_table_tab(ctx, bar)
            build_plots_tab(ctx, bar)
            detail_model = build_detail_tab(ctx, bar)
            compare_models = build_compare_tab(ctx, bar)
            build_power_tab(ctx, bar)
            build_estimate_tab()
            build_submit_tab(ctx.data_dir)
            build_about_tab()
        _wire_panel(tabs, bar)
        _wire_reload(ctx, bar, table, [detail_model, compare_models])
        functions = register_api(ctx, api_functions(ctx))
    demo.json_api = build_json_api(ctx, functions)
    return demo


ANALYTICS_ENV = {"GRADIO_ANALYTICS_CACHE_FREQUENCY": "500", "GRADIO_ANALYTICS_MAX_EVENTS": "2000"}
"""Gradio's queue rebuilds its monitoring summary (a pandas frame of up to 10,000 past events)
after every event by default; every 500 events over the last 2,000 keeps that off the hot path.
Values already set in the environment win."""


def launch(demo: gr.Blocks, host: str = "127.0.0.1", port: int = 7860, block: bool = True) -> None:
    """Serve ``demo`` on ``host:port`` (``block=False`` returns once the server is up).

    The JSON API built with the app (``demo.json_api``) answers under ``/api/v1`` on the same
    port, in front of Gradio's routes.
    """
    for name, value in ANALYTICS_ENV.items():
        os.environ.setdefault(name, value)  # read when the queue is made, just below
    lighten_gradio_events(demo)
    cap_log_lines()  # before the server sets up its logging, which holds on to stderr
    demo.queue(default_concurrency_limit=CONCURRENCY)
    quiet_idle_queue(demo)
    demo.launch(
        server_name=host,
        server_port=port,
        css=css(),
        theme=gr.themes.Soft(),
        prevent_thread_lock=not block,
        show_error=False,  # an unexpected error's text (paths, internals) never reaches clients
        quiet=True,
        footer_links=[],
        ssr_mode=False,
        max_file_size="20mb",
        app_kwargs={
            "middleware": [
                Middleware(JsonApiMount, api=getattr(demo, "json_api", None)),
                Middleware(CallGuard, blocks=demo),
                Middleware(PageCache),
            ]
        },
    )


def main() -> None:
    """Serve the store named by ``$MLENERGY_DATA_DIR`` (else ``data``), as a Space does."""
    launch(
        build_app(os.environ.get("MLENERGY_DATA_DIR") or "data"),
        host=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
        port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
    )
