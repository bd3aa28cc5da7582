"""PNG figures of the dense-vs-MoE report (matplotlib, Agg backend).

Every figure carries a footer naming the energy source; a modelled figure says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mlenergy.analysis.frontier import pareto_frontier
from mlenergy.studies.conclusion import energy_note, energy_unit

FIGURES = (
    "energy_to_quality.png",
    "train_energy_to_target.png",
    "inference_pareto.png",
    "inference_by_batch.png",
    "expert_utilisation.png",
)


def _figure_note(ax_fig: Any, energy_source: str) -> None:
    ax_fig.text(
        0.5, 0.005, energy_note(energy_source), ha="center", va="bottom", fontsize=7, wrap=True
    )


def _save(
    fig: Any, path: Path, energy_source: str, rect: tuple[float, ...] = (0, 0.04, 1, 1)
) -> str:
    """Label ``fig`` with the energy source, save it as a PNG at ``path``, close it.

    Returns:
        The file name written (for the report's list of figures).
    """
    import matplotlib.pyplot as plt

    _figure_note(fig, energy_source)
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


def _finish(fig: Any, ax: Any, path: Path, style: _Style) -> str:
    """Add the legend and save the figure; return its file name."""
    ax.legend(fontsize=7)
    return _save(fig, path, style.energy_source)


def _colour(family: str, i: int) -> Any:
    import matplotlib

    cmap = matplotlib.colormaps["Blues" if family == "dense" else "Oranges"]
    return cmap(0.55 + 0.15 * (i % 3))


@dataclass(frozen=True)
class _Style:
    """What every figure of one report shares: colours, energy wording and unit, source."""

    colours: dict[str, Any]
    energy_word: str
    unit: str
    scale: float
    energy_source: str


def write_figures(t: dict[str, Any], out: Path, energy_source: str) -> list[str]:
    """Draw the study's PNG figures into ``out``; return the file names written."""
    import matplotlib

    matplotlib.use("Agg", force=False)

    summary = t["summary"]
    colours = {}
    for fam in ("dense", "moe"):
        for i, v in enumerate(summary.loc[summary["family"] == fam, "variant"]):
            colours[v] = _colour(fam, i)
    modelled = energy_source.startswith("modelled")
    unit, scale = energy_unit(summary["train_energy_j"])
    style = _Style(colours, "modelled energy" if modelled else "energy", unit, scale, energy_source)
    written = [
        _curves(t, out / FIGURES[0], style),
        _train_bars(t, out / FIGURES[1], style),
        _pareto(t, out / FIGURES[2], style),
        _by_batch(t, out / FIGURES[3], style),
        _utilisation(t, out / FIGURES[4], style),
    ]
    return [name for name in written if name is not None]


def _curves(t: dict[str, Any], path: Path, style: _Style) -> str:
    """Validation perplexity against training energy so far, per model and seed."""
    import matplotlib.pyplot as plt

    summary, ck = t["summary"], t["checkpoints"]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    ax.set(
        xlabel=f"training {style.energy_word} so far ({style.unit})",
        ylabel="validation perplexity",
        title="Energy-to-quality curves (dotted: iso-quality target)",
    )
    for (variant, seed), sub in ck.groupby(["variant", "seed"], sort=False):
        sub = sub.sort_values("step")
        x = sub["energy_j"].astype(float) * style.scale
        ax.plot(x, sub["val_perplexity"], marker="o", ms=3, color=style.colours.get(variant),
                label=variant if seed == ck["seed"].min() else None,
                linestyle="-" if variant.startswith("dense") else "--")  # fmt: skip
    ax.axhline(summary["target_perplexity"].iloc[0], color="grey", lw=0.8, ls=":")
    ax.set_yscale("log")
    return _finish(fig, ax, path, style)


def _train_bars(t: dict[str, Any], path: Path, style: _Style) -> str:
    """Training energy to reach the iso-perplexity target, with its interval."""
    import matplotlib.pyplot as plt

    summary = t["summary"]
    scale = style.scale
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    vals = summary["train_energy_j_to_target"].astype(float) * scale
    lo = vals - summary["train_energy_j_to_target_ci_low"].astype(float) * scale
    hi = summary["train_energy_j_to_target_ci_high"].astype(float) * scale - vals
    ax.bar(summary["variant"], vals, yerr=[lo.fillna(0), hi.fillna(0)],
           color=[style.colours.get(v) for v in summary["variant"]], capsize=3)  # fmt: skip
    ax.set_ylabel(f"training {style.energy_word} ({style.unit})")
    ax.set_title(f"Training energy to reach perplexity {summary['target_perplexity'].iloc[0]:.4g}")
    ax.tick_params(axis="x", labelrotation=20, labelsize=7)
    return _save(fig, path, style.energy_source)


def _pareto(t: dict[str, Any], path: Path, style: _Style) -> str:
    """Inference energy per token against perplexity, with the Pareto frontier."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    ax.set(
        xlabel="validation perplexity (lower is better)",
        ylabel=f"inference {style.energy_word} per token (J), batch {t['batch_size']}",
        title="Inference energy per token versus quality",
    )
    pts = t["summary"].dropna(subset=["energy_per_token_j", "final_val_perplexity"])
    for _, r in pts.iterrows():
        ax.scatter(r["final_val_perplexity"], r["energy_per_token_j"], s=60,
                   color=style.colours.get(r["variant"]),
                   marker="o" if r["family"] == "dense" else "^", label=r["variant"])  # fmt: skip
    front = pareto_frontier(pts, "final_val_perplexity", "energy_per_token_j")
    if len(front) > 1:
        ax.step(front["final_val_perplexity"], front["energy_per_token_j"], where="post",
                color="black", lw=1, label="Pareto frontier")  # fmt: skip
    return _finish(fig, ax, path, style)


def _by_batch(t: dict[str, Any], path: Path, style: _Style) -> str | None:
    """Inference energy per token by batch size (``None`` without inference runs)."""
    import matplotlib.pyplot as plt

    inf = t["inference"]
    if inf.empty:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.set(
        xlabel="batch size",
        ylabel=f"inference {style.energy_word} per token (J)",
        title="Inference energy per generated token by batch size",
    )
    g = inf.groupby(["variant", "batch_size"], as_index=False)["energy_per_token_j"].mean()
    for variant, sub in g.groupby("variant", sort=False):
        ax.plot(sub["batch_size"], sub["energy_per_token_j"], marker="o",
                color=style.colours.get(variant), label=variant)  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    return _finish(fig, ax, path, style)


def _utilisation(t: dict[str, Any], path: Path, style: _Style) -> str | None:
    """Each MoE model's share of routed tokens per expert (``None`` without MoE runs)."""
    import matplotlib.pyplot as plt

    tr = t["training"]
    util = tr.dropna(subset=["expert_utilisation"]) if "expert_utilisation" in tr else tr
    util = util[util["expert_utilisation"].map(lambda u: bool(u))] if not util.empty else util
    if util.empty:
        return None
    first = util.groupby("variant", sort=False).first().reset_index()
    fig, axes = plt.subplots(1, len(first), figsize=(3.2 * len(first), 3.4), squeeze=False)
    for ax, (_, r) in zip(axes[0], first.iterrows(), strict=True):
        u = np.asarray(r["expert_utilisation"], dtype=float)
        ax.bar(np.arange(u.size), u, color=style.colours.get(r["variant"]))
        ax.axhline(1.0 / u.size, color="grey", lw=0.8, ls=":")
        ax.set_title(f"{r['variant']}\nCV {r['expert_utilisation_cv']:.2f}", fontsize=8)
        ax.set_xlabel("expert")
    axes[0][0].set_ylabel("share of routed tokens")
    fig.suptitle("Expert utilisation at the end of training (dotted: uniform)", fontsize=9)
    return _save(fig, path, style.energy_source, rect=(0, 0.05, 1, 0.95))
