"""The app's answers, shared by the UI and the API: table pages, figures, detail, compare.

Each answer depends only on the store snapshot and its arguments, so it is memoised per
snapshot (:meth:`~mlenergy.leaderboard.data.LeaderboardData.memo`): a popular view is
computed once, not once per visitor. No widgets here.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import plotly.graph_objects as go

from mlenergy.leaderboard import plots as plots
from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard import views as views
from mlenergy.leaderboard.columns import with_footprint
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.footprint_view import ViewFootprint
from mlenergy.leaderboard.html import render_frame, render_table

PLOTS = ("Energy vs quality", "Energy vs latency", "Tokens/s/W by hardware")
"""The Plots tab's figures, by their picker label."""

PLOT_NAMES = {"quality": PLOTS[0], "latency": PLOTS[1], "hardware": PLOTS[2]}
"""Short API names of :data:`PLOTS`."""


TABLE_FRAME_COLUMNS = (
    *(c.name for c in lb.COLUMNS),
    *plots.PLOT_COLUMNS,
    *("_group", "_search", "quality_link", "arch_kind", "source_kind", "dtype", "task"),
    *("source_class", "apart", "method", "method_kind", "layer"),
    *("marks_why", "host_bound", "unverified", "unverified_reasons"),
)
"""The columns table pages, CSV files and plots read: a page copies only these."""


def table_frame(ctx: AppContext, quality_key: str | None) -> pd.DataFrame:
    """The prepared runs narrowed to :data:`TABLE_FRAME_COLUMNS` (memoised per figure)."""

    def _narrow() -> pd.DataFrame:
        frame = ctx.frame(quality_key)
        cols = list(dict.fromkeys(c for c in TABLE_FRAME_COLUMNS if c in frame.columns))
        return frame[cols]

    return ctx.data.memo(("table-frame", quality_key or None), _narrow)


def table_result(ctx: AppContext, quality_key: str | None, q: lb.TableQuery) -> lb.TableResult:
    """One table request over the snapshot (memoised)."""
    key = ("table", quality_key or None, q)
    return ctx.data.memo(key, lambda: lb.query_table(table_frame(ctx, quality_key), q))


def table_status(ctx: AppContext, res: lb.TableResult) -> str:
    """The line above the table: rows, page, where the rows come from."""
    status = f"{res.total} rows · page {res.page} of {res.pages}"
    runs = ctx.data.runs
    layers = runs["layer"] if "layer" in runs.columns else pd.Series(dtype=object)
    n_ref, n_store = int((layers == "reference").sum()), int((layers != "reference").sum())
    if n_ref:
        status += f" · {n_ref} ML.ENERGY reference runs (shipped, read-only)"
    if n_store:
        status += f" · {n_store} runs from the store"
    elif not runs.empty:
        status += " · your runs (`mlenergy bench`) and approved submissions join them"
    else:
        status += " · the store is empty: measure a run with `mlenergy bench`"
    return status


def table_page(
    ctx: AppContext,
    quality_key: str | None,
    q: lb.TableQuery,
    columns: tuple[str, ...] | None = None,
    footprint: ViewFootprint | None = None,
) -> tuple[str, str, int]:
    """The table page as ``(html, status line, page shown)`` (memoised).

    Args:
        ctx: The app's state.
        quality_key: Quality figure to attach.
        q: The query.
        columns: Names of the columns to show (``None``: all; the model column always).
        footprint: Carbon and cost settings; when active, their columns follow the energy
            column (derived from the page's rows, see :mod:`.footprint_view`).
    """
    shown = tuple(
        c for c in lb.COLUMNS if columns is None or c.name in columns or c.name == "model_id"
    )
    view = footprint if footprint is not None and footprint.active else None
    if view is not None:
        shown = with_footprint(shown)

    def _render() -> tuple[str, str, int]:
        res = table_result(ctx, quality_key, q)
        rows = view.attach(res.page_rows) if view is not None else res.page_rows
        return render_table(rows, shown), table_status(ctx, res), res.page

    setting = view.key() if view is not None else None
    key = ("table-html", quality_key or None, q, tuple(c.name for c in shown), setting)
    return ctx.data.memo(key, _render)


def table_csv(
    ctx: AppContext,
    quality_key: str | None,
    q: lb.TableQuery,
    footprint: ViewFootprint | None = None,
) -> str:
    """Every row of the query (all pages) as CSV text, with carbon and cost when set (memoised)."""
    view = footprint if footprint is not None and footprint.active else None

    def _csv() -> str:
        rows = table_result(ctx, quality_key, q).rows
        return lb.to_csv(view.attach(rows) if view is not None else rows)

    setting = view.key() if view is not None else None
    return ctx.data.memo(("csv", quality_key or None, replace(q, page=1), setting), _csv)


def plot_rows(ctx: AppContext, quality_key: str | None, q: lb.TableQuery) -> pd.DataFrame:
    """The rows a plot draws: the table's rows (every page) when ``best_only``, else all."""
    if q.best_only:
        return table_result(ctx, quality_key, replace(q, page=1)).rows
    return lb.filter_runs(table_frame(ctx, quality_key), q)


