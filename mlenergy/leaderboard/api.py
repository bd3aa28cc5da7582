"""The app's API for programs: named functions that take named arguments and return data.

:func:`api_functions` builds them once per app; the same function objects answer both ways
programs ask: as Gradio endpoints (``gradio_client``:
``Client(url).predict(..., api_name="/leaderboard_table")``, listed by
``Client(url).view_api()``; :func:`register_api`) and as the plain JSON API
(``GET /api/v1/...``, :mod:`mlenergy.leaderboard.json_api`). Arguments have defaults: a call
with none returns what the page shows when it opens (measured GPU rows, the opening task and
its quality figure). Answers are JSON data (rows as objects keyed by column name, numbers in
the units their names state, figures as Plotly JSON); a bad argument raises an error that
names it.

Functions: ``leaderboard_table``, ``filter_choices``, ``plot``, ``model_detail``,
``provenance``, ``compare``, ``power_budget``, ``models``, ``reference``, ``estimate`` (when
the estimator is installed) and ``reload`` (Gradio only).
"""

from __future__ import annotations

import functools
import hashlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from mlenergy.leaderboard import answers, catalog
from mlenergy.leaderboard import power_budget as pb
from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.api_args import (
    bool_arg,
    endpoint,
    float_arg,
    int_arg,
    ints_arg,
    kind_name,
    refuse,
    strings_arg,
    text_arg,
)
from mlenergy.leaderboard.context import AppContext, ViewChoices, normal_sources
from mlenergy.leaderboard.estimate_tab import (
    PRECISIONS,
    estimate_figures,
    estimator_choices,
)
from mlenergy.optimize.site import SITE_HOST_W_PER_GPU, SITE_PUE
from mlenergy.store.validation import load_json

ALL = "all"
"""The ``task`` (or ``quality``: ``"none"``) value meaning "no task filter"."""
MAX_CONFIG_BYTES = 1_000_000
"""Largest model config (``config_json``) the estimator endpoint takes."""


def rows_data(rows: pd.DataFrame, columns: list[str]) -> list[dict]:
    """Rows as JSON objects with the given columns (those present); missing values ``None``."""
    cols = [c for c in columns if c in rows.columns]
    return json.loads(rows[cols].to_json(orient="records", date_format="iso"))


def _view(ctx: AppContext, sources: tuple[str, ...]) -> ViewChoices:
    """The filter bar's choices for ``sources`` (``()``: every energy source)."""
    return ctx.view(sources or tuple(ctx.choices["source_class"]) or None)


def _sources(sources: Any) -> tuple[str, ...]:
    """The energy sources a call means, as the page's *Energy source* filter.

    None or an empty list: the page's default (:data:`~.query.DEFAULT_SOURCES`, measured GPU
    rows); ``["all"]``: every source (``()``, no filter); else source classes or kinds.
    """
    picked = strings_arg("sources", sources)
    if ALL in picked:
        if len(picked) > 1:
            raise refuse(f"sources {ALL!r} means every source; give it alone")
        return ()
    known = (*lb.SOURCE_CLASSES, *(k for k in lb.SOURCE_KINDS if k not in lb.SOURCE_CLASSES))
    for source in picked:
        if source not in known:
            raise refuse(
                f"sources {source!r} is not an energy source; sources: {', '.join(known)}"
                f" (or {ALL!r})"
            )
    return normal_sources(picked)


def _resolve(
    ctx: AppContext, task: str | None, quality: str | None, sources: tuple[str, ...]
) -> tuple[str | None, str | None]:
    """The task and quality figure a call means (``None``: as the page opens).

    ``task=None`` is the page's opening task for the sources asked for; ``quality=None`` the
    figure the page attaches to the task (LMArena for chat, GPQA-Diamond for ``gpqa``), else
    the opening figure.
    """
    task = text_arg("task", task, optional=True)
    quality = text_arg("quality", quality, optional=True)
    view = _view(ctx, sources)
    task = view.default_task if task is None else (None if task in ("", ALL) else task)
    if task is not None and task not in ctx.choices["task"]:
        raise refuse(
            f"task {task!r} is not in the store; tasks: {', '.join(ctx.choices['task'])}"
            f" (or {ALL!r})"
        )
    if quality is None:
        quality = view.quality_for(task) or view.quality_for(view.default_task)
    elif quality in ("", "none"):
        quality = None
    if quality is not None and quality not in ctx.quality_keys:
        known = ", ".join(ctx.quality_keys) or "none stored"
        raise refuse(f"quality {quality!r} is not a stored quality figure; figures: {known}")
    return task, quality


