"""The optional quality run of a plan: one per model, precision and device.

``quality: perplexity`` evaluates the held-out split of the bundled ``pydoc`` corpus (offline)
with :data:`PERPLEXITY_SEQ_LEN`-token windows over at most :data:`PERPLEXITY_MAX_TOKENS`
tokens; a model without a tokenizer (presets, configs) gets a BPE tokenizer trained on the
corpus's training split. ``quality: lm-eval:<task>`` runs lm-evaluation-harness (extra
``lmeval``) on a hub or local checkpoint.
"""

from __future__ import annotations

from mlenergy.errors import UserError
from mlenergy.records import QualityResult
from mlenergy.sweep.spec import RunSpec

PERPLEXITY_CORPUS = "pydoc"
PERPLEXITY_SEQ_LEN = 128
"""Context of each perplexity window, in tokens."""
PERPLEXITY_MAX_TOKENS = 4096
"""Held-out tokens evaluated at most."""


def run_quality(spec: RunSpec, tags: dict[str, str]) -> list[QualityResult]:
    """Evaluate the quality of ``spec.model`` as ``spec.quality`` asks; return the records.

    Raises:
        UserError: An unknown task, or a model the task cannot evaluate.
    """
    task = spec.quality or ""
    if task == "perplexity":
        return [_perplexity(spec, tags)]
    if task.startswith("lm-eval:"):
        return _lm_eval(spec, task.removeprefix("lm-eval:"), tags)
    raise UserError(f"unknown quality task {task!r}", "Use perplexity or lm-eval:<task>")


def _perplexity(spec: RunSpec, tags: dict[str, str]) -> QualityResult:
    import torch

    from mlenergy.measure.provenance import collect_software
    from mlenergy.models import load_model
    from mlenergy.quality.corpus import load_corpus, split_corpus
    from mlenergy.quality.perplexity import encode_text, perplexity, perplexity_record
    from mlenergy.quality.tokenizer import MIN_VOCAB_SIZE, train_tokenizer

    split = split_corpus(load_corpus(PERPLEXITY_CORPUS))
    loaded = load_model(spec.model, spec.precision, spec.device, spec.seed)
    if loaded.tokenizer is not None:
        ids = loaded.tokenizer(split.val, add_special_tokens=False)["input_ids"]
        val_ids = torch.tensor(ids, dtype=torch.long)
        how = "model tokenizer"
    else:
        vocab = min(loaded.vocab_size, 8192)
        if vocab < MIN_VOCAB_SIZE:
            raise UserError(
                f"model vocabulary of {loaded.vocab_size} is too small for a trained tokenizer",
                "Use a model with its own tokenizer, or drop the quality key",
            )
        val_ids = encode_text(train_tokenizer(split.train, vocab), split.val)
        how = f"bpe-{vocab} trained on the corpus"
    result = perplexity(
        loaded.model,
        val_ids,
        seq_len=PERPLEXITY_SEQ_LEN,
        device=loaded.device,
        max_tokens=PERPLEXITY_MAX_TOKENS,
    )
    return perplexity_record(
        result,
        model=loaded.info,
        software=collect_software(),
        corpus=split.corpus.name,
        dataset=split.dataset_label("val"),
        tags={"tokenizer": how, **tags},
    )


def _lm_eval(spec: RunSpec, task: str, tags: dict[str, str]) -> list[QualityResult]:
    from mlenergy.measure.provenance import collect_software
    from mlenergy.models import model_info_from_config
    from mlenergy.models.loading import canonical_dtype, resolve_source
    from mlenergy.quality.lmeval import evaluate_lm_eval, require_lm_eval

    require_lm_eval()
    source = resolve_source(spec.model)
    if not source.pretrained:
        raise UserError(
            f"lm-eval needs real weights; {spec.model!r} is built with random weights",
            "Use a hub id or a checkpoint folder, or quality: perplexity",
        )
    dtype = canonical_dtype(spec.precision)
    info = model_info_from_config(source.config, source.model_id, dtype, "pretrained")
    records = evaluate_lm_eval(
        spec.model, task, model=info, software=collect_software(), device=spec.device, dtype=dtype
    )
    return [
        QualityResult.model_validate({**r.model_dump(), "tags": {**r.tags, **tags}})
        for r in records
    ]
