"""Figures of the optimizers, drawn off-screen (lowtime's visualizer is not used).

Figures are built with :class:`matplotlib.figure.Figure` directly, so importing this module never
changes the caller's pyplot backend (a notebook keeps its inline backend).
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from mlenergy.optimize.frontier import Frontier


def _save(fig, path: str | Path) -> Path:
    p = Path(path)
    tmp = p.with_name(p.stem + ".tmp" + p.suffix)
    fig.savefig(tmp, dpi=120, bbox_inches="tight")
    tmp.replace(p)
    return p


def plot_pipeline_frontier(
    frontier: Frontier,
    path: str | Path,
    max_clock: tuple[float, float] | None = None,
    chosen: tuple[float, float] | None = None,
    title: str = "Iteration time-energy frontier",
) -> Path:
    """Plot iteration energy (J) against iteration time (s).

    Args:
        frontier: The frontier.
        path: PNG to write.
        max_clock: (time s, energy J) of the schedule at maximum clock, marked.
        chosen: (time s, energy J) of the chosen plan, marked.
        title: Figure title.
    """
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    ax.plot(frontier.iteration_time_s, frontier.energy_j, "-", label="frontier (lowtime)")
    if max_clock is not None:
        ax.plot(*max_clock, "s", color="tab:red", label="all at max clock")
    if chosen is not None:
        ax.plot(*chosen, "o", color="tab:green", label="chosen plan")
    ax.set_xlabel("iteration time (s)")
    ax.set_ylabel("iteration energy (J)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)
