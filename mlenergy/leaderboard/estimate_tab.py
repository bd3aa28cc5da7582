"""The leaderboard's estimator playground: the estimator's answer as escaped HTML and a chart.

Only adapts :mod:`mlenergy.estimate` for the app; when the estimator is not installed the
playground tab is simply not shown.
"""

from __future__ import annotations

import html
from pathlib import Path

from mlenergy.errors import UserError
from mlenergy.leaderboard import plots as plots
from mlenergy.leaderboard.html import render_problems

PRECISIONS = ["bfloat16", "fp8", "mxfp4", "float32"]


def estimator_available() -> bool:
    """Whether the estimator (:func:`mlenergy.estimate.api.estimate`) can be imported."""
    try:
        from mlenergy.estimate.api import estimate  # noqa: F401
    except ImportError:
        return False
    return True


def estimator_choices() -> dict[str, list[str]]:
    """Reference models, catalog GPUs and precisions for the playground's pickers."""
    from mlenergy.estimate.catalog import catalog_names

    models: list[str] = []
    try:
        from mlenergy.estimate.locate import default_configs_dir

        folder = default_configs_dir()
        if folder is not None and folder.is_dir():
            models = sorted(p.stem.replace("__", "/") for p in folder.glob("*.json"))
    except ImportError:
        pass
    preferred = "meta-llama/Llama-3.1-8B-Instruct"
    if preferred in models:
        models.remove(preferred)
        models.insert(0, preferred)
    gpus = list(catalog_names())
    if "H100-SXM5-80GB" in gpus:
        gpus.remove("H100-SXM5-80GB")
        gpus.insert(0, "H100-SXM5-80GB")
    return {"models": models, "gpus": gpus, "precisions": PRECISIONS}


def run_estimate(
    model: str | None,
    upload: str | None,
    gpu: str | None,
    num_gpus: float,
    batch_size: float,
    input_tokens: float,
    output_tokens: float,
    precision: str | None,
    clock_mhz: float | None,
):
    """Estimate one configuration; return ``(html, figure)`` for the playground.

    Args:
        model: Reference model id (ignored when ``upload`` is given).
        upload: Path of an uploaded ``config.json``, if any.
        gpu: Catalog GPU name.
        num_gpus: GPUs, used tensor-parallel.
        batch_size: Sequences decoding together.
        input_tokens: Prompt length (tokens).
        output_tokens: Output length (tokens).
        precision: Weight precision.
        clock_mhz: Locked SM clock in MHz; 0 or ``None`` for the GPU's maximum.
    """
    from mlenergy.estimate.api import estimate

    target = str(Path(upload)) if upload else (model or "")
    empty = plots.breakdown_bars({}, "Energy per output token by cause", "J per token")
    if not target or not gpu:
        return render_problems(
            ["pick a model (or upload a config.json) and a GPU"], "Cannot estimate"
        ), empty
    n = max(1, int(num_gpus or 1))
    try:
        e = estimate(
            target,
            gpu,
            batch_size=float(batch_size),
            output_tokens=float(output_tokens),
            input_tokens=float(input_tokens),
            precision=precision,
            num_gpus=n,
            tensor_parallel=n,
            sm_clock_mhz=float(clock_mhz) if clock_mhz else None,
        )
    except UserError as exc:
        return render_problems([exc.message], "Cannot estimate"), empty
    parts = e.breakdown_j_per_token
    rows = [
        (
            "Energy per output token",
            f"{e.energy_per_token_j:.4g} J (90% interval {e.energy_per_token_j_lo:.3g} "
            f"to {e.energy_per_token_j_hi:.3g} J)",
        ),
        ("Energy per request", f"{e.energy_per_request_j:.4g} J"),
        (
            "Prefill / decode share",
            f"{parts.get('prefill', 0):.3g} J / {parts.get('decode', 0):.3g} J per token",
        ),
        ("Throughput", f"{e.throughput_tokens_per_s:.4g} output tokens/s"),
        ("Average power (all GPUs)", f"{e.avg_power_w:.4g} W"),
        ("Inter-token latency", f"{e.itl_s * 1000:.4g} ms"),
        ("SM clock", f"{e.sm_clock_mhz:.0f} MHz"),
        ("Memory per GPU", f"{e.memory_gb_per_gpu.get('total', float('nan')):.1f} GB"),
        (
            "Parameters (total / active)",
            f"{e.total_params / 1e9:.2f} B / {e.active_params / 1e9:.2f} B",
        ),
        ("Energy source", e.energy_source),
    ]
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    causes = {k: parts[k] for k in ("compute", "memory", "static_idle", "overhead") if k in parts}
    figure = plots.breakdown_bars(causes, "Energy per output token by cause", "J per token")
    return f'<table class="lb-table" id="est-table"><tbody>{body}</tbody></table>', figure
