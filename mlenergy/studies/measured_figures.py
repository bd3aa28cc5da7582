"""PNG figures of the measured dense-versus-MoE report (matplotlib, Agg backend).

Every figure's footer names the energy source and who measured it, and says where the quality
came from (published scores or quality records of the store) and that it was not measured in
the same runs; axis labels say the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

ARCH_COLOURS = {"dense": "#1f77b4", "moe": "#ff7f0e", "hybrid": "#2ca02c"}

FIGURES = ("quality_vs_energy.png", "energy_per_correct.png", "energy_per_token_vs_params.png")


SAVE_DPI = 100
"""Pixels per inch of the saved PNGs: a figure is shown at its saved size on the report page."""
MIN_FONT_PT = 9.0
"""Smallest font of any text in a figure (points, at :data:`SAVE_DPI`: 12.5 pixels)."""
PANEL_IN = (5.6, 4.4)
"""Width and height of one panel, inches."""
MAX_COLUMNS = 2
"""Panels per row: two panels of :data:`PANEL_IN` are 1,120 pixels wide, which the report page
(1,200 pixels at most) shows without shrinking."""
FOOTER_IN = 0.55
"""Height kept below the panels for the footer (two lines at :data:`MIN_FONT_PT`), inches."""
_RC: dict[RcKeyType, Any] = {
    "font.size": 10.0,
    "axes.titlesize": 10.5,
    "axes.labelsize": 10.0,
    "xtick.labelsize": MIN_FONT_PT,
    "ytick.labelsize": MIN_FONT_PT,
    "legend.fontsize": MIN_FONT_PT,
}
"""Font sizes (points) of every figure; none is below :data:`MIN_FONT_PT`."""


def _footer(fig: Figure, note: str) -> None:
    fig.text(0.5, 0.005, note, ha="center", va="bottom", fontsize=MIN_FONT_PT, wrap=True)


def _save(fig: Figure, path: Path, note: str) -> str:
    import matplotlib.pyplot as plt

    _footer(fig, note)
    height = float(fig.get_size_inches()[1])
    fig.tight_layout(rect=(0, FOOTER_IN / height, 1, 1))
    fig.savefig(path, dpi=SAVE_DPI)
    plt.close(fig)
    return path.name


def _short(model_id: str) -> str:
    return model_id.split("/")[-1]


def _stalled(frame: pd.DataFrame) -> pd.Series:
    """Rows whose chosen configuration the host-bound rule flags (False where not known)."""
    if "host_bound" not in frame.columns:
        return pd.Series(False, index=frame.index)
    return frame["host_bound"].astype("boolean").fillna(False).astype(bool)


def _mark_stalled(ax: Axes, x: pd.Series, y: pd.Series) -> None:
    """Overlay a red cross on host-bound points, labelled once."""
    if len(x):
        ax.scatter(x, y, marker="x", c="red", s=60, lw=1.2, label="host-bound run (stalled)")


def quality_kind(sources: pd.Series) -> str:
    """``published``, ``imported``, ``measured`` or a mix (``published or imported``).

    Args:
        sources: ``quality_source`` labels (``published:GPQA-Diamond``, ``imported:lm-eval:...``).
    """
    kinds = sorted({str(s).split(":", 1)[0] for s in sources if isinstance(s, str) and s})
    return " or ".join(kinds) if kinds else "no quality"


def quality_footer(rows: pd.DataFrame) -> str:
    """The footer's quality sentence: where the scores came from, not measured with the energy."""
    kind = quality_kind(rows["quality_source"]) if "quality_source" in rows else "no quality"
    return f"Quality: {kind} scores (labels in the report), not measured in the same runs."


_LABEL_PT = MIN_FONT_PT
"""Font size of point labels (points); a character is about half as wide."""


