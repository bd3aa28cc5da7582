"""``mlenergy quality``: perplexity or an lm-eval task of one model, stored as a quality record.

The workflow lives in :mod:`mlenergy.quality.evaluate`; this module parses the options.
"""

from __future__ import annotations

from typing import Annotated

import typer

from mlenergy.commands.options import DataDirOption, resolve_data_dir
from mlenergy.quality.evaluate import QualityRequest, evaluate_quality, link_to_runs
from mlenergy.store.preflight import open_store_for_append


def quality(
    model: Annotated[str, typer.Option(help="preset:<name>, hub id, folder or config.json.")],
    task: Annotated[str, typer.Option(help="perplexity or lm-eval:<task>.")] = "perplexity",
    corpus: Annotated[str, typer.Option(help="Perplexity text: pydoc, a path or hf:<id>.")] = (
        "pydoc"
    ),
    seq_len: Annotated[int, typer.Option(help="Perplexity context in tokens.")] = 128,
    max_tokens: Annotated[
        int | None, typer.Option(help="Evaluate at most this many held-out tokens.")
    ] = None,
    limit: Annotated[int | None, typer.Option(help="lm-eval: at most this many samples.")] = None,
    device: Annotated[str, typer.Option(help="Torch device.")] = "cpu",
    dtype: Annotated[str, typer.Option(help="float32, float16 or bfloat16.")] = "float32",
    data_dir: DataDirOption = None,
    store: Annotated[bool, typer.Option(help="Append the result to the store.")] = True,
) -> None:
    """Measure the quality of a model and store it as a quality record."""
    request = QualityRequest(
        model, task, corpus, seq_len, max_tokens, limit, device, dtype
    ).validate()
    # A damaged or unwritable store fails now, not after the evaluation.
    run_store = open_store_for_append(resolve_data_dir(data_dir)) if store else None
    records = evaluate_quality(request)
    for r in records:
        err = f" +/- {r.stderr:.4g}" if r.stderr is not None else ""
        typer.echo(f"{r.model.model_id}  {r.task}  {r.metric} = {r.value:.6g}{err}")
    if run_store is not None:
        records = [link_to_runs(r, run_store) for r in records]
        added = run_store.append(records).added
        linked = len(records[0].linked_run_ids) if records else 0
        typer.echo(
            f"stored {added} quality record(s) in {run_store.data_dir} "
            f"(linked to {linked} energy run(s) of the same model)"
        )


def register(app: typer.Typer) -> None:
    """Add ``quality`` to the root app."""
    app.command("quality")(quality)
