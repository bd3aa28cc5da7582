"""Plotly figures of the leaderboard, with Pareto frontiers where two objectives meet.

Energy versus quality and versus latency, efficiency by hardware, a run's power timeline and
an estimate's breakdown.

Every builder takes plain frames or records and returns a ``plotly.graph_objects.Figure``;
an empty input gives a figure carrying a "no data" note rather than an error.
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from mlenergy.analysis.frontier import pareto_frontier
from mlenergy.leaderboard.arch import architecture_kinds
from mlenergy.records import PowerTimeline

MAX_POINTS = 5000
"""Scatter plots show at most this many points (the lowest-energy ones) to stay responsive."""

_HOVER = (
    "%{customdata[0]} (%{customdata[5]})<br>%{customdata[1]} x%{customdata[2]} · %{customdata[3]}"
    "<br>source: %{customdata[4]}<extra></extra>"
)


_CUSTOM = ["model_id", "hardware", "accelerator_count", "dtype", "energy_source", "arch_kind"]
PLOT_COLUMNS = (
    *_CUSTOM,
    "source_kind",
    "energy_per_token_j",
    "itl_ms",
    "quality",
    "quality_source",
    "quality_link",
    "tokens_per_j",
)
"""The prepared-run columns the scatter and box plots read."""
SYMBOLS = {
    "measured": "circle",
    "modelled": "square",
    "estimated": "x",
    "emulated": "diamond",
    "reference": "triangle-up",
}
"""Marker symbol per energy-source kind, so measured and estimated points never look alike."""


def tick_label(value: float) -> str:
    """A log axis tick's full value (``0.04``, ``2``, ``1,000``, ``1e-05``), never a bare digit."""
    if value == 0 or not np.isfinite(value):
        return str(value)
    if abs(value) >= 1e6 or abs(value) < 1e-4:
        return f"{value:.0e}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def log_ticks(values: Sequence[float] | np.ndarray) -> tuple[list[float], list[str]]:
    """Ticks of a log axis over ``values``, each labelled with its full value.

    1-2-5 in each decade, or each decade's 1 when the data span more than four decades.

    Plotly labels a log axis's in-decade ticks with their leading digit only ("4" for 0.04);
    explicit ticks avoid that.

    Returns:
        ``(tickvals, ticktext)``; empty when no value is positive and finite.
    """
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if not len(v):
        return [], []
    lo, hi = int(np.floor(np.log10(v.min()))), int(np.ceil(np.log10(v.max())))
    hi = max(hi, lo + 1)
    steps = (1,) if hi - lo > 4 else (1, 2, 5)
    ticks = [m * 10.0**e for e in range(lo, hi + 1) for m in steps]
    ticks = [t for t in ticks if v.min() / 1.5 <= t <= v.max() * 1.5] or [10.0**lo]
    return ticks, [tick_label(t) for t in ticks]


def log_axis(fig: go.Figure, values: Sequence[float] | np.ndarray, axis: str = "y") -> None:
    """Make ``axis`` of ``fig`` logarithmic with :func:`log_ticks` over ``values``."""
    vals, text = log_ticks(values)
    update = fig.update_yaxes if axis == "y" else fig.update_xaxes
    update(type="log", tickvals=vals or None, ticktext=text or None)


def _safe(text: object) -> str:
    """Escape text for plotly, which renders a subset of HTML tags in labels and hovers."""
    return html.escape(str(text), quote=False)


def _wrapped(text: object, width: int = 90) -> str:
    """Escaped text broken into hover lines of at most ``width`` characters."""
    return "<br>".join(_safe(line) for line in textwrap.wrap(str(text or ""), width)) or "-"


