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

import functools
import hashlib
import json
import logging
import math
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import gradio as gr
import pandas as pd

from mlenergy.errors import UserError
from mlenergy.leaderboard import answers
from mlenergy.leaderboard import power_budget as pb
from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.estimate_tab import (
    PRECISIONS,
    estimate_figures,
    estimator_available,
    estimator_choices,
)
from mlenergy.optimize.site import SITE_HOST_W_PER_GPU, SITE_PUE

ALL = "all"
"""The ``task`` (or ``quality``: ``"none"``) value meaning "no task filter"."""
LOG = logging.getLogger("mlenergy.leaderboard.api")
LOGGED_INPUT_CHARS = 200
"""A refused call's arguments are logged cut to this many characters."""
MAX_LIST_ITEMS = 200
"""Most items a list argument may hold."""
MAX_TEXT_CHARS = 500
"""Longest text argument."""
MAX_CONFIG_BYTES = 1_000_000
"""Largest model config (``config_json``) the estimator endpoint takes."""
_SERVER_PATH = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?[/\\](?:[\w.\-]+[/\\])+[\w.\-]*")
"""An absolute file path in a message (``/srv/app/x.json``), never shown to a client."""
_F = TypeVar("_F", bound=Callable[..., Any])


def refuse(message: str) -> gr.Error:
    """The error a client sees: one line, no server path, no traceback in the log."""
    return gr.Error(_SERVER_PATH.sub("<server path>", message)[:1000], print_exception=False)


def _logged(args: tuple, kwargs: dict) -> str:
    text = repr({**{str(i): a for i, a in enumerate(args)}, **kwargs})
    return text if len(text) <= LOGGED_INPUT_CHARS else text[: LOGGED_INPUT_CHARS - 1] + "…"


def endpoint(name: str) -> Callable[[_F], _F]:
    """Guard an endpoint: a bad call is one log line (input cut short) and one clean error.

    ``gr.Error`` and :class:`UserError` keep their message (server paths removed); anything
    else becomes a generic message naming the endpoint, never Python's own text.
    """

    def wrap(fn: _F) -> _F:
        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except gr.Error as exc:
                message = str(exc.message)
            except UserError as exc:
                message = exc.message
            except Exception as exc:  # a bug or an input no check foresaw: no internals out
                LOG.warning(
                    "/%s failed (%s) on %s", name, type(exc).__name__, _logged(args, kwargs)
                )
                raise refuse(f"/{name} could not answer these arguments") from None
            LOG.info("/%s refused: %s; input %s", name, message[:200], _logged(args, kwargs))
            raise refuse(message) from None

        return guarded  # type: ignore[return-value]

    return wrap


def text_arg(name: str, value: Any, *, optional: bool = False) -> str | None:
    """A text argument (``None`` allowed when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise refuse(f"{name} must be text, not {_kind(value)}")
    if len(value) > MAX_TEXT_CHARS:
        raise refuse(f"{name} is longer than {MAX_TEXT_CHARS} characters")
    return value


def strings_arg(name: str, value: Any) -> tuple[str, ...]:
    """A list of texts (``None``: empty); a bare string is an error, not a list of letters."""
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise refuse(f"{name} must be a list of texts, not {_kind(value)}")
    if len(value) > MAX_LIST_ITEMS:
        raise refuse(f"{name} has more than {MAX_LIST_ITEMS} items")
    return tuple(text_arg(f"{name}[{i}]", v) or "" for i, v in enumerate(value))


def int_arg(name: str, value: Any, low: int, high: int) -> int:
    """A whole number in ``[low, high]`` (a float with no fraction is accepted)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise refuse(f"{name} must be a whole number, not {_kind(value)}")
    if not low <= value <= high:
        raise refuse(f"{name} {value} is out of range; give {low} to {high}")
    return value


def ints_arg(name: str, value: Any, low: int, high: int) -> tuple[int, ...]:
    """A list of whole numbers (``None``: empty)."""
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise refuse(f"{name} must be a list of whole numbers, not {_kind(value)}")
    if len(value) > MAX_LIST_ITEMS:
        raise refuse(f"{name} has more than {MAX_LIST_ITEMS} items")
    return tuple(int_arg(f"{name}[{i}]", v, low, high) for i, v in enumerate(value))


