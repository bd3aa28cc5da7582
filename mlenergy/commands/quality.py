"""``mlenergy quality``: perplexity or an lm-eval task of one model, stored as a quality record.

``--task perplexity`` evaluates held-out text of ``--corpus`` (default: CPython's bundled
``pydoc`` documentation, offline); a model without a tokenizer (presets, configs) gets a BPE
tokenizer trained on the corpus's training split. ``--task lm-eval:<task>`` runs
lm-evaluation-harness (optional extra ``lmeval``) on a hub or local checkpoint.
"""

from __future__ import annotations

from typing import Annotated

import typer

from mlenergy.commands.options import DataDirOption, resolve_data_dir
from mlenergy.errors import UserError


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
    from mlenergy.measure.provenance import collect_software

    if seq_len < 2:
        raise UserError(f"--seq-len must be at least 2 (got {seq_len})")
    if max_tokens is not None and max_tokens < seq_len + 1:
        raise UserError(f"--max-tokens must be at least {seq_len + 1}")
    run_store = None
    if store:  # a damaged or unwritable store fails now, not after the evaluation
        from mlenergy.store import RunStore

        run_store = RunStore(resolve_data_dir(data_dir))
        run_store.ensure_writable()
        if run_store.results_dir.is_dir():
            run_store.check()
    if task == "perplexity":
        records = [_perplexity(model, corpus, seq_len, max_tokens, device, dtype)]
    elif task.startswith("lm-eval:") and task.removeprefix("lm-eval:"):
        from mlenergy.quality.lmeval import evaluate_lm_eval, require_lm_eval

        require_lm_eval()
        records = evaluate_lm_eval(
            model,
            task.removeprefix("lm-eval:"),
            model=_pretrained_info(model, dtype),
            software=collect_software(),
            device=device,
            dtype=dtype,
            limit=limit,
        )
    else:
        raise UserError(f"unknown task {task!r}", "use perplexity or lm-eval:<task>")
    for r in records:
        err = f" +/- {r.stderr:.4g}" if r.stderr is not None else ""
        typer.echo(f"{r.model.model_id}  {r.task}  {r.metric} = {r.value:.6g}{err}")
    if run_store is not None:
        records = [_link_runs(r, run_store) for r in records]
        res = run_store.append(records)
        linked = len(records[0].linked_run_ids) if records else 0
        typer.echo(
            f"stored {res.added} quality record(s) in {resolve_data_dir(data_dir)} "
            f"(linked to {linked} energy run(s) of the same model)"
        )


def _link_runs(record, store):
    """Link a quality record to the stored energy runs of the same model (id, config, dtype)."""
    from mlenergy.records import QualityResult

    if not store.results_dir.is_dir():
        return record
    m = record.model
    ids = tuple(
        r.run_id
        for r in store.runs()
        if r.model.model_id == m.model_id
        and r.model.config_fingerprint == m.config_fingerprint
        and r.model.dtype == m.dtype
        and r.model.weights == m.weights
    )
    if not ids:
        return record
    return QualityResult(
        **{**record.model_dump(), "linked_run_ids": (*record.linked_run_ids, *ids)}
    )


def _pretrained_info(model_id: str, dtype: str):
    """The :class:`ModelInfo` of a hub or local checkpoint from its config (no weights read)."""
    from transformers import AutoConfig

    from mlenergy.models import model_info_from_config

    try:
        config = AutoConfig.from_pretrained(model_id)
    except (OSError, ValueError) as exc:
        raise UserError(
            f"cannot read the config of {model_id!r} ({exc})",
            "use a hub id reachable from here or a local checkpoint folder",
        ) from exc
    return model_info_from_config(config, model_id, dtype, "pretrained")


def _perplexity(
    model_src: str, corpus: str, seq_len: int, max_tokens: int | None, device: str, dtype: str
):
    """Perplexity of one model on the held-out split of ``corpus``."""
    import torch

    from mlenergy.measure.provenance import collect_software
    from mlenergy.models import load_model
    from mlenergy.quality.corpus import load_corpus, split_corpus
    from mlenergy.quality.perplexity import encode_text, perplexity, perplexity_record
    from mlenergy.quality.tokenizer import MIN_VOCAB_SIZE, train_tokenizer

    split = split_corpus(load_corpus(corpus))
    loaded = load_model(model_src, dtype, device)
    if loaded.tokenizer is not None:
        ids = loaded.tokenizer(split.val, add_special_tokens=False)["input_ids"]
        val_ids = torch.tensor(ids, dtype=torch.long)
        how = "model tokenizer"
    else:
        vocab = min(loaded.vocab_size, 8192)
        if vocab < MIN_VOCAB_SIZE:
            raise UserError(
                f"model vocabulary of {loaded.vocab_size} is too small for a trained tokenizer",
                "use a model with its own tokenizer",
            )
        val_ids = encode_text(train_tokenizer(split.train, vocab), split.val)
        how = f"bpe-{vocab} trained on the corpus"
    result = perplexity(
        loaded.model, val_ids, seq_len=seq_len, device=device, max_tokens=max_tokens
    )
    return perplexity_record(
        result,
        model=loaded.info,
        software=collect_software(),
        corpus=split.corpus.name,
        dataset=split.dataset_label("val"),
        tags={"tokenizer": how},
    )


def register(app: typer.Typer) -> None:
    """Add ``quality`` to the root app."""
    app.command("quality")(quality)
