"""The mlenergy leaderboard: a Gradio UI over :mod:`mlenergy.leaderboard.query`.

UI only: every figure, filter and check comes from the data layer (``mlenergy.analysis``)
and the store (``mlenergy.store``). Nothing is read at import time; :func:`build_app` loads the
store. Run ``mlenergy leaderboard --data-dir data`` or, as a Hugging Face Space, the entry point
``leaderboard/app.py`` (store: ``$MLENERGY_DATA_DIR``, else ``data``).
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path

import gradio as gr

from mlenergy.leaderboard import plots as plots
from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard import views as views
from mlenergy.leaderboard.arch import ARCH_KINDS
from mlenergy.leaderboard.data import LeaderboardData
from mlenergy.leaderboard.estimate_tab import (
    estimator_available,
    estimator_choices,
    run_estimate,
)
from mlenergy.leaderboard.html import render_frame, render_table
from mlenergy.leaderboard.submit_tab import ABOUT_MARKDOWN, submit_bundle

CSS = """
.lb-scroll { overflow-x: auto; max-height: 640px; }
.lb-table { border-collapse: collapse; font-size: 0.85rem; width: 100%; }
.lb-table th { position: sticky; top: 0; background: var(--background-fill-secondary);
  cursor: help; text-align: left; padding: 4px 6px;
  border-bottom: 2px solid var(--border-color-primary); }
.lb-table td { padding: 3px 6px; border-bottom: 1px solid var(--border-color-primary);
  white-space: nowrap; }
