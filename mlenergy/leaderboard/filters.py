"""The filter bar above the tabs: its widgets and the table query their values make.

The same :func:`make_query` serves the UI (widget values, a slider at its end meaning "no
limit") and the API (named arguments, ``None`` meaning "no limit").
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.arch import ARCH_KINDS
from mlenergy.leaderboard.context import AppContext

FILTERS = ("task", "hardware", "arch", "precisions", "gpus", "sources", "search", "itl", "budget")
FILTERS += ("best", "sort_by", "desc")
"""The filter widgets' names, in the order their values reach the event handlers."""

SORT_CHOICES = [(c.label, c.name) for c in lb.COLUMNS]
ARCH_CHOICES = ["all", *ARCH_KINDS]


def make_query(values: dict, limits: tuple[float, float], page: int = 1) -> lb.TableQuery:
    """Build a :class:`~mlenergy.leaderboard.query.TableQuery` from filter values by name.

    Args:
        values: Values keyed by :data:`FILTERS` names (missing or empty: no filter).
        limits: The sliders' ends (ms, J per token); a value at or above its end is no limit.
        page: Page number, 1-based.
    """
    max_itl, max_budget = limits
    itl, budget = values.get("itl"), values.get("budget")
    sort_by = values.get("sort_by") or lb.DEFAULT_SORT
    return lb.TableQuery(
        task=values.get("task") or None,
        hardware=tuple(values.get("hardware") or ()),
        arch=values.get("arch") or "all",
        precisions=tuple(values.get("precisions") or ()),
        gpu_counts=tuple(int(g) for g in (values.get("gpus") or ())),
        source_kinds=tuple(values.get("sources") or ()),
        search=values.get("search") or "",
        max_itl_ms=None if itl is None or itl >= max_itl else float(itl),
        max_energy_per_token_j=None if budget is None or budget >= max_budget else float(budget),
        best_only=bool(values.get("best", True)),
        sort_by=sort_by,
        descending=bool(values.get("desc")),
        page=int(page or 1),
    )


def widget_query(values: tuple, limits: tuple[float, float], page: int = 1) -> lb.TableQuery:
    """:func:`make_query` from the filter widgets' values, in :data:`FILTERS` order."""
    return make_query(dict(zip(FILTERS, values, strict=True)), limits, page)


@dataclass
class FilterBar:
    """The filter widgets (``quality`` picks the quality figure; the rest filter rows)."""

    quality: gr.Dropdown
    task: gr.Dropdown
    hardware: gr.CheckboxGroup
    arch: gr.Radio
    precisions: gr.CheckboxGroup
    gpus: gr.CheckboxGroup
    sources: gr.CheckboxGroup
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


def build_filter_bar(ctx: AppContext) -> FilterBar:
    """Lay out the filter bar (three rows) for the store in ``ctx``."""
    ch, (max_itl, max_budget) = ctx.choices, ctx.limits
    with gr.Row():
        task = gr.Dropdown(ch["task"], value=ctx.default_task, label="Task", elem_id="f-task")
        quality = gr.Dropdown(
            ctx.quality_keys, value=ctx.default_quality, label="Quality figure", elem_id="f-quality"
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
        sources = gr.CheckboxGroup(ch["source_kind"], label="Energy source", elem_id="f-source")
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
        best = gr.Checkbox(True, label="Best configuration per model x hardware", elem_id="f-best")
        sort_by = gr.Dropdown(
            SORT_CHOICES, value=lb.DEFAULT_SORT, label="Sort by", min_width=220, elem_id="f-sort"
        )
        desc = gr.Checkbox(False, label="Descending", elem_id="f-desc")
    return FilterBar(
        quality, task, hardware, arch, precisions, gpus, sources, search, itl, budget, best,
        sort_by, desc,
    )  # fmt: skip