def _label_points(ax: Axes, g: pd.DataFrame) -> None:
    """Name each point; a label that would cover an earlier one moves down, with a leader line."""
    ax.get_xlim(), ax.get_ylim()  # fix the view before transforming
    to_pt = 72.0 / ax.figure.dpi
    placed: list[tuple[float, float, float]] = []  # (x0, x1, y) of labels, points
    for _, r in g.sort_values("quality_score", ascending=False).iterrows():
        xy = (r["energy_per_response_j"], r["quality_score"])
        px, py = ax.transData.transform(xy) * to_pt
        name = _short(r["model_id"])
        width = 0.55 * _LABEL_PT * len(name)
        dy = 3.0
        while any(
            x0 < px + 3 + width and px + 3 < x1 and abs(py + dy - y) < _LABEL_PT + 1
            for x0, x1, y in placed
        ):
            dy -= _LABEL_PT + 1
        placed.append((px + 3, px + 3 + width, py + dy))
        arrow = {"arrowstyle": "-", "lw": 0.4, "color": "grey"} if dy < 0 else None
        ax.annotate(
            name,
            xy,
            fontsize=_LABEL_PT,
            xytext=(3, dy),
            textcoords="offset points",
            arrowprops=arrow,
        )


def panel_grid(panels: int, max_columns: int = MAX_COLUMNS) -> tuple[int, int, tuple[float, float]]:
    """Rows, columns and figure size (inches) of ``panels`` panels, at most ``max_columns`` a row.

    The figure is as wide as :data:`MAX_COLUMNS` panels whatever the columns (so the footer
    fits and every figure shows at one scale) and grows downwards; each row adds one panel
    height. Bar charts with long model names take one panel a row.
    """
    columns = min(max_columns, MAX_COLUMNS, max(1, panels))
    rows = -(-max(1, panels) // columns)
    width = PANEL_IN[0] * MAX_COLUMNS
    return rows, columns, (width, PANEL_IN[1] * rows + FOOTER_IN)


def _panels(panels: int, max_columns: int = MAX_COLUMNS) -> tuple[Figure, list[Axes]]:
    """A figure of ``panels`` panels on :func:`panel_grid`; the spare cells are removed."""
    import matplotlib.pyplot as plt

    rows, columns, size = panel_grid(panels, max_columns)
    fig, axes = plt.subplots(rows, columns, figsize=size, squeeze=False)
    flat = list(axes.ravel())
    for spare in flat[panels:]:
        fig.delaxes(spare)
    return fig, flat[:panels]


def _arch_legend(ax: Axes, archs: list[str]) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(color=ARCH_COLOURS.get(a, "grey"), label=a) for a in sorted(set(archs))]
    ax.legend(handles=handles, loc="upper right")


def _quality_vs_energy(frontier: pd.DataFrame, out: Path, note: str) -> str | None:
    groups = list(frontier.groupby(["task", "gpu"], sort=True))
    if not groups:
        return None
    fig, axes = _panels(len(groups))
    for ax, ((task, gpu), g) in zip(axes, groups, strict=True):
        for arch, s in g.groupby("arch"):
            ax.scatter(
                s["energy_per_response_j"],
                s["quality_score"],
                c=ARCH_COLOURS.get(str(arch), "grey"),
                label=arch,
                s=36,
                edgecolors=np.where(s["on_frontier"], "black", "none").tolist(),
            )
        flagged = g[_stalled(g)]
        _mark_stalled(ax, flagged["energy_per_response_j"], flagged["quality_score"])
        front = g[g["on_frontier"]].sort_values("energy_per_response_j")
        ax.step(front["energy_per_response_j"], front["quality_score"], where="post", c="k", lw=0.8)
        ax.set_xscale("log")
        _label_points(ax, g)
        ax.set_xlabel("energy per response (J, measured)")
        ax.set_ylabel(f"{g['quality_benchmark'].iloc[0]} ({quality_kind(g['quality_source'])})")
        ax.set_title(f"{task} on {gpu}")
        ax.legend()
    return _save(fig, out / FIGURES[0], note)


