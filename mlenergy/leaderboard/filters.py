"""The filter bar above the tabs: its widgets and the table query their values make.

:func:`make_query` turns widget values into a table query (a slider at its end meaning "no
limit"; no energy source ticked meaning the default view, measured GPU rows). The bar's
choices follow the rows in view: :func:`wire_view` refreshes the tasks, hardware, precisions,
GPU counts, quality figures and slider ends when the energy sources change, and picks the
task's quality figure when the task changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.arch import ARCH_KINDS
from mlenergy.leaderboard.context import AppContext, ViewChoices, normal_sources

FILTERS: tuple[str, ...] = ("task", "hardware", "arch", "precisions", "gpus", "sources")
FILTERS += ("method", "search", "itl", "budget", "best", "sort_by", "desc")
"""The filter widgets' names, in the order their values reach the event handlers."""

SORT_CHOICES = [(c.label, c.name) for c in lb.COLUMNS]
ARCH_CHOICES = ["all", *ARCH_KINDS]
METHOD_CHOICES = ["all", *lb.METHODS]


def make_query(values: dict, limits: tuple[float, float], page: int = 1) -> lb.TableQuery:
    """Build a :class:`~mlenergy.leaderboard.query.TableQuery` from filter values by name.

    Args:
        values: Values keyed by :data:`FILTERS` names (missing or empty: no filter; no
            ``sources``: :data:`~mlenergy.leaderboard.query.DEFAULT_SOURCES`).
        limits: The sliders' ends (ms, J per token); a value at or above its end is no limit.
        page: Page number, 1-based.
    """
    max_itl, max_budget = limits
    itl, budget = values.get("itl"), values.get("budget")
    sort_by = values.get("sort_by") or lb.DEFAULT_SORT
    method = values.get("method")
    return lb.TableQuery(
        task=values.get("task") or None,
        hardware=tuple(values.get("hardware") or ()),
        arch=values.get("arch") or "all",
        precisions=tuple(values.get("precisions") or ()),
        gpu_counts=tuple(int(g) for g in (values.get("gpus") or ())),
        source_kinds=normal_sources(values.get("sources")),
        methods=() if method in (None, "", "all") else (str(method),),
        search=values.get("search") or "",
        max_itl_ms=None if itl is None or itl >= max_itl else float(itl),
        max_energy_per_token_j=None if budget is None or budget >= max_budget else float(budget),
        best_only=bool(values.get("best", True)),
        sort_by=sort_by,
        descending=bool(values.get("desc")),
        page=int(page or 1),
    )


def widget_query(values: tuple, ctx: AppContext, page: int = 1) -> lb.TableQuery:
    """:func:`make_query` from the filter widgets' values, in :data:`FILTERS` order.

    The sliders' ends are those of the rows in view (the energy sources ticked).
    """
    named = dict(zip(FILTERS, values, strict=True))
    return make_query(named, ctx.view(named.get("sources")).limits, page)


@dataclass
class FilterBar:
    """The filter widgets (``quality`` picks the quality figure; the rest filter rows).

    ``panel`` holds them all (shown only on the tabs the filters apply to).
    """

    panel: gr.Column
    quality: gr.Dropdown
    task: gr.Dropdown
    hardware: gr.CheckboxGroup
    arch: gr.Radio
    precisions: gr.CheckboxGroup
    gpus: gr.CheckboxGroup
    sources: gr.CheckboxGroup
    method: gr.Radio
    search: gr.Textbox
    itl: gr.Slider
    budget: gr.Slider
    best: gr.Checkbox
    sort_by: gr.Dropdown
    desc: gr.Checkbox

    @property
    def filters(self) -> list:
        """The row filters, in :data:`FILTERS` order."""
        return [getattr(self, name) for name in FILTERS]

    @property
    def inputs(self) -> list:
        """The quality picker then the row filters: the inputs of every table-like event."""
        return [self.quality, *self.filters]


def source_choices(classes: list[str]) -> list[tuple[str, str]]:
    """The Energy source filter's ``(label, value)`` choices for the classes present."""
    return [(lb.SOURCE_CLASSES.get(c, c), c) for c in classes]