def _custom(rows: pd.DataFrame, extra: Sequence[str] = ()) -> np.ndarray:
    """Hover data (model, hardware, GPUs, precision, energy source, architecture), escaped.

    The architecture label (dense / MoE / hybrid) is the prepared ``arch_kind`` column, or
    :func:`~mlenergy.leaderboard.arch.architecture_kinds` for unprepared rows. ``extra``
    columns follow (wrapped into short lines), as ``customdata[6]`` onwards.
    """
    if "arch_kind" not in rows.columns:
        rows = rows.assign(arch_kind=architecture_kinds(rows))
    out = rows[_CUSTOM].to_numpy(dtype=object)
    for j, name in enumerate(_CUSTOM):
        if name != "accelerator_count":
            out[:, j] = [_safe(v) for v in out[:, j]]
    if not extra:
        return out
    more = np.array(
        [[_wrapped(v) for v in rows.get(name, pd.Series("", index=rows.index))] for name in extra],
        dtype=object,
    ).T.reshape(len(rows), len(extra))
    return np.concatenate([out, more], axis=1)


def _palette(names: list[str]) -> dict[str, str]:
    import plotly.express as px

    colours = px.colors.qualitative.Plotly
    return {name: colours[i % len(colours)] for i, name in enumerate(names)}


def _empty(title: str, note: str) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        title=title,
        annotations=[
            {"text": note, "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}
        ],
        xaxis={"visible": False},
        yaxis={"visible": False},
        template="plotly_white",
    )
    return fig


def _limit(df: pd.DataFrame) -> pd.DataFrame:
    if len(df) <= MAX_POINTS:
        return df
    return df.nsmallest(MAX_POINTS, "energy_per_token_j")


def _scatter(
    df: pd.DataFrame,
    x: str,
    y: str,
    title: str,
    x_title: str,
    y_title: str,
    minimize_x: bool,
    log_y: bool = True,
    extra_hover: Sequence[tuple[str, str]] = (),
) -> go.Figure:
    """A scatter of ``y`` against ``x`` by hardware and energy source, with its frontier.

    Rows flagged ``apart`` (not measured on GPUs) are hollow markers, named so in the legend.

    ``extra_hover`` adds ``(label, column)`` lines to each point's hover text.
    """
    points = _limit(df.dropna(subset=[x, y]))
    if points.empty:
        return _empty(title, "No configuration has both figures.")
    fig = go.Figure()
    palette = _palette(sorted(points["hardware"].unique()))
    extra = [name for _, name in extra_hover]
    hover = _HOVER.replace(
        "<extra>",
        "".join(
            f"<br>{_safe(lab)}: %{{customdata[{6 + i}]}}" for i, (lab, _) in enumerate(extra_hover)
        )
        + "<extra>",
    )
    for (hw, kind), group in points.groupby(["hardware", "source_kind"], sort=True):
        apart = "apart" in group.columns and bool(group["apart"].iloc[0])
        symbol = SYMBOLS.get(str(kind), "circle") + ("-open" if apart else "")
        fig.add_trace(
            go.Scatter(
                x=group[x],
                y=group[y],
                mode="markers",
                name=_safe(f"{hw} · {kind}" + (" (not measured on GPUs)" if apart else "")),
                marker={
                    "size": 8,
                    "opacity": 0.75,
                    "color": palette[str(hw)],
                    "symbol": symbol,
                },
                customdata=_custom(group, extra),
                hovertemplate=f"{x_title}: %{{x:.4g}}<br>{y_title}: %{{y:.4g}}<br>" + hover,
            )
        )
    front = pareto_frontier(points, x, y, minimize_x=minimize_x, minimize_y=True)
    fig.add_trace(
        go.Scatter(
            x=front[x],
            y=front[y],
            mode="lines+markers",
            name="Pareto frontier",
            line={"color": "black", "width": 2, "shape": "hv" if minimize_x else "vh"},
            marker={"symbol": "diamond-open", "size": 11, "color": "black"},
            customdata=_custom(front, extra),
            hovertemplate="frontier<br>" + hover,
        )
    )
    fig.update_layout(
        title=title,
        xaxis_title=x_title,
        yaxis_title=y_title,
        template="plotly_white",
        legend_title="Hardware · energy source",
    )
    if log_y:
        log_axis(fig, points[y].to_numpy(dtype=float))
    return fig


