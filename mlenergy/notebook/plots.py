"""Plots one call away: :func:`plot` draws records and windows with units and energy source.

A run record, a list of records or a measured window is drawn with matplotlib.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mlenergy.records import HOST_BOUND_MARK, RunRecord, interval_basis
from mlenergy.records.metrics import headline_phase


def _axes(ax: Any) -> tuple[Any, Any]:
    import matplotlib.pyplot as plt

    if ax is not None:
        return ax.figure, ax
    fig, new_ax = plt.subplots(figsize=(6, 3.5))
    return fig, new_ax


def _plot_run(run: RunRecord, ax: Any) -> Any:
    fig, ax = _axes(ax)
    if run.power_timeline is not None:
        t = run.power_timeline
        ax.plot(t.t_s, t.power_w)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("power (W)")
    else:
        names = [p.phase.value for p in run.phases]
        energy = [p.energy_j if p.energy_j is not None else float("nan") for p in run.phases]
        ax.bar(names, energy)
        ax.set_ylabel("energy (J)")
    ax.set_title(f"{run.model.model_id} ({run.energy_source})", fontsize=9)
    return fig


def _basis_text(runs: Sequence[RunRecord]) -> dict[str, str]:
    """Per model, what its error bars come from (``within-run, 3 repeats``...; ``""``: none)."""
    out: dict[str, set[str]] = {}
    for r in runs:
        basis = interval_basis(r)
        out.setdefault(r.model.model_id, set()).add(basis.label() if basis else "")
    return {m: " / ".join(sorted(t for t in texts if t)) for m, texts in out.items()}


def _plot_runs(runs: Sequence[RunRecord], x: str, ax: Any) -> Any:
    """Energy per token against ``x``, one line per model, with 95% intervals as error bars.

    A point whose interval is wider than +-20% (``wide_interval``) is drawn hollow and marked
    with ``!``; a run the host-bound rule marks is labelled ``host-bound``. The title says what
    the bars come from (``within-run, 3 repeats`` or ``between-runs, 3 processes``), or each
    model's legend entry does when they differ.
    """
    fig, ax = _axes(ax)
    bases = _basis_text(runs)
    common = set(bases.values())
    by_model: dict[str, list[tuple[float, float, float, float, bool]]] = {}
    for r in runs:
        p = headline_phase(r)
        if p is None or p.energy_per_token_j is None:
            continue
        xv = float(getattr(r.workload, x))
        ci = p.energy_per_token_j_ci95
        low = p.energy_per_token_j - ci.low if ci else 0.0
        high = ci.high - p.energy_per_token_j if ci else 0.0
        point = (xv, p.energy_per_token_j, low, high, bool(p.wide_interval))
        by_model.setdefault(r.model.model_id, []).append(point)
        if r.host_bound is not None and r.host_bound.marked:
            ax.annotate(
                HOST_BOUND_MARK, (xv, p.energy_per_token_j), textcoords="offset points",
                xytext=(4, -10), fontsize=6,
            )  # fmt: skip
    for model, points in sorted(by_model.items()):
        points.sort()
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        label = model if len(common) == 1 or not bases[model] else f"{model} ({bases[model]})"
        line = ax.errorbar(
            xs, ys, yerr=[[p[2] for p in points], [p[3] for p in points]], marker="o",
            capsize=3, label=label,
        )  # fmt: skip
        for xv, yv, _, _, wide in points:
            if wide:
                ax.plot([xv], [yv], marker="o", mfc="white", color=line[0].get_color())
                ax.annotate("!", (xv, yv), textcoords="offset points", xytext=(4, 4))
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel("energy per token (J/token)")
    sources = sorted({r.energy_source for r in runs})
    only = next(iter(common)) if len(common) == 1 else ""
    bars = f"bars: 95% interval, {only}" if only else "bars: 95% interval"
    ax.set_title(
        "energy source: " + ", ".join(sources) + f" ({bars}; ! wider than ±20%)", fontsize=9
    )
    if by_model:
        ax.legend(fontsize=7)
    return fig


def _plot_window(result: Any, ax: Any) -> Any:
    fig, ax = _axes(ax)
    devices = list(result.energy_by_device_j)
    values = [result.energy_by_device_j[d] for d in devices]
    ax.bar(devices, [float("nan") if v is None else v for v in values])
    ax.set_ylabel("energy (J)")
    ax.set_title(f"{result.name}: {result.duration_s:.3g} s ({result.energy_source})", fontsize=9)
    return fig


def plot(obj: Any, *, x: str = "batch_size", ax: Any = None) -> Any:
    """Draw ``obj`` and return the matplotlib figure.

    Args:
        obj: A :class:`~mlenergy.records.RunRecord` (power trace, else energy per phase), a
            list of records (energy per token against ``x``, one line per model), a window
            result or :class:`~mlenergy.measure.window.MeasuredWindow` (energy per device).
        x: Workload field on the x axis for a list of records.
        ax: Axes to draw on (default: a new figure).

    Raises:
        TypeError: For an object this function cannot draw.
    """
    if isinstance(obj, RunRecord):
        fig = _plot_run(obj, ax)
    elif isinstance(obj, list | tuple) and obj and all(isinstance(r, RunRecord) for r in obj):
        fig = _plot_runs(obj, x, ax)
    elif hasattr(result := getattr(obj, "result", obj), "energy_by_device_j") and hasattr(
        result, "duration_s"
    ):
        fig = _plot_window(result, ax)
    else:
        raise TypeError(
            f"cannot plot a {type(obj).__name__}: give a run record, records or a window"
        )
    if ax is None:
        fig.tight_layout()  # axis labels inside the figure, also when it is saved
    return fig