def _query(ctx: AppContext, task: str | None, sources: tuple[str, ...], **values) -> lb.TableQuery:
    """The table query a call means; every argument checked for its type and range."""
    sort_by = text_arg("sort_by", values.get("sort_by", lb.DEFAULT_SORT)) or lb.DEFAULT_SORT
    if sort_by not in lb.SORTABLE:
        raise refuse(f"sort_by {sort_by!r} is not a column; columns: {', '.join(lb.SORTABLE)}")
    method = text_arg("method", values.get("method", ALL)) or ALL
    if method != ALL and method not in lb.METHODS:
        raise refuse(f"method {method!r} is not a method; methods: {', '.join(lb.METHODS)}")
    return lb.TableQuery(
        task=task,
        hardware=strings_arg("hardware", values.get("hardware")),
        arch=text_arg("arch", values.get("arch", ALL)) or ALL,
        precisions=strings_arg("precisions", values.get("precisions")),
        gpu_counts=ints_arg("gpus", values.get("gpus"), 1, 1_000_000),
        source_kinds=sources,
        methods=() if method == ALL else (method,),
        search=text_arg("search", values.get("search", "")) or "",
        max_itl_ms=float_arg("max_itl_ms", values.get("max_itl_ms"), 0, 1e9, optional=True),
        max_energy_per_token_j=float_arg(
            "max_energy_per_token_j", values.get("max_energy_per_token_j"), 0, 1e9, optional=True
        ),
        best_only=bool_arg("best", values.get("best", True)),
        sort_by=sort_by,
        descending=bool_arg("descending", values.get("descending", False)),
        page=int_arg("page", values.get("page", 1), 1, 1_000_000),
        page_size=int_arg("page_size", values.get("page_size", lb.PAGE_SIZE), 1, 1000),
    )


def _table_answer(ctx: AppContext, quality: str | None, q: lb.TableQuery) -> dict:
    """The ``leaderboard_table`` answer: one page of rows as data, and the paging."""
    res = answers.table_result(ctx, quality, q)
    if q.page > res.pages:
        raise refuse(f"page {q.page} is out of range; this query has {res.pages} page(s)")
    columns = [c.name for c in lb.COLUMNS]
    columns += ["quality_link", "host_bound", "unverified", "unverified_reasons"]
    return {
        "task": q.task,
        "quality": quality,
        "sources": list(q.source_kinds) or [ALL],
        "total": res.total,
        "page": res.page,
        "pages": res.pages,
        "columns": columns,
        "rows": rows_data(res.page_rows, columns),
    }


CONCURRENCY_LIMITS: dict[str, int | None] = {"reload": 1}
"""Events of one Gradio endpoint run at once (``None``, the rest: no limit; all read-only)."""

GRADIO_ONLY = ("reload",)
"""Functions the JSON API does not serve (``reload`` is an action, not a cacheable answer)."""


def api_functions(ctx: AppContext) -> dict[str, Callable[..., dict]]:
    """The API's functions by name, each guarded by :func:`endpoint` (build once per app).

    The Gradio endpoints (:func:`register_api`) and the JSON API
    (:mod:`mlenergy.leaderboard.json_api`) serve these very objects, so both answer alike.
    """
    functions: dict[str, Callable[..., dict]] = {
        **_table_functions(ctx),
        **_view_functions(ctx),
        **_power_functions(ctx),
        **_catalog_functions(ctx),
        "estimate": _estimate_endpoint,
    }

    def reload() -> dict:
        """Re-read the store if it changed (e.g. after approvals): ``changed`` and ``runs``."""
        changed = ctx.reload()
        return {"changed": changed, "runs": len(ctx.data.runs)}

    functions["reload"] = reload
    return {name: endpoint(name)(fn) for name, fn in functions.items()}


