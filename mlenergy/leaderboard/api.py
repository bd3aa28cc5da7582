"""The app's API for programs: named endpoints that take named arguments and return data.

Called with ``gradio_client`` (``Client(url).predict(..., api_name="/leaderboard_table")``);
every endpoint is listed by ``Client(url).view_api()``. Arguments have defaults: a call with
none returns what the page shows when it opens. Answers are JSON data (rows as objects keyed
by column name, numbers in the units their names state, figures as Plotly JSON); a bad
argument raises an error that names it.

Endpoints: ``/leaderboard_table``, ``/filter_choices``, ``/plot``, ``/model_detail``,
``/provenance``, ``/compare``, ``/power_budget``, ``/estimate``, ``/reload``.
"""

from __future__ import annotations

import json

import gradio as gr
import pandas as pd

from mlenergy.errors import UserError
from mlenergy.leaderboard import answers
from mlenergy.leaderboard import power_budget as pb
from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.estimate_tab import estimate_figures, estimator_available

ALL = "all"
"""The ``task`` (or ``quality``: ``"none"``) value meaning "no task filter"."""


def rows_data(rows: pd.DataFrame, columns: list[str]) -> list[dict]:
    """Rows as JSON objects with the given columns (those present); missing values ``None``."""
    cols = [c for c in columns if c in rows.columns]
    return json.loads(rows[cols].to_json(orient="records", date_format="iso"))


def _resolve(
    ctx: AppContext, task: str | None, quality: str | None
) -> tuple[str | None, str | None]:
    """The task and quality figure a call means (``None``: as the page opens)."""
    task = ctx.default_task if task is None else (None if task in ("", ALL) else task)
    if task is not None and task not in ctx.choices["task"]:
        raise gr.Error(
            f"task {task!r} is not in the store; tasks: {', '.join(ctx.choices['task'])}"
            f" (or {ALL!r})"
        )
    quality = (
        ctx.default_quality if quality is None else (None if quality in ("", "none") else quality)
    )
    if quality is not None and quality not in ctx.quality_keys:
        known = ", ".join(ctx.quality_keys) or "none stored"
        raise gr.Error(f"quality {quality!r} is not a stored quality figure; figures: {known}")
    return task, quality


def _query(ctx: AppContext, task: str | None, **values) -> lb.TableQuery:
    sort_by = values.get("sort_by") or lb.DEFAULT_SORT
    if sort_by not in lb.SORTABLE:
        raise gr.Error(f"sort_by {sort_by!r} is not a column; columns: {', '.join(lb.SORTABLE)}")
    page_size = int(values.pop("page_size", lb.PAGE_SIZE) or lb.PAGE_SIZE)
    if not 1 <= page_size <= 1000:
        raise gr.Error(f"page_size {page_size} is out of range; give 1 to 1000")
    return lb.TableQuery(
        task=task,
        hardware=tuple(values.get("hardware") or ()),
        arch=values.get("arch") or ALL,
        precisions=tuple(values.get("precisions") or ()),
        gpu_counts=tuple(int(g) for g in values.get("gpus") or ()),
        source_kinds=tuple(values.get("sources") or ()),
        search=values.get("search") or "",
        max_itl_ms=values.get("max_itl_ms"),
        max_energy_per_token_j=values.get("max_energy_per_token_j"),
        best_only=bool(values.get("best", True)),
        sort_by=sort_by,
        descending=bool(values.get("descending")),
        page=int(values.get("page") or 1),
        page_size=page_size,
    )


def _table_answer(ctx: AppContext, quality: str | None, q: lb.TableQuery) -> dict:
    """The ``/leaderboard_table`` answer: one page of rows as data, and the paging."""
    res = answers.table_result(ctx, quality, q)
    columns = [c.name for c in lb.COLUMNS] + ["quality_link"]
    return {
        "task": q.task,
        "quality": quality,
        "total": res.total,
        "page": res.page,
        "pages": res.pages,
        "columns": columns,
        "rows": rows_data(res.page_rows, columns),
    }