def build_filter_bar(ctx: AppContext) -> FilterBar:
    """Lay out the filter bar (three rows) for the default view of the store in ``ctx``."""
    view = ctx.view(None)
    ch, (max_itl, max_budget) = view.choices, view.limits
    with gr.Column(elem_id="filter-panel") as panel:
        with gr.Row():
            task = gr.Dropdown(ch["task"], value=view.default_task, label="Task", elem_id="f-task")
            quality = gr.Dropdown(
                view.quality_keys,
                value=view.quality_for(view.default_task),
                label="Quality figure",
                elem_id="f-quality",
            )
            search = gr.Textbox(
                label="Search", placeholder="model, hardware, submitter…", elem_id="f-search"
            )
        with gr.Row():
            hardware = gr.CheckboxGroup(ch["hardware"], label="Hardware", elem_id="f-hardware")
            arch = gr.Radio(ARCH_CHOICES, value="all", label="Architecture", elem_id="f-arch")
            precisions = gr.CheckboxGroup(ch["dtype"], label="Precision", elem_id="f-precision")
            counts = [str(c) for c in ch["accelerator_count"]]
            gpus = gr.CheckboxGroup(counts, label="GPU count", elem_id="f-gpus")
            sources = gr.CheckboxGroup(
                source_choices(ctx.choices["source_class"]),
                value=list(lb.DEFAULT_SOURCES),
                label="Energy source",
                info="Rows not measured on GPUs are listed below the measured ones",
                elem_id="f-source",
            )
            method = gr.Radio(METHOD_CHOICES, value="all", label="Method", elem_id="f-method")
        with gr.Row():
            itl = gr.Slider(
                0,
                max_itl,
                value=max_itl,
                step=max_itl / 500,
                label="Latency deadline (median ITL, ms)",
                info="At the maximum: no deadline",
                scale=2,
                elem_id="f-itl",
            )
            budget = gr.Slider(
                0,
                max_budget,
                value=max_budget,
                step=max_budget / 1000,
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
    return FilterBar(
        panel, quality, task, hardware, arch, precisions, gpus, sources, method, search, itl,
        budget, best, sort_by, desc,
    )  # fmt: skip


def _kept(values, allowed) -> list:
    """The ticked values still offered (a choice that left the view is unticked)."""
    allowed = {str(a) for a in allowed}
    return [v for v in values or () if str(v) in allowed]


def view_updates(view: ViewChoices, task, quality, hardware, precisions, gpus) -> list:
    """Updates of the bar's pickers and sliders for the rows of ``view``.

    Returns:
        Updates of task, quality, hardware, precisions, GPU counts, latency and budget
        sliders (each slider reset to its end: no limit).
    """
    ch, (max_itl, max_budget) = view.choices, view.limits
    task = task if task in ch["task"] else view.default_task
    quality = quality if quality in view.quality_keys else view.quality_for(task)
    counts = [str(c) for c in ch["accelerator_count"]]
    return [
        gr.update(choices=ch["task"], value=task),
        gr.update(choices=view.quality_keys, value=quality),
        gr.update(choices=ch["hardware"], value=_kept(hardware, ch["hardware"])),
        gr.update(choices=ch["dtype"], value=_kept(precisions, ch["dtype"])),
        gr.update(choices=counts, value=_kept(gpus, counts)),
        gr.update(maximum=max_itl, value=max_itl, step=max_itl / 500),
        gr.update(maximum=max_budget, value=max_budget, step=max_budget / 1000),
    ]


def view_outputs(bar: FilterBar) -> list:
    """The widgets :func:`view_updates` updates, in its order."""
    return [bar.task, bar.quality, bar.hardware, bar.precisions, bar.gpus, bar.itl, bar.budget]


def wire_view(ctx: AppContext, bar: FilterBar, private: str) -> None:
    """Choices follow the rows in view; the task picks its quality figure.

    Args:
        ctx: The app's state.
        bar: The filter bar.
        private: ``api_visibility`` of these page-only events.
    """

    def on_sources(sources, task, quality, hardware, precisions, gpus):
        view = ctx.view(sources)
        return view_updates(view, task, quality, hardware, precisions, gpus)

    bar.sources.input(
        on_sources,
        [bar.sources, bar.task, bar.quality, bar.hardware, bar.precisions, bar.gpus],
        view_outputs(bar),
        api_visibility=private,
    )

    def on_task(task, sources):
        view = ctx.view(sources)
        key = view.quality_for(task)
        return gr.update(value=key) if key else gr.update()

    bar.task.input(on_task, [bar.task, bar.sources], bar.quality, api_visibility=private)