def register_api(
    ctx: AppContext, functions: dict[str, Callable[..., dict]] | None = None
) -> dict[str, Callable[..., dict]]:
    """Declare the named Gradio endpoints inside the current ``gr.Blocks``.

    Args:
        ctx: The app's state.
        functions: From :func:`api_functions` (built here when not given).

    Returns:
        The functions declared, by name.
    """
    functions = functions if functions is not None else api_functions(ctx)
    for name, fn in functions.items():
        gr.api(fn, api_name=name, concurrency_limit=CONCURRENCY_LIMITS.get(name))
    return functions


def _table_functions(ctx: AppContext) -> dict[str, Callable[..., dict]]:
    def leaderboard_table(
        task: str | None = None,
        quality: str | None = None,
        hardware: list[str] | None = None,
        arch: str = ALL,
        precisions: list[str] | None = None,
        gpus: list[int] | None = None,
        sources: list[str] | None = None,
        method: str = ALL,
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

        With no argument: what the page shows when it opens. ``sources`` (energy-source
        classes such as ``measured-gpu``, ``estimated``, or kinds such as ``measured``)
        defaults to measured GPU rows; ``["all"]`` shows every source. ``task=None`` and
        ``quality=None`` mean the page's opening task and its quality figure; ``task="all"``
        shows every task, ``quality="none"`` attaches no quality figure. ``max_itl_ms`` is a
        deadline on median inter-token latency (ms), ``max_energy_per_token_j`` a budget (J
        per output token); ``best`` keeps each model x hardware x task's lowest-energy
        configuration.
        """
        chosen = _sources(sources)
        task, quality = _resolve(ctx, task, quality, chosen)
        q = _query(
            ctx, task, chosen, hardware=hardware, arch=arch, precisions=precisions, gpus=gpus,
            method=method, search=search, max_itl_ms=max_itl_ms,
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
        sources: list[str] | None = None,
        search: str = "",
        best: bool = True,
    ) -> dict:
        """A Plots-tab figure as Plotly JSON; ``kind``: ``latency``, ``quality``, ``hardware``."""
        if text_arg("kind", kind) not in answers.PLOT_NAMES:
            raise refuse(f"kind {kind!r} is not a plot; kinds: {', '.join(answers.PLOT_NAMES)}")
        chosen = _sources(sources)
        task, quality = _resolve(ctx, task, quality, chosen)
        q = _query(
            ctx, task, chosen, hardware=hardware, precisions=precisions, gpus=gpus,
            search=search, best=best,
        )  # fmt: skip
        key = ("api-plot", kind, quality, q)
        return ctx.data.memo(key, lambda: _figure_data(ctx, kind, quality, q))

    return {"leaderboard_table": leaderboard_table, "filter_choices": filter_choices, "plot": plot}


def _figure_data(ctx: AppContext, kind: str, quality: str | None, q: lb.TableQuery) -> dict:
    return json.loads(answers.plot_figure(ctx, answers.PLOT_NAMES[kind], quality, q).to_json())


def _view_functions(ctx: AppContext) -> dict[str, Callable[..., dict]]:
    def model_detail(model_id: str, quality: str | None = None) -> dict:
        """Every configuration of one model (``rows``) with its run ids (for ``/provenance``)."""
        _, quality = _resolve(ctx, None, quality, lb.DEFAULT_SOURCES)
        if text_arg("model_id", model_id) not in ctx.choices["model_id"]:
            raise refuse(f"model_id {model_id!r} is not in the store; see /filter_choices")

        def _answer() -> dict:
            rows = answers.model_rows(ctx, model_id, quality)
            return {
                "model_id": model_id,
                "quality": quality,
                "rows": rows_data(rows, list(rows.columns)),
            }

        return ctx.data.memo(("api-detail", model_id, quality), _answer)

    def provenance(run_id: str) -> dict:
        """One run's full provenance and its power timeline (``t_s``, ``power_w``; may be null)."""
        record = ctx.data.get_run(text_arg("run_id", run_id) or "")
        if record is None:
            raise refuse(f"run_id {run_id!r} is not in the store; see /model_detail")

        def _answer() -> dict:
            data = dict(answers.provenance_data(ctx, run_id) or {})
            timeline = record.power_timeline
            data["power_timeline"] = None if timeline is None else {
                "t_s": list(timeline.t_s), "power_w": list(timeline.power_w),
                "energy_source": timeline.energy_source,
            }  # fmt: skip
            return data

        return ctx.data.memo(("api-provenance", run_id), _answer)

    def compare(
        models: list[str],
        task: str | None = None,
        quality: str | None = None,
        sources: list[str] | None = None,
        max_itl_ms: float | None = None,
        max_energy_per_token_j: float | None = None,
    ) -> dict:
        """2 to 4 models' best configurations under the filters, and a note on missing ones."""
        chosen = _sources(sources)
        task, quality = _resolve(ctx, task, quality, chosen)
        q = _query(
            ctx, task, chosen, max_itl_ms=max_itl_ms, max_energy_per_token_j=max_energy_per_token_j
        )
        picked = list(strings_arg("models", models))
        table, note = answers.compare_table(ctx, picked, quality, q)
        return {"note": note, "rows": rows_data(table.astype(object), list(table.columns))}

    return {"model_detail": model_detail, "provenance": provenance, "compare": compare}


def _power_functions(ctx: AppContext) -> dict[str, Callable[..., dict]]:
    def power_budget(
        budget_w: float = pb.DEFAULT_BUDGET_W,
        itl_limit_ms: float = pb.DEFAULT_ITL_MS,
        task: str | None = None,
        pue: float = SITE_PUE,
        host_w_per_gpu: float = SITE_HOST_W_PER_GPU,
        objective: str = "throughput",
    ) -> dict:
        """The best measured configuration per model under a site budget (W) and ITL deadline (ms).

        Rows (most site tokens/s first): ``model_id``, ``gpu``, ``num_gpus``, parallelism,
        ``max_num_seqs``, ``precision``, ``replicas``, ``site_tokens_per_s``, ``site_power_w``,
        ``energy_per_token_j`` (site, PUE and host power included), ``gpu_energy_per_token_j``,
        ``median_itl_ms``, ``source``; ``left_out``: models that fit nothing, with the reason.
        """
        task, _ = _resolve(ctx, task, "none", ())  # the opening task over every row
        q = pb.BudgetQuery(
            float_arg("budget_w", budget_w, 0, 1e12),
            float_arg("itl_limit_ms", itl_limit_ms, 0, 1e9),
            task or "",
            float_arg("pue", pue, 0, 100),
            float_arg("host_w_per_gpu", host_w_per_gpu, 0, 1e6),
            text_arg("objective", objective),
        )

        def _answer() -> dict:
            answer = pb.best_per_model(ctx, q)
            return {
                "task": q.task,
                "budget_w": q.budget_w,
                "itl_limit_ms": q.itl_limit_ms,
                "rows": rows_data(answer.table, list(pb.COLUMNS)),
                "left_out": [{"model_id": m, "reason": why} for m, why in answer.left_out],
            }

        return ctx.data.memo(("api-power", q), _answer)

    return {"power_budget": power_budget}


def _catalog_functions(ctx: AppContext) -> dict[str, Callable[..., dict]]:
    def models() -> dict:
        """Every model on the board, and the reference model ids ``/estimate`` takes.

        ``models``: per model id its runs, tasks, hardware, energy sources and layers;
        ``estimator_models``: the ids ``/estimate`` takes.
        """
        return ctx.data.memo(("api-models",), lambda: catalog.models_answer(ctx))

    def reference() -> dict:
        """The reference data that ships with mlenergy and shows beside the store.

        The reference runs on the board (counts, tasks, hardware, energy sources,
        submitters) and each shipped file with its source, licence and date.
        """
        return ctx.data.memo(("api-reference",), lambda: catalog.reference_answer(ctx))

    return {"models": models, "reference": reference}


@functools.cache
def _estimator_names() -> tuple[frozenset[str], frozenset[str]]:
    """Reference model ids and catalog GPU names: all ``/estimate`` takes as names."""
    choices = estimator_choices()
    return frozenset(choices["models"]), frozenset(choices["gpus"])


UPLOADED_NAME = "uploaded config.json (sha256 {digest})"
"""How an answer names an uploaded config (never by the server file it was saved in)."""


def _uploaded_config(text: str) -> tuple[str, str]:
    """Save an uploaded config.json under a server-chosen name; return that path and its name.

    The file name is the SHA-256 of the content, so the estimator's memo of a path always means
    the same config. The client never names a server file, and answers name the upload by
    :data:`UPLOADED_NAME`.
    """
    raw = text.encode("utf-8")
    if len(raw) > MAX_CONFIG_BYTES:
        raise refuse(f"config_json is over {MAX_CONFIG_BYTES // 1000} kB")
    try:
        config = load_json(text)
    except ValueError:
        raise refuse("config_json is not a JSON object (a model's config.json)") from None
    if not isinstance(config, dict):
        raise refuse("config_json is not a JSON object (a model's config.json)")
    folder = Path(tempfile.gettempdir()) / "mlenergy-estimate-configs"
    folder.mkdir(mode=0o700, exist_ok=True)
    digest = hashlib.sha256(raw).hexdigest()
    path = folder / f"{digest}.json"
    path.write_bytes(raw)
    return str(path), UPLOADED_NAME.format(digest=digest)


def _estimate_endpoint(
    model: str = "meta-llama/Llama-3.1-8B-Instruct",
    gpu: str = "H100-SXM5-80GB",
    batch_size: int = 32,
    input_tokens: int = 512,
    output_tokens: int = 512,
    precision: str = "bfloat16",
    num_gpus: int = 1,
    clock_mhz: float = 0,
    config_json: str = "",
) -> dict:
    """The estimator's figures for one configuration (J, s, W; tensor parallel over num_gpus).

    ``model`` is a reference model id (see the Estimator tab's picker) and ``gpu`` a catalog
    GPU name, both exactly as listed; or upload a model's config.json as text in
    ``config_json`` (then ``model`` is ignored, and the answer names it
    ``uploaded config.json (sha256 ...)``). No argument ever names a server file.
    """
    models, gpus = _estimator_names()
    gpu_name = text_arg("gpu", gpu)
    if gpu_name not in gpus:
        raise refuse(f"gpu {gpu_name!r} is not a catalog GPU; GPUs: {', '.join(sorted(gpus))}")
    if not isinstance(config_json, str):
        raise refuse(f"config_json must be text (a config.json), not {kind_name(config_json)}")
    uploaded = ""
    if config_json:
        target, uploaded = _uploaded_config(config_json)
    else:
        target = text_arg("model", model) or ""
        if target not in models:
            raise refuse(
                f"model {target[:100]!r} is not a model id of the reference catalog; pick one "
                "from the Estimator tab's list, or upload a config.json as config_json"
            )
    chosen = text_arg("precision", precision, optional=True) or None
    if chosen is not None and chosen not in PRECISIONS:
        raise refuse(f"precision {chosen!r} is not one of {', '.join(PRECISIONS)}")
    try:
        answer = estimate_figures(
            target, gpu_name, float(int_arg("batch_size", batch_size, 1, 1_000_000)),
            float(int_arg("input_tokens", input_tokens, 0, 10_000_000)),
            float(int_arg("output_tokens", output_tokens, 1, 10_000_000)), chosen,
            int_arg("num_gpus", num_gpus, 1, 1024),
            float_arg("clock_mhz", clock_mhz, 0, 10_000) or None,
        )  # fmt: skip
    finally:
        if uploaded:  # the uploaded copy: its answer is memoised, the file not needed
            Path(target).unlink(missing_ok=True)
    if not uploaded:
        return answer
    return json.loads(json.dumps(answer).replace(json.dumps(target)[1:-1], uploaded))
