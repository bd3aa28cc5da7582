"""The Estimator tab: the analytical estimator's answer as escaped HTML and a chart.

Only adapts :mod:`mlenergy.estimate` for the app. :func:`estimate_figures` is the data behind
the tab and the ``/estimate`` API endpoint (memoised: the estimate of one configuration never
changes).
"""

from __future__ import annotations

import functools
import html
import json
from pathlib import Path

import gradio as gr

from mlenergy.errors import UserError
from mlenergy.estimate.api import estimate
from mlenergy.estimate.prediction import BREAKDOWNS
from mlenergy.leaderboard import plots as plots
from mlenergy.leaderboard.client_errors import LOG, log_line, public_message
from mlenergy.leaderboard.html import render_problems
from mlenergy.reference import default_configs_dir
from mlenergy.reference.gpus import catalog_names

PRIVATE = "private"

PRECISIONS = ["bfloat16", "fp8", "mxfp4", "float32"]


def estimator_choices() -> dict[str, list[str]]:
    """Reference models, catalog GPUs and precisions for the playground's pickers."""
    models: list[str] = []
    folder = default_configs_dir()
    if folder.is_dir():
        models = sorted(p.stem.replace("__", "/") for p in folder.glob("*.json"))
    preferred = "meta-llama/Llama-3.1-8B-Instruct"
    if preferred in models:
        models.remove(preferred)
        models.insert(0, preferred)
    gpus = list(catalog_names())
    if "H100-SXM5-80GB" in gpus:
        gpus.remove("H100-SXM5-80GB")
        gpus.insert(0, "H100-SXM5-80GB")
    return {"models": models, "gpus": gpus, "precisions": PRECISIONS}


@functools.lru_cache(maxsize=1024)
def estimate_figures(
    model: str,
    gpu: str,
    batch_size: float = 32,
    input_tokens: float = 512,
    output_tokens: float = 512,
    precision: str | None = None,
    num_gpus: int = 1,
    clock_mhz: float | None = None,
) -> dict:
    """Estimate one configuration (tensor parallel over ``num_gpus``) as JSON-ready figures.

    Args:
        model: Reference model id or the path of a ``config.json``.
        gpu: Catalog GPU name.
        batch_size: Sequences decoding together.
        input_tokens: Prompt length (tokens).
        output_tokens: Output length (tokens).
        precision: Weight precision (``None``: the model's own).
        num_gpus: GPUs, used tensor-parallel.
        clock_mhz: Locked SM clock in MHz; 0 or ``None`` for the GPU's maximum.

    Returns:
        :meth:`mlenergy.estimate.api.Estimate.to_dict` (energy in J, time in s, power in W).

    Raises:
        UserError: The estimator refused the inputs (its message says which).
    """
    if not model or not gpu:
        raise UserError("pick a model (or upload a config.json) and a GPU", "name both")
    n = max(1, int(num_gpus or 1))
    e = estimate(
        model,
        gpu,
        batch_size=float(batch_size),
        output_tokens=float(output_tokens),
        input_tokens=float(input_tokens),
        precision=precision,
        num_gpus=n,
        tensor_parallel=n,
        sm_clock_mhz=float(clock_mhz) if clock_mhz else None,
    )
    return json.loads(json.dumps(e.to_dict(), default=str))


def _rows(e: dict) -> list[tuple[str, str]]:
    parts = e["breakdown_j_per_token"]
    mem = e["memory_gb_per_gpu"].get("total", float("nan"))
    return [
        (
            "Energy per output token",
            f"{e['energy_per_token_j']:.4g} J (90% interval {e['energy_per_token_j_lo']:.3g} "
            f"to {e['energy_per_token_j_hi']:.3g} J)",
        ),
        ("Energy per request", f"{e['energy_per_request_j']:.4g} J"),
        (
            "Prefill / decode share",
            f"{parts.get('prefill', 0):.3g} J / {parts.get('decode', 0):.3g} J per token",
        ),
        ("Throughput", f"{e['throughput_tokens_per_s']:.4g} output tokens/s"),
        ("Average power (all GPUs)", f"{e['avg_power_w']:.4g} W"),
        ("Inter-token latency", f"{e['itl_s'] * 1000:.4g} ms"),
        ("SM clock", f"{e['sm_clock_mhz']:.0f} MHz"),
        ("Memory per GPU", f"{mem:.1f} GB"),
        (
            "Parameters (total / active)",
            f"{e['total_params'] / 1e9:.2f} B / {e['active_params'] / 1e9:.2f} B",
        ),
        ("Energy source", e["energy_source"]),
    ]


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
    """Estimate one configuration; return ``(html, figure)`` for the tab.

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
    target = str(Path(upload)) if upload else (model or "")
    empty = plots.breakdown_bars({}, "Energy per output token by cause", "J per token")
    try:
        e = estimate_figures(
            target, gpu or "", float(batch_size), float(input_tokens), float(output_tokens),
            precision, max(1, int(num_gpus or 1)), float(clock_mhz) if clock_mhz else None,
        )  # fmt: skip
    except UserError as exc:
        LOG.warning(log_line("estimator tab", exc.message))
        return render_problems([public_message(exc.message)], "Cannot estimate"), empty
    body = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in _rows(e)
    )
    parts = e["breakdown_j_per_token"]
    causes = {k: parts[k] for k in BREAKDOWNS["by cause"] if k in parts}
    figure = plots.breakdown_bars(causes, "Energy per output token by cause", "J per token")
    return f'<table class="lb-table" id="est-table"><tbody>{body}</tbody></table>', figure


def build_estimate_tab() -> None:
    """Lay out the Estimator tab."""
    est = estimator_choices()
    with gr.Tab("Estimator", id="tab-estimator"):
        with gr.Row():
            model = gr.Dropdown(
                est["models"],
                value=est["models"][0] if est["models"] else None,
                label="Reference model",
                elem_id="est-model",
            )
            upload = gr.File(
                label="…or upload a config.json", file_types=[".json"], elem_id="est-upload"
            )
            gpu = gr.Dropdown(
                est["gpus"],
                value=est["gpus"][0] if est["gpus"] else None,
                label="GPU",
                elem_id="est-gpu",
            )
        with gr.Row():
            gpus = gr.Slider(1, 8, value=1, step=1, label="GPUs (tensor parallel)")
            batch = gr.Slider(1, 512, value=32, step=1, label="Batch size")
            tokens_in = gr.Slider(1, 32768, value=512, step=1, label="Input tokens")
            tokens_out = gr.Slider(1, 32768, value=512, step=1, label="Output tokens")
            prec = gr.Dropdown(est["precisions"], value=est["precisions"][0], label="Precision")
            clock = gr.Slider(0, 3000, value=0, step=15, label="SM clock (MHz); 0 = max")
        button = gr.Button("Estimate", variant="primary", elem_id="est-run")
        text = gr.HTML(elem_id="est-result")
        figure = gr.Plot(elem_id="est-plot")
    inputs: list[gr.Dropdown | gr.File | gr.Slider] = [
        model,
        upload,
        gpu,
        gpus,
        batch,
        tokens_in,
        tokens_out,
        prec,
        clock,
    ]
    button.click(run_estimate, inputs, [text, figure], api_visibility=PRIVATE)
    gr.on(
        [w.change for w in inputs],
        run_estimate,
        inputs,
        [text, figure],
        trigger_mode="always_last",
        api_visibility=PRIVATE,
    )