def register_api(ctx: AppContext) -> None:
    """Declare the named endpoints inside the current ``gr.Blocks``."""
    _register_table(ctx)
    _register_views(ctx)
    _register_power(ctx)
    if estimator_available():
        gr.api(_estimate_endpoint, api_name="estimate", concurrency_limit=None)

    def reload() -> dict:
        """Re-read the store if it changed (e.g. after approvals): ``changed`` and ``runs``."""
        changed = ctx.reload()
        return {"changed": changed, "runs": len(ctx.data.runs)}

    gr.api(reload, api_name="reload", concurrency_limit=1)


def _register_table(ctx: AppContext) -> None:
    def leaderboard_table(
        task: str | None = None,
        quality: str | None = None,
        hardware: list[str] | None = None,
        arch: str = ALL,
        precisions: list[str] | None = None,
        gpus: list[int] | None = None,
        sources: list[str] | None = None,
        search: str = "",
        max_itl_ms: float | None = None,
        max_energy_per_token_j: float | None = None,
        best: bool = True,
        sort_by: str = lb.DEFAULT_SORT,
        descending: bool = False,
        page: int = 1,
        page_size: int = lb.PAGE_SIZE,
    ) -> dict:
        """The table's rows as data (one page), with ``total``, ``page`` and ``pages``.

        ``task=None`` and ``quality=None`` mean the page's opening view; ``task="all"`` shows
        every task, ``quality="none"`` attaches no quality figure. ``max_itl_ms`` is a deadline
        on median inter-token latency (ms), ``max_energy_per_token_j`` a budget (J per output
        token); ``best`` keeps each model x hardware x task's lowest-energy configuration.
        """
        task, quality = _resolve(ctx, task, quality)
        q = _query(
            ctx, task, hardware=hardware, arch=arch, precisions=precisions, gpus=gpus,
            sources=sources, search=search, max_itl_ms=max_itl_ms,
            max_energy_per_token_j=max_energy_per_token_j, best=best, sort_by=sort_by,
            descending=descending, page=page, page_size=page_size,
        )  # fmt: skip
        return ctx.data.memo(("api-table", quality, q), lambda: _table_answer(ctx, quality, q))

    def filter_choices() -> dict:
        """The values each filter takes in the store, and the quality figures."""
        return {**ctx.choices, "quality": ctx.quality_keys, "sort_by": list(lb.SORTABLE)}

    def plot(
        kind: str = "latency",
        task: str | None = None,
        quality: str | None = None,
        hardware: list[str] | None = None,
        precisions: list[str] | None = None,
        gpus: list[int] | None = None,
        search: str = "",
        best: bool = True,
    ) -> dict:
        """A Plots-tab figure as Plotly JSON; ``kind``: ``latency``, ``quality``, ``hardware``."""
        if kind not in answers.PLOT_NAMES:
            raise gr.Error(f"kind {kind!r} is not a plot; kinds: {', '.join(answers.PLOT_NAMES)}")
        task, quality = _resolve(ctx, task, quality)
        q = _query(
            ctx, task, hardware=hardware, precisions=precisions, gpus=gpus, search=search, best=best
        )
        fig = answers.plot_figure(ctx, answers.PLOT_NAMES[kind], quality, q)
        return json.loads(fig.to_json())

    gr.api(leaderboard_table, api_name="leaderboard_table", concurrency_limit=None)
    gr.api(filter_choices, api_name="filter_choices", concurrency_limit=None)
    gr.api(plot, api_name="plot", concurrency_limit=None)


