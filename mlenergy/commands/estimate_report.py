"""Estimates as people read them: text summaries, the sweep table, its plot.

The ``mlenergy estimate`` commands call these; nothing here computes an estimate.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from mlenergy.estimate.api import Estimate
from mlenergy.estimate.prediction import BREAKDOWNS
from mlenergy.estimate.training import TrainingEstimate


def format_joules(v: float) -> str:
    """An energy in the unit that reads best (J, mJ or uJ)."""
    if v >= 1:
        return f"{v:.3f} J"
    if v >= 1e-3:
        return f"{v * 1e3:.2f} mJ"
    return f"{v * 1e6:.1f} uJ"


def format_estimate(e: Estimate) -> str:
    """A serving estimate as a few labelled lines (units in every figure)."""
    out = [
        f"{e.model} on {e.num_gpus} x {e.gpu} ({e.precision}, TP{e.tensor_parallel} "
        f"EP{e.expert_parallel} DP{e.data_parallel}), batch {e.batch_size:g}, "
        f"{e.input_tokens:g} in / {e.output_tokens:g} out tokens, "
        f"SM clock {e.sm_clock_mhz:.0f} MHz, engine {e.engine}"
        + (_offline_words(e) if e.mode == "offline" else ""),
        f"  energy per output token : {format_joules(e.energy_per_token_j)}"
        f"   (90% interval {format_joules(e.energy_per_token_j_lo)} - "
        f"{format_joules(e.energy_per_token_j_hi)})",
        f"  energy per request      : {format_joules(e.energy_per_request_j)}",
        f"  throughput              : {e.throughput_tokens_per_s:,.0f} output tokens/s",
        f"  average power           : {e.avg_power_w:,.0f} W (all GPUs)",
        f"  time                    : {e.itl_s * 1e3:.2f} ms per token per sequence, "
        + (
            f"{e.request_duration_s:.2f} s for the job ({e.prefill_duration_s:.2f} s prefill)"
            if e.mode == "offline"
            else f"{e.request_duration_s:.2f} s per request"
        ),
        *(
            f"  per token {name:<14}: "
            + " + ".join(f"{k} {format_joules(e.breakdown_j_per_token[k])}" for k in keys)
            for name, keys in BREAKDOWNS.items()
        ),
        "  memory per GPU          : "
        + ", ".join(f"{k} {v:.1f} GB" for k, v in e.memory_gb_per_gpu.items()),
        f"  source                  : {e.energy_source}",
    ]
    if e.warning:
        out.append(f"  warning                 : {e.warning}")
    return "\n".join(out)


def _offline_words(e: Estimate) -> str:
    cap = f", cap {e.max_output_tokens:g} tokens" if e.max_output_tokens else ""
    limit = e.max_num_seqs
    queue = f", {limit:g} at a time" if limit is not None and limit < e.batch_size else ""
    return f", offline job of {e.batch_size:g} requests{queue}{cap}"


def format_training(est: TrainingEstimate, model: str) -> str:
    """A training-step estimate as a few labelled lines."""
    return (
        f"training step of {est.batch_size} x {est.seq_len} tokens: {model} on {est.num_gpus} x "
        f"{est.gpu} (TP{est.tensor_parallel} DP{est.data_parallel}, {est.precision})\n"
        f"  energy per step  : {est.energy_per_step_j:,.0f} J "
        f"({format_joules(est.energy_per_token_j)} per token)\n"
        f"  step time        : {est.step_duration_s:.3f} s ({est.throughput_tokens_per_s:,.0f}"
        f" tokens/s, MFU {est.mfu:.0%})\n"
        f"  average power    : {est.avg_power_w:,.0f} W (all GPUs)\n"
        f"  source           : {est.energy_source} (uncalibrated for training: MFU prior)"
    )


def sweep_table(results: list[Estimate | str], axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """One row per sweep point: the axis values, the figures (J/token, tokens/s, W, MHz), error.

    Args:
        results: What :func:`~mlenergy.estimate.api.sweep` returned (an error message where a
            point could not be estimated), in :func:`itertools.product` order of ``axes``.
        axes: The swept axes and their values.
    """
    rows = []
    for combo, r in zip(itertools.product(*axes.values()), results, strict=True):
        row: dict[str, Any] = dict(zip(axes, combo, strict=True))
        if isinstance(r, str):
            row["error"] = r
        else:
            row.update(
                energy_per_token_j=r.energy_per_token_j,
                throughput_tokens_per_s=r.throughput_tokens_per_s,
                avg_power_w=r.avg_power_w,
                sm_clock_mhz=r.sm_clock_mhz,
                error="",
            )
        rows.append(row)
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """Rows as aligned text columns (floats to 4 significant digits); ``""`` for no rows."""
    if not rows:
        return ""
    cols = list(rows[0])
    for r in rows:
        cols += [c for c in r if c not in cols]

    def cell(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    widths = {c: max(len(c), *(len(cell(r.get(c, ""))) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols)]
    lines += ["  ".join(cell(r.get(c, "")).ljust(widths[c]) for c in cols) for r in rows]
    return "\n".join(lines)


def plot_sweep(rows: list[dict[str, Any]], axes: dict[str, list[Any]], path: Path) -> Path:
    """Energy per output token against the last axis, one line per value of the others (PNG).

    Args:
        rows: :func:`sweep_table` rows (points with an error are left out).
        axes: The swept axes (the last is the x axis).
        path: The PNG to write (folders are created).

    Returns:
        ``path``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(axes)
    x = names[-1]
    fig, ax = plt.subplots(figsize=(6, 4))
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in rows:
        if not row.get("error"):
            groups.setdefault(tuple(row[n] for n in names[:-1]), []).append(row)
    for key, items in groups.items():
        label = ", ".join(
            f"{n}={v:g}" if isinstance(v, float) else f"{n}={v}"
            for n, v in zip(names[:-1], key, strict=True)
        )
        xs, ys = [r[x] for r in items], [r["energy_per_token_j"] for r in items]
        ax.plot(xs, ys, "o-", label=label or None)
    ax.set_xlabel(x)
    ax.set_ylabel("energy per output token (J)")
    if len(groups) > 1:
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