def float_arg(
    name: str, value: Any, low: float, high: float, *, optional: bool = False
) -> float | None:
    """A finite number in ``[low, high]`` (``None`` allowed when ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise refuse(f"{name} must be a number, not {_kind(value)}")
    number = float(value)
    if not math.isfinite(number) or not low <= number <= high:
        raise refuse(f"{name} {value!r} is out of range; give {low:g} to {high:g}")
    return number


def bool_arg(name: str, value: Any) -> bool:
    """A true/false argument (not a string, not a number)."""
    if not isinstance(value, bool):
        raise refuse(f"{name} must be true or false, not {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    names = {str: "text", list: "a list", tuple: "a list", dict: "an object", bool: "true/false"}
    return (
        "null"
        if value is None
        else names.get(
            type(value), "a number" if isinstance(value, int | float) else "another type"
        )
    )


def rows_data(rows: pd.DataFrame, columns: list[str]) -> list[dict]:
    """Rows as JSON objects with the given columns (those present); missing values ``None``."""
    cols = [c for c in columns if c in rows.columns]
    return json.loads(rows[cols].to_json(orient="records", date_format="iso"))


def _resolve(
    ctx: AppContext, task: str | None, quality: str | None
) -> tuple[str | None, str | None]:
    """The task and quality figure a call means (``None``: as the page opens)."""
    task = text_arg("task", task, optional=True)
    quality = text_arg("quality", quality, optional=True)
    task = ctx.default_task if task is None else (None if task in ("", ALL) else task)
    if task is not None and task not in ctx.choices["task"]:
        raise refuse(
            f"task {task!r} is not in the store; tasks: {', '.join(ctx.choices['task'])}"
            f" (or {ALL!r})"
        )
    quality = (
        ctx.default_quality if quality is None else (None if quality in ("", "none") else quality)
    )
    if quality is not None and quality not in ctx.quality_keys:
        known = ", ".join(ctx.quality_keys) or "none stored"
        raise refuse(f"quality {quality!r} is not a stored quality figure; figures: {known}")
    return task, quality


def _query(ctx: AppContext, task: str | None, **values) -> lb.TableQuery:
    """The table query a call means; every argument checked for its type and range."""
    sort_by = text_arg("sort_by", values.get("sort_by", lb.DEFAULT_SORT)) or lb.DEFAULT_SORT
    if sort_by not in lb.SORTABLE:
        raise refuse(f"sort_by {sort_by!r} is not a column; columns: {', '.join(lb.SORTABLE)}")
    return lb.TableQuery(
        task=task,
        hardware=strings_arg("hardware", values.get("hardware")),
        arch=text_arg("arch", values.get("arch", ALL)) or ALL,
        precisions=strings_arg("precisions", values.get("precisions")),
        gpu_counts=ints_arg("gpus", values.get("gpus"), 1, 1_000_000),
        source_kinds=strings_arg("sources", values.get("sources")),
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
    """The ``/leaderboard_table`` answer: one page of rows as data, and the paging."""
    res = answers.table_result(ctx, quality, q)
    if q.page > res.pages:
        raise refuse(f"page {q.page} is out of range; this query has {res.pages} page(s)")
    columns = [c.name for c in lb.COLUMNS]
    columns += ["quality_link", "host_bound", "unverified", "unverified_reasons"]
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
        gr.api(
            endpoint("estimate")(_estimate_endpoint), api_name="estimate", concurrency_limit=None
        )

    def reload() -> dict:
        """Re-read the store if it changed (e.g. after approvals): ``changed`` and ``runs``."""
        changed = ctx.reload()
        return {"changed": changed, "runs": len(ctx.data.runs)}

    gr.api(endpoint("reload")(reload), api_name="reload", concurrency_limit=1)


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
        if text_arg("kind", kind) not in answers.PLOT_NAMES:
            raise refuse(f"kind {kind!r} is not a plot; kinds: {', '.join(answers.PLOT_NAMES)}")
        task, quality = _resolve(ctx, task, quality)
        q = _query(
            ctx, task, hardware=hardware, precisions=precisions, gpus=gpus, search=search, best=best
        )
        fig = answers.plot_figure(ctx, answers.PLOT_NAMES[kind], quality, q)
        return json.loads(fig.to_json())

    gr.api(
        endpoint("leaderboard_table")(leaderboard_table),
        api_name="leaderboard_table",
        concurrency_limit=None,
    )
    gr.api(
        endpoint("filter_choices")(filter_choices),
        api_name="filter_choices",
        concurrency_limit=None,
    )
    gr.api(endpoint("plot")(plot), api_name="plot", concurrency_limit=None)


def _register_views(ctx: AppContext) -> None:
    def model_detail(model_id: str, quality: str | None = None) -> dict:
        """Every configuration of one model (``rows``) with its run ids (for ``/provenance``)."""
        _, quality = _resolve(ctx, ALL, quality)
        if text_arg("model_id", model_id) not in ctx.choices["model_id"]:
            raise refuse(f"model_id {model_id!r} is not in the store; see /filter_choices")
        rows = answers.model_rows(ctx, model_id, quality)
        return {
            "model_id": model_id,
            "quality": quality,
            "rows": rows_data(rows, list(rows.columns)),
        }

    def provenance(run_id: str) -> dict:
        """One run's full provenance and its power timeline (``t_s``, ``power_w``; may be null)."""
        record = ctx.data.get_run(text_arg("run_id", run_id) or "")
        if record is None:
            raise refuse(f"run_id {run_id!r} is not in the store; see /model_detail")
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
        chosen = list(strings_arg("models", models))
        table, note = answers.compare_table(ctx, chosen, quality, q)
        return {"note": note, "rows": rows_data(table.astype(object), list(table.columns))}

    gr.api(endpoint("model_detail")(model_detail), api_name="model_detail", concurrency_limit=None)
    gr.api(endpoint("provenance")(provenance), api_name="provenance", concurrency_limit=None)
    gr.api(endpoint("compare")(compare), api_name="compare", concurrency_limit=None)