.lb-problems { color: var(--error-text-color, #b91c1c); }
.lb-ok { color: var(--color-green-600, #15803d); }
"""
PLOTS = ("Energy vs quality", "Energy vs latency", "Tokens/s/W by hardware")
SORT_CHOICES = [(c.label, c.name) for c in lb.COLUMNS]
ARCH_CHOICES = ["all", *ARCH_KINDS]


FILTERS = ("task", "hardware", "arch", "precisions", "gpus", "sources", "search", "itl", "budget")
FILTERS += ("best", "sort_by", "desc")


def _query(values, page, limits) -> lb.TableQuery:
    """Build a :class:`TableQuery` from the filter widgets' values (slider at max: no limit)."""
    v = dict(zip(FILTERS, values, strict=True))
    max_itl, max_budget = limits
    itl, budget = v["itl"], v["budget"]
    return lb.TableQuery(
        task=v["task"] or None,
        hardware=tuple(v["hardware"] or ()),
        arch=v["arch"] or "all",
        precisions=tuple(v["precisions"] or ()),
        gpu_counts=tuple(int(g) for g in (v["gpus"] or ())),
        source_kinds=tuple(v["sources"] or ()),
        search=v["search"] or "",
        max_itl_ms=None if itl is None or itl >= max_itl else float(itl),
        max_energy_per_token_j=None if budget is None or budget >= max_budget else float(budget),
        best_only=bool(v["best"]),
        sort_by=v["sort_by"] or lb.DEFAULT_SORT,
        descending=bool(v["desc"]),
        page=int(page or 1),
    )


def build_app(data_dir: str | Path) -> gr.Blocks:
    """Build the leaderboard app over the store at ``data_dir`` (read once, here).

    Args:
        data_dir: The store folder (an empty store shows an empty table and how to seed it).

    Returns:
        The Gradio app; serve it with :func:`launch`.
    """
    data = LeaderboardData.load(data_dir)
    state = {"data": data}

    def _choices():
        return lb.filter_choices(state["data"].frame(None))

    ch = _choices()
    limits = (lb.slider_limit(ch["max_itl_ms"]), lb.slider_limit(ch["max_energy_per_token_j"]))
    qkeys = data.quality_keys()
    default_task = "lm-arena-chat" if "lm-arena-chat" in ch["task"] else None

    csv_dir = Path(tempfile.mkdtemp(prefix="mlenergy-lb-csv-"))

    def _frame(quality_key, values, page=1):
        return state["data"].frame(quality_key or None), _query(values, page, limits)

    def table(quality_key, *values_and_page):
        frame, q = _frame(quality_key, values_and_page[:-1], values_and_page[-1])
        res = lb.query_table(frame, q)
        status = f"{res.total} rows · page {res.page} of {res.pages}"
        if state["data"].runs.empty:
            status += " · the store is empty: run `mlenergy leaderboard import-reference`"
        return render_table(res.page_rows), status, res.page

    def csv_file(quality_key, *values):
        frame, q = _frame(quality_key, values)
        out = csv_dir / f"leaderboard-{uuid.uuid4().hex[:8]}.csv"
        out.write_text(lb.to_csv(lb.query_table(frame, q).rows), encoding="utf-8")
        return str(out)

    def plot(kind, quality_key, *values):
        frame, q = _frame(quality_key, values)
        rows = lb.filter_runs(frame, q)
        if kind == PLOTS[0]:
            key = quality_key or None
            hib = views.higher_is_better(state["data"].quality, key) if key else True
            return plots.energy_vs_quality(rows, key or "quality (pick a quality figure)", hib)
        if kind == PLOTS[2]:
            return plots.efficiency_by_hardware(rows)
        return plots.energy_vs_latency(rows)

    def detail(model_id, quality_key):
        rows = views.model_configs(state["data"].frame(quality_key or None), model_id or "")
        runs = [
            (f"{r.task} · {r.hardware} x{r.accelerator_count} · {r.run_id}", r.run_id)
            for r in rows.itertuples()
        ]
        first = runs[0][1] if runs else None
        return render_frame(rows, "lb-detail", "Pick a model."), gr.update(
            choices=runs, value=first
        )

    def provenance(run_id):
        record = state["data"].get_run(run_id or "")
        if record is None:
            return "", plots.power_timeline(None)
        text = json.dumps(views.run_provenance(record), indent=2, ensure_ascii=False)
        return text, plots.power_timeline(
            record.power_timeline, f"Power timeline of {record.run_id}"
        )

    def compare(models, quality_key, *values):
        frame, q = _frame(quality_key, values)
        models = list(models or [])[:4]
        rows = lb.filter_runs(frame, replace(q, search=""))
        table_ = views.compare_models(rows, models, q.max_itl_ms, q.max_energy_per_token_j)
        note = "" if len(models) >= 2 else "Pick 2 to 4 models."
        return render_frame(table_, "lb-compare"), plots.compare_bars(table_), note

    def reload(*values):
        """Re-read the store (e.g. after approvals) and refresh the pickers' choices."""
        state["data"].reload()
        c = _choices()
        lists = [c["task"], state["data"].quality_keys(), c["hardware"], c["dtype"]]
        lists += [[str(g) for g in c["accelerator_count"]], c["source_kind"], *[c["model_id"]] * 2]
        return (*table(*values, 1), *[gr.update(choices=x) for x in lists])

    def submit(path, submitter):
        return submit_bundle(path, data_dir, submitter)[0]

    with gr.Blocks(title="mlenergy leaderboard", analytics_enabled=False) as demo:
        gr.Markdown(
            "# mlenergy leaderboard\nJoules per output token against quality and latency, "
            "measured, modelled and estimated figures kept apart, provenance on every run."
        )
        with gr.Row():
            task = gr.Dropdown(ch["task"], value=default_task, label="Task", elem_id="f-task")
            quality = gr.Dropdown(
                qkeys,
                value=qkeys[0] if qkeys else None,
                label="Quality figure",
                elem_id="f-quality",
            )
            search = gr.Textbox(
                label="Search", placeholder="model, hardware, submitter…", elem_id="f-search"
            )
        with gr.Row():
            hardware = gr.CheckboxGroup(ch["hardware"], label="Hardware", elem_id="f-hardware")
            arch = gr.Radio(ARCH_CHOICES, value="all", label="Architecture", elem_id="f-arch")
            precision = gr.CheckboxGroup(ch["dtype"], label="Precision", elem_id="f-precision")
            gpus = gr.CheckboxGroup(
                [str(c) for c in ch["accelerator_count"]], label="GPU count", elem_id="f-gpus"
            )
            sources = gr.CheckboxGroup(ch["source_kind"], label="Energy source", elem_id="f-source")
        with gr.Row():
            itl = gr.Slider(
                0,
                limits[0],
                value=limits[0],
                step=limits[0] / 500,
                label="Latency deadline (median ITL, ms)",
                info="At the maximum: no deadline",
                scale=2,
                elem_id="f-itl",
            )
            budget = gr.Slider(
                0,
                limits[1],
                value=limits[1],
                step=limits[1] / 1000,
                label="Energy budget (J per output token)",
                info="At the maximum: no budget",
                scale=2,
                elem_id="f-budget",
            )
            best = gr.Checkbox(
                True, label="Best configuration per model x hardware", elem_id="f-best"
            )
            sort_by = gr.Dropdown(
                SORT_CHOICES,
                value=lb.DEFAULT_SORT,
                label="Sort by",
                min_width=220,
                elem_id="f-sort",
            )
            desc = gr.Checkbox(False, label="Descending", elem_id="f-desc")
        page = gr.Number(1, precision=0, visible=False)
        filters = [
            task,
            hardware,
            arch,
            precision,
            gpus,
            sources,
            search,
            itl,
            budget,
            best,
            sort_by,
            desc,
        ]
        with gr.Tabs():
            with gr.Tab("Leaderboard", id="tab-table"):
                first = table(None if not qkeys else qkeys[0], *[w.value for w in filters], 1)
                status = gr.Markdown(first[1], elem_id="lb-status")
                grid = gr.HTML(first[0], elem_id="lb-grid")
                with gr.Row():
                    prev_btn = gr.Button("◀ Previous", size="sm", elem_id="lb-prev")
                    next_btn = gr.Button("Next ▶", size="sm", elem_id="lb-next")
                    csv_btn = gr.Button("Download CSV of these rows", size="sm", elem_id="lb-csv")
                    reload_btn = gr.Button("Reload from store", size="sm", elem_id="lb-reload")
                csv_out = gr.File(label="CSV", height=60, elem_id="lb-csv-file")
            with gr.Tab("Plots", id="tab-plots"):
                plot_kind = gr.Radio(list(PLOTS), value=PLOTS[1], label="Plot", elem_id="plot-kind")
                plot_btn = gr.Button("Draw", variant="primary", elem_id="plot-draw")
                figure = gr.Plot(elem_id="plot-figure")
            with gr.Tab("Model detail", id="tab-detail"):
                model = gr.Dropdown(
                    ch["model_id"], value=None, label="Model", elem_id="detail-model"
                )
                detail_html = gr.HTML(elem_id="detail-table")
                run_pick = gr.Dropdown(
                    [], label="Run (provenance and power timeline)", elem_id="detail-run"
                )
                prov = gr.Code(
                    language="json",
                    label="Provenance",
                    lines=12,
                    max_lines=40,
                    elem_id="detail-provenance",
                )
                timeline = gr.Plot(elem_id="detail-timeline")
            with gr.Tab("Compare", id="tab-compare"):
                compare_pick = gr.Dropdown(
                    ch["model_id"],
                    value=[],
                    multiselect=True,
                    max_choices=4,
                    label="Models (2 to 4)",
                    elem_id="compare-models",
                )
                compare_note = gr.Markdown()
                compare_html = gr.HTML(elem_id="compare-table")
                compare_plot = gr.Plot()
            if estimator_available():
                est = estimator_choices()
                with gr.Tab("Estimator", id="tab-estimator"):
                    with gr.Row():
                        e_model = gr.Dropdown(
                            est["models"],
                            value=est["models"][0] if est["models"] else None,
                            label="Reference model",
                            elem_id="est-model",
                        )
                        e_upload = gr.File(
                            label="…or upload a config.json",
                            file_types=[".json"],
                            elem_id="est-upload",
                        )
                        e_gpu = gr.Dropdown(
                            est["gpus"],
                            value=est["gpus"][0] if est["gpus"] else None,
                            label="GPU",
                            elem_id="est-gpu",
                        )
                    with gr.Row():
                        e_gpus = gr.Slider(1, 8, value=1, step=1, label="GPUs (tensor parallel)")
                        e_batch = gr.Slider(1, 512, value=32, step=1, label="Batch size")
                        e_in = gr.Slider(1, 32768, value=512, step=1, label="Input tokens")
                        e_out = gr.Slider(1, 32768, value=512, step=1, label="Output tokens")
                        e_prec = gr.Dropdown(
                            est["precisions"], value=est["precisions"][0], label="Precision"
                        )
                        e_clock = gr.Slider(
                            0, 3000, value=0, step=15, label="SM clock (MHz); 0 = max"
                        )
                    e_btn = gr.Button("Estimate", variant="primary", elem_id="est-run")
                    e_text = gr.HTML(elem_id="est-result")
                    e_plot = gr.Plot(elem_id="est-plot")
                    e_inputs = [
                        e_model,
                        e_upload,
                        e_gpu,
                        e_gpus,
                        e_batch,
                        e_in,
                        e_out,
                        e_prec,
                        e_clock,
                    ]
                    e_btn.click(run_estimate, e_inputs, [e_text, e_plot])
                    for widget in e_inputs:
                        widget.change(
                            run_estimate, e_inputs, [e_text, e_plot], trigger_mode="always_last"
                        )
            with gr.Tab("Submit", id="tab-submit"):
                gr.Markdown(
                    "Upload `mlenergy bench --json` output (JSON lines; give your name below) "
                    "or a `Submission` JSON. Every problem is listed at once; valid bundles "
                    "wait for approval."
                )
                upload = gr.File(
                    label="Result bundle (.json / .jsonl)",
                    file_types=[".json", ".jsonl"],
                    elem_id="submit-file",
                )
                submitter = gr.Textbox(
                    label="Submitter (only for bundles of bare records)", elem_id="submit-submitter"
                )
                submit_btn = gr.Button(
                    "Validate and queue", variant="primary", elem_id="submit-run"
                )
                submit_out = gr.HTML(elem_id="submit-result")
            with gr.Tab("About", id="tab-about"):
                gr.Markdown(ABOUT_MARKDOWN)

        table_inputs = [quality, *filters]
        for widget in [quality, *filters]:
            widget.change(
                lambda *a: table(*a, 1),
                table_inputs,
                [grid, status, page],
                trigger_mode="always_last",
            )
        prev_btn.click(
            lambda p, *a: table(*a, max(1, int(p) - 1)), [page, *table_inputs], [grid, status, page]
        )
        next_btn.click(
            lambda p, *a: table(*a, int(p) + 1), [page, *table_inputs], [grid, status, page]
        )
        pickers = [task, quality, hardware, precision, gpus, sources, model, compare_pick]
        reload_btn.click(reload, table_inputs, [grid, status, page, *pickers])
        csv_btn.click(csv_file, table_inputs, csv_out)
        plot_btn.click(plot, [plot_kind, *table_inputs], figure)
        plot_kind.change(plot, [plot_kind, *table_inputs], figure)
        model.change(detail, [model, quality], [detail_html, run_pick])
        run_pick.change(provenance, run_pick, [prov, timeline])
        compare_pick.change(
            compare,
            [compare_pick, *table_inputs],
            [compare_html, compare_plot, compare_note],
        )
        submit_btn.click(submit, [upload, submitter], submit_out)
    return demo


def launch(demo: gr.Blocks, host: str = "127.0.0.1", port: int = 7860, block: bool = True) -> None:
    """Serve ``demo`` on ``host:port`` (``block=False`` returns once the server is up)."""
    demo.queue(default_concurrency_limit=4)
    demo.launch(
        server_name=host,
        server_port=port,
        css=CSS,
        theme=gr.themes.Soft(),
        prevent_thread_lock=not block,
        show_error=True,
        quiet=True,
        footer_links=[],
        ssr_mode=False,
        max_file_size="20mb",
    )


def main() -> None:
    """Serve the store named by ``$MLENERGY_DATA_DIR`` (else ``data``), as a Space does."""
    launch(
        build_app(os.environ.get("MLENERGY_DATA_DIR") or "data"),
        host=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
        port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
    )
