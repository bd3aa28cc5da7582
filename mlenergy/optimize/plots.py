"""Figures of the optimizers, drawn off-screen (lowtime's visualizer is not used).

Figures are built with :class:`matplotlib.figure.Figure` directly, so importing this module never
changes the caller's pyplot backend (a notebook keeps its inline backend).
"""

from __future__ import annotations

import io
from pathlib import Path

from matplotlib.figure import Figure

from mlenergy.optimize.frontier import Frontier


class NotebookFigure(Figure):
    """A figure that shows itself as a PNG in Jupyter, whatever the notebook's backend.

    A bare :class:`~matplotlib.figure.Figure` displays as ``<Figure size 600x400 with 1 Axes>``
    unless pyplot's inline backend was set up first; IPython calls ``_repr_png_`` instead.
    """

    def _repr_png_(self) -> bytes:
        """The figure as PNG bytes (120 dpi, tight), for IPython's display."""
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
        return buffer.getvalue()


def _save(fig: Figure, path: str | Path | None) -> Path | Figure:
    """Write ``fig`` to ``path`` (temp file, then rename); with no path, return the figure."""
    if path is None:
        return fig
    p = Path(path)
    tmp = p.with_name(p.stem + ".tmp" + p.suffix)
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    tmp.replace(p)
    return p


def plot_pipeline_frontier(
    frontier: Frontier,
    path: str | Path | None,
    max_clock: tuple[float, float] | None = None,
    chosen: tuple[float, float] | None = None,
    title: str = "Iteration time-energy frontier",
    model: bool = False,
) -> Path | Figure:
    """Plot iteration energy (J) against iteration time (s).

    Args:
        frontier: The frontier.
        path: PNG to write.
        max_clock: (time s, energy J) of the schedule at maximum clock, marked.
        chosen: (time s, energy J) of the chosen plan, marked.
        title: Figure title.
        model: The frontier holds the Perseus solver's model figures (``perseus``
            accounting), not the profile's.
    """
    fig = NotebookFigure(figsize=(6, 4))
    ax = fig.add_subplot()
    ax.plot(
        frontier.iteration_time_s,
        frontier.energy_j,
        ".-",
        markersize=3,
        label="frontier (Perseus solver's model)" if model else "frontier (profile's real times)",
    )
    if max_clock is not None:
        ax.plot(*max_clock, "s", color="tab:red", label="all at max clock (its own time)")
    if chosen is not None:
        ax.plot(*chosen, "o", color="tab:green", label="chosen plan")
    ax.set_xlabel("iteration time (s)")
    ax.set_ylabel("iteration energy (J)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def plot_power_cap(result, path: str | Path | None, metric: str = "site-tokens") -> Path | Figure:
    """Site tokens/s (or tokens/s per site W) against tokens/s per user, per GPU x precision.

    Each curve is the upper envelope of its GPU x precision's candidates (with at least one
    replica); the deadline is the dashed line (tokens/s per user = 1000 / ITL limit in ms).
    Candidates beyond the deadline are drawn too, left of the line.

    Args:
        result: A :class:`mlenergy.optimize.power_cap.PowerCapResult`.
        path: PNG to write.
        metric: ``site-tokens`` or ``tokens-per-watt``.
    """
    df = result.candidates
    df = df[df["replicas"] >= 1].copy()
    df["per_user"] = 1000.0 / df["median_itl_ms"].astype(float)
    if metric == "tokens-per-watt":
        df["y"] = df["site_tokens_per_s"] / df["site_power_w"]
        ylabel = "site tokens/s per site W"
    else:
        df["y"] = df["site_tokens_per_s"]
        ylabel = "site tokens/s"
    fig = NotebookFigure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    for (gpu, prec), g in sorted(df.groupby(["gpu", "precision"]), key=lambda kv: kv[0]):
        g = g.sort_values("per_user", ascending=False)
        env = g["y"].cummax()  # best y achievable at this interactivity or higher
        kinds = sorted({s.split(":")[0] for s in g["source"]})
        ax.plot(g["per_user"], env, "-", label=f"{gpu} {prec} ({'/'.join(kinds)})")
    ax.axvline(1000.0 / result.itl_limit_ms, ls="--", color="k", lw=1, label="deadline")
    ax.set_xlabel("tokens/s per user (1000 / median ITL ms)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"Under {result.site.budget_w:,.0f} W: throughput vs interactivity")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


def plot_stage_profile(profile, stage: int = 0, path: str | Path | None = None) -> Path | Figure:
    """Time (s) and energy (J) of one microbatch against the SM clock, for one stage."""
    fig = NotebookFigure(figsize=(9, 3.5))
    ax_t, ax_e = fig.subplots(1, 2)
    for inst in ("forward", "backward"):
        opts = sorted(profile.options[(stage, inst)], key=lambda o: o.frequency_mhz)
        f = [o.frequency_mhz for o in opts]
        ax_t.plot(f, [o.time_s for o in opts], ".-", label=inst)
        ax_e.plot(f, [o.energy_j for o in opts], ".-", label=inst)
    ax_t.set_ylabel("time per microbatch (s)")
    ax_e.set_ylabel("energy per microbatch (J)")
    for ax in (ax_t, ax_e):
        ax.set_xlabel("SM clock (MHz)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"stage {stage} ({profile.energy_source})")
    return _save(fig, path)