def energy_vs_quality(
    df: pd.DataFrame, quality_label: str, higher_is_better: bool = True
) -> go.Figure:
    """Energy per output token against quality, with the Pareto frontier.

    Each point's hover names its quality source (``published:<benchmark>`` or
    ``measured:<figure>``) and where the figure came from (``quality_link``); a published
    figure's axis title says it was not measured in these runs.

    Args:
        df: Prepared rows with ``quality`` attached.
        quality_label: Axis title for the quality figure (e.g. ``"lm-eval:arc / acc"``).
        higher_is_better: Direction of the quality figure.
    """
    if quality_label.startswith("published:"):
        quality_label = f"{quality_label} (published score, not measured in these runs)"
    return _scatter(
        df,
        "quality",
        "energy_per_token_j",
        "Energy per token versus quality",
        quality_label,
        "Energy per output token (J)",
        minimize_x=not higher_is_better,
        extra_hover=(("quality source", "quality_source"), ("quality from", "quality_link")),
    )


def energy_vs_latency(df: pd.DataFrame) -> go.Figure:
    """Energy per output token against median inter-token latency, with the Pareto frontier."""
    return _scatter(
        df,
        "itl_ms",
        "energy_per_token_j",
        "Energy per token versus inter-token latency",
        "Median inter-token latency (ms)",
        "Energy per output token (J)",
        minimize_x=True,
    )


def efficiency_by_hardware(df: pd.DataFrame) -> go.Figure:
    """Tokens per second per watt (= tokens per joule) of every configuration, by hardware."""
    rows = df.dropna(subset=["tokens_per_j"])
    title = "Tokens per second per watt by hardware"
    if rows.empty:
        return _empty(title, "No configuration has an energy figure.")
    fig = go.Figure()
    for hw, group in rows.groupby("hardware", sort=True):
        fig.add_trace(go.Box(y=group["tokens_per_j"], name=_safe(hw), boxpoints="outliers"))
    fig.update_layout(
        title=title,
        yaxis_title="Output tokens per second per watt (tokens/J)",
        template="plotly_white",
        showlegend=False,
    )
    log_axis(fig, rows["tokens_per_j"].to_numpy(dtype=float))
    return fig


def power_timeline(timeline: PowerTimeline | None, title: str = "Power timeline") -> go.Figure:
    """Power of the measured scope over the run, in watts."""
    if timeline is None or not timeline.t_s:
        return _empty(title, "This run has no power timeline.")
    fig = go.Figure(
        go.Scatter(x=list(timeline.t_s), y=list(timeline.power_w), mode="lines", name="power")
    )
    fig.update_layout(
        title=f"{title} ({timeline.energy_source})",
        xaxis_title="Time since run start (s)",
        yaxis_title="Power (W)",
        template="plotly_white",
    )
    return fig


def compare_bars(compare: pd.DataFrame) -> go.Figure:
    """Energy per output token of each compared model's best configuration (bar chart).

    Args:
        compare: A frame from :func:`mlenergy.leaderboard.views.compare_models`.
    """
    row = compare[compare["Metric"] == "Energy per output token (J)"]
    title = "Best configuration: energy per output token"
    models = [c for c in compare.columns if c != "Metric"]
    values = [row[m].iloc[0] if len(row) else None for m in models]
    pairs = [(m, v) for m, v in zip(models, values, strict=True) if isinstance(v, int | float)]
    if not pairs:
        return _empty(title, "Pick 2 to 4 models with configurations under the limits.")
    fig = go.Figure(go.Bar(x=[_safe(m) for m, _ in pairs], y=[v for _, v in pairs]))
    fig.update_layout(
        title=title, yaxis_title="Energy per output token (J)", template="plotly_white"
    )
    return fig


def breakdown_bars(parts: Mapping[str, float], title: str, unit: str) -> go.Figure:
    """A bar per component of an estimate (e.g. energy by phase or by cause).

    Args:
        parts: Component name to value.
        title: Figure title.
        unit: Unit of the values, shown on the axis (e.g. ``"J"``).
    """
    items = [(k, float(v)) for k, v in parts.items() if v is not None]
    if not items:
        return _empty(title, "No breakdown available.")
    fig = go.Figure(go.Bar(x=[k for k, _ in items], y=[v for _, v in items]))
    fig.update_layout(title=title, yaxis_title=unit, template="plotly_white")
    return fig