def plot_figure(ctx: AppContext, kind: str, quality_key: str | None, q: lb.TableQuery) -> go.Figure:
    """The Plots tab's figure ``kind`` (one of :data:`PLOTS`) over the filtered rows (memoised).

    With *Best configuration* ticked the points are the table's rows; the title says which.
    """
    q = replace(q, page=1, sort_by=lb.DEFAULT_SORT, descending=False)

    def _draw() -> go.Figure:
        rows = plot_rows(ctx, quality_key, q)
        if kind == PLOTS[0]:
            hib = views.higher_is_better(ctx.data.quality, quality_key) if quality_key else True
            label = quality_key or "quality (pick a quality figure)"
            fig = plots.energy_vs_quality(rows, label, hib)
        elif kind == PLOTS[2]:
            fig = plots.efficiency_by_hardware(rows)
        else:
            fig = plots.energy_vs_latency(rows)
        which = (
            "best configuration per model x hardware, as the table"
            if q.best_only
            else ("every configuration")
        )
        if kind == PLOTS[0]:
            which += f"; {int(rows['quality'].notna().sum())} with a quality figure"
        title = fig.layout.title.text or ""
        fig.update_layout(title=f"{title}<br><sup>{len(rows)} rows: {which}</sup>")
        return fig

    return ctx.data.memo(("plot", kind, quality_key or None, q), _draw)


def top_models(ctx: AppContext, n: int) -> list[str]:
    """The models of the first ``n`` rows of the opening view (detail and compare open on them)."""
    view = ctx.view(None)
    q = lb.TableQuery(task=view.default_task, source_kinds=lb.DEFAULT_SOURCES)
    rows = table_result(ctx, view.quality_for(view.default_task), q).page_rows
    return list(dict.fromkeys(rows["model_id"]))[:n]


def model_rows(ctx: AppContext, model_id: str, quality_key: str | None) -> pd.DataFrame:
    """Every configuration of ``model_id`` (see :func:`.views.model_configs`)."""
    key = ("detail", model_id, quality_key or None)
    return ctx.data.memo(key, lambda: views.model_configs(ctx.frame(quality_key), model_id))


def model_runs(ctx: AppContext, model_id: str, quality_key: str | None) -> list[tuple[str, str]]:
    """The run picker's choices for one model: ``(label, run_id)``."""
    rows = model_rows(ctx, model_id, quality_key)
    return [
        (f"{r.task} · {r.hardware} x{r.accelerator_count} · {r.run_id}", str(r.run_id))
        for r in rows.itertuples()
    ]


def model_detail_html(ctx: AppContext, model_id: str, quality_key: str | None) -> str:
    """The model-detail table as escaped HTML."""
    return render_frame(model_rows(ctx, model_id, quality_key), "lb-detail", "Pick a model.")


def compare_table(
    ctx: AppContext, models: list[str], quality_key: str | None, q: lb.TableQuery
) -> tuple[pd.DataFrame, str]:
    """Models side by side under the filters (search ignored), and a note on missing ones.

    Returns:
        The comparison (see :func:`~mlenergy.leaderboard.views.compare_models`) and a note:
        what to pick, or why a model has no column of figures and which tasks it has.
    """
    models = list(models or [])[:4]
    frame = ctx.frame(quality_key)
    rows = lb.filter_runs(frame, replace(q, search=""))
    table = views.compare_models(rows, models, q.max_itl_ms, q.max_energy_per_token_j)
    notes = [] if len(models) >= 2 else ["Pick 2 to 4 models."]
    shown = set(rows["model_id"])
    for model in models:
        if model in shown:
            continue
        tasks = sorted(frame.loc[frame["model_id"] == model, "task"].unique().tolist())
        where = f"task {q.task!r}" if q.task else "these filters"
        if not tasks:
            notes.append(f"{model} has no runs in the store.")
        elif q.task and q.task not in tasks:
            notes.append(
                f"{model} has no runs for {where}; its tasks: {', '.join(tasks)} "
                "(pick one in the Task filter)."
            )
        else:
            notes.append(f"{model} has no configuration under {where} and limits.")
    return table, " ".join(notes)


def compare_view(
    ctx: AppContext, models: list[str], quality_key: str | None, q: lb.TableQuery
) -> tuple[str, go.Figure, str]:
    """The Compare tab: ``(html table, bar chart, note)``."""
    table, note = compare_table(ctx, models, quality_key, q)
    return render_frame(table, "lb-compare"), plots.compare_bars(table), note


def provenance_data(ctx: AppContext, run_id: str) -> dict | None:
    """A run's provenance as JSON data (memoised; ``None`` for an unknown run)."""

    def _build() -> dict | None:
        record = ctx.data.get_run(run_id or "")
        return None if record is None else views.run_provenance(record)

    return ctx.data.memo(("provenance", run_id or ""), _build)


def provenance(ctx: AppContext, run_id: str) -> tuple[dict | None, go.Figure]:
    """A run's provenance as JSON data and its power timeline (``None`` and an empty figure)."""

    def _figure() -> go.Figure:
        record = ctx.data.get_run(run_id or "")
        if record is None:
            return plots.power_timeline(None)
        return plots.power_timeline(record.power_timeline, f"Power timeline of {record.run_id}")

    figure = ctx.data.memo(("timeline", run_id or ""), _figure)
    return provenance_data(ctx, run_id), figure