def _register_power(ctx: AppContext) -> None:
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
        task, _ = _resolve(ctx, task, "none")
        q = pb.BudgetQuery(
            float_arg("budget_w", budget_w, 0, 1e12),
            float_arg("itl_limit_ms", itl_limit_ms, 0, 1e9),
            task or "",
            float_arg("pue", pue, 0, 100),
            float_arg("host_w_per_gpu", host_w_per_gpu, 0, 1e6),
            text_arg("objective", objective),
        )
        answer = pb.best_per_model(ctx, q)
        return {
            "task": q.task,
            "budget_w": q.budget_w,
            "itl_limit_ms": q.itl_limit_ms,
            "rows": rows_data(answer.table, list(pb.COLUMNS)),
            "left_out": [{"model_id": m, "reason": why} for m, why in answer.left_out],
        }

    gr.api(endpoint("power_budget")(power_budget), api_name="power_budget", concurrency_limit=None)


@functools.cache
def _estimator_names() -> tuple[frozenset[str], frozenset[str]]:
    """Reference model ids and catalog GPU names: all ``/estimate`` takes as names."""
    choices = estimator_choices()
    return frozenset(choices["models"]), frozenset(choices["gpus"])


def _uploaded_config(text: str) -> str:
    """Save an uploaded config.json under a server-chosen name; return that path.

    The name is the SHA-256 of the content, so the estimator's memo of a path always means
    the same config. The client never names a server file.
    """
    from mlenergy.store.validation import load_json

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
    path = folder / f"{hashlib.sha256(raw).hexdigest()}.json"
    path.write_bytes(raw)
    return str(path)


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
    ``config_json`` (then ``model`` is ignored). No argument ever names a server file.
    """
    models, gpus = _estimator_names()
    gpu_name = text_arg("gpu", gpu)
    if gpu_name not in gpus:
        raise refuse(f"gpu {gpu_name!r} is not a catalog GPU; GPUs: {', '.join(sorted(gpus))}")
    if not isinstance(config_json, str):
        raise refuse(f"config_json must be text (a config.json), not {_kind(config_json)}")
    if config_json:
        target = _uploaded_config(config_json)
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
        return estimate_figures(
            target, gpu_name, float(int_arg("batch_size", batch_size, 1, 1_000_000)),
            float(int_arg("input_tokens", input_tokens, 0, 10_000_000)),
            float(int_arg("output_tokens", output_tokens, 1, 10_000_000)), chosen,
            int_arg("num_gpus", num_gpus, 1, 1024),
            float_arg("clock_mhz", clock_mhz, 0, 10_000) or None,
        )  # fmt: skip
    finally:
        if target not in models:  # the uploaded copy: its answer is memoised, the file not needed
            Path(target).unlink(missing_ok=True)