def _energy_per_correct(rows: pd.DataFrame, out: Path, note: str) -> str | None:
    have = rows[rows["energy_per_correct_j"].notna()]
    groups = list(have.groupby(["task", "gpu"], sort=True))
    if not groups:
        return None
    fig, axes = _panels(len(groups), max_columns=1)
    for ax, ((task, gpu), g) in zip(axes, groups, strict=True):
        g = g.sort_values("energy_per_correct_j")
        colours = [ARCH_COLOURS.get(a, "grey") for a in g["arch"]]
        kj = g["energy_per_correct_j"] / 1000
        names = [
            f"{_short(m)} (host-bound)" if stalled else _short(m)
            for m, stalled in zip(g["model_id"], _stalled(g), strict=True)
        ]
        bars = ax.barh(names, kj, color=colours, hatch=["//" if h else "" for h in _stalled(g)])
        ax.bar_label(bars, labels=[f"{v:.3g}" for v in kj], fontsize=MIN_FONT_PT, padding=2)
        ax.set_xlim(0, float(kj.max()) * 1.2)
        ax.set_xlabel("energy per correct answer (kJ)")
        kind = quality_kind(g["quality_source"])
        ax.set_title(f"{task} on {gpu} ({g['quality_benchmark'].iloc[0]}, {kind})")
        ax.invert_yaxis()
        _arch_legend(ax, list(g["arch"]))
    return _save(fig, out / FIGURES[1], note)


def _per_token_vs_params(rows: pd.DataFrame, out: Path, note: str) -> str | None:
    import matplotlib.pyplot as plt

    have = rows[rows["energy_per_token_j"].notna()]
    if have.empty:
        return None
    markers = dict(zip(sorted(have["task"].unique()), "osD^vP*X", strict=False))
    gpus = sorted(have["gpu"].unique())
    _, _, (width, _) = panel_grid(2)
    fig, axes = plt.subplots(
        len(gpus),
        2,
        figsize=(width, PANEL_IN[1] * len(gpus) + FOOTER_IN),
        sharey=True,
        squeeze=False,
    )
    for row_axes, gpu in zip(axes, gpus, strict=True):
        on_gpu = have[have["gpu"] == gpu]
        for ax, predictor in zip(row_axes, ("active", "total"), strict=True):
            for (arch, task), s in on_gpu.groupby(["arch", "task"]):
                ax.scatter(s[f"{predictor}_params"] / 1e9, s["energy_per_token_j"],
                           c=ARCH_COLOURS.get(arch, "grey"), marker=markers.get(task, "o"),
                           s=28, label=f"{arch} / {task}")  # fmt: skip
            flagged = on_gpu[_stalled(on_gpu)]
            _mark_stalled(ax, flagged[f"{predictor}_params"] / 1e9, flagged["energy_per_token_j"])
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(f"{predictor} parameters (billions)")
            ax.set_title(f"{gpu}: energy per token vs {predictor} params")
        row_axes[0].set_ylabel("energy per output token (J, measured)")
        # Outside the panels: eleven entries at 9 pt would cover the points.
        row_axes[1].legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return _save(fig, out / FIGURES[2], note)


def write_measured_figures(
    rows: pd.DataFrame, frontier: pd.DataFrame, out: Path, note: str
) -> list[str]:
    """Draw the measured study's figures into ``out``; return the file names written.

    Args:
        rows: The study's rows.
        frontier: :func:`mlenergy.studies.measured_analysis.quality_frontier`.
        out: Folder to write into.
        note: Footer text (energy source, who measured, quality label).
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    note = f"{note} {quality_footer(rows)}"
    with matplotlib.rc_context(_RC):
        made = [
            _quality_vs_energy(frontier, out, note),
            _energy_per_correct(rows, out, note),
            _per_token_vs_params(rows, out, note),
        ]
    return [m for m in made if m]