def _register_views(ctx: AppContext) -> None:
    def model_detail(model_id: str, quality: str | None = None) -> dict:
        """Every configuration of one model (``rows``) with its run ids (for ``/provenance``)."""
        _, quality = _resolve(ctx, ALL, quality)
        if model_id not in ctx.choices["model_id"]:
            raise gr.Error(f"model_id {model_id!r} is not in the store; see /filter_choices")
        rows = answers.model_rows(ctx, model_id, quality)
        return {
            "model_id": model_id,
            "quality": quality,
            "rows": rows_data(rows, list(rows.columns)),
        }

    def provenance(run_id: str) -> dict:
        """One run's full provenance and its power timeline (``t_s``, ``power_w``; may be null)."""
        record = ctx.data.get_run(run_id or "")
        if record is None:
            raise gr.Error(f"run_id {run_id!r} is not in the store; see /model_detail")
        data = dict(answers.provenance_data(ctx, run_id) or {})
        timeline = record.power_timeline
        data["power_timeline"] = None if timeline is None else {
            "t_s": list(timeline.t_s), "power_w": list(timeline.power_w),
            "energy_source": timeline.energy_source,
        }  # fmt: skip
        return data

    def compare(
        models: list[str],
        task: str | None = None,
        quality: str | None = None,
        max_itl_ms: float | None = None,
        max_energy_per_token_j: float | None = None,
    ) -> dict:
        """2 to 4 models' best configurations under the filters, and a note on missing ones."""
        task, quality = _resolve(ctx, task, quality)
        q = _query(ctx, task, max_itl_ms=max_itl_ms, max_energy_per_token_j=max_energy_per_token_j)
        table, note = answers.compare_table(ctx, list(models or []), quality, q)
        return {"note": note, "rows": rows_data(table.astype(object), list(table.columns))}

    gr.api(model_detail, api_name="model_detail", concurrency_limit=None)
    gr.api(provenance, api_name="provenance", concurrency_limit=None)
    gr.api(compare, api_name="compare", concurrency_limit=None)


def _register_power(ctx: AppContext) -> None:
    def power_budget(
        budget_w: float = pb.DEFAULT_BUDGET_W,
        itl_limit_ms: float = pb.DEFAULT_ITL_MS,
        task: str | None = None,
        pue: float = 1.2,
        host_w_per_gpu: float = 150.0,
        objective: str = "throughput",
    ) -> dict:
        """The best measured configuration per model under a site budget (W) and ITL deadline (ms).

        Rows (most site tokens/s first): ``model_id``, ``gpu``, ``num_gpus``, parallelism,
        ``max_num_seqs``, ``precision``, ``replicas``, ``site_tokens_per_s``, ``site_power_w``,
        ``energy_per_token_j`` (site, PUE and host power included), ``gpu_energy_per_token_j``,
        ``median_itl_ms``, ``source``; ``left_out``: models that fit nothing, with the reason.
        """
        task, _ = _resolve(ctx, task, "none")
        q = pb.BudgetQuery(
            float(budget_w), float(itl_limit_ms), task or "", float(pue), float(host_w_per_gpu),
            objective,
        )  # fmt: skip
        try:
            answer = pb.best_per_model(ctx, q)
        except UserError as exc:
            raise gr.Error(exc.message) from None
        return {
            "task": q.task,
            "budget_w": q.budget_w,
            "itl_limit_ms": q.itl_limit_ms,
            "rows": rows_data(answer.table, list(pb.COLUMNS)),
            "left_out": [{"model_id": m, "reason": why} for m, why in answer.left_out],
        }

    gr.api(power_budget, api_name="power_budget", concurrency_limit=None)


def _estimate_endpoint(
    model: str = "meta-llama/Llama-3.1-8B-Instruct",
    gpu: str = "H100-SXM5-80GB",
    batch_size: int = 32,
    input_tokens: int = 512,
    output_tokens: int = 512,
    precision: str = "bfloat16",
    num_gpus: int = 1,
    clock_mhz: float = 0,
) -> dict:
    """The estimator's figures for one configuration (J, s, W; tensor parallel over num_gpus).

    ``model`` is a reference model id (see the Estimator tab's picker), never a server path.
    """
    if model.endswith(".json") or model.startswith(("/", ".", "~")) or "\\" in model:
        raise gr.Error(f"model {model!r} is not a model id; give a reference model id")
    try:
        return estimate_figures(
            model, gpu, float(batch_size), float(input_tokens), float(output_tokens),
            precision or None, int(num_gpus), float(clock_mhz) or None,
        )  # fmt: skip
    except UserError as exc:
        raise gr.Error(exc.message) from None
