"""The quality workflow: evaluate one model on one task and link the result to its energy runs.

:func:`evaluate_quality` is what ``mlenergy quality`` calls. ``perplexity`` evaluates the
held-out split of a corpus (a model without a tokenizer, such as a preset or a config, gets a
BPE tokenizer trained on the corpus's training split); ``lm-eval:<task>`` runs
lm-evaluation-harness on a hub or local checkpoint. :func:`link_to_runs` ties a quality record
to the stored energy runs of the same model instance (id, config fingerprint, dtype, weights).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mlenergy.errors import UserError
from mlenergy.measure.provenance import collect_software
from mlenergy.models import load_model, model_info_from_config, resolve_source
from mlenergy.quality.corpus import load_corpus, split_corpus
from mlenergy.quality.lmeval import TASK_PREFIX, evaluate_lm_eval, require_lm_eval
from mlenergy.quality.perplexity import encode_text, perplexity, perplexity_record
from mlenergy.quality.tokenizer import MIN_VOCAB_SIZE, train_tokenizer
from mlenergy.records import ModelInfo, QualityResult

if TYPE_CHECKING:
    from mlenergy.store import RunStore

PERPLEXITY_TASK = "perplexity"
_MAX_TRAINED_VOCAB = 8192
"""Largest vocabulary trained for a model without its own tokenizer."""


@dataclass(frozen=True)
class QualityRequest:
    """What to evaluate.

    Attributes:
        model: ``preset:<name>``, a hub id, a folder or a config.json.
        task: ``perplexity`` or ``lm-eval:<task>``.
        corpus: Perplexity text: ``pydoc``, a path or ``hf:<id>``.
        seq_len: Perplexity context in tokens (>= 2).
        max_tokens: Evaluate at most this many held-out tokens (``None``: all).
        limit: lm-eval: at most this many samples (``None``: all).
        device: Torch device.
        dtype: ``float32``, ``float16`` or ``bfloat16``.
    """

    model: str
    task: str = PERPLEXITY_TASK
    corpus: str = "pydoc"
    seq_len: int = 128
    max_tokens: int | None = None
    limit: int | None = None
    device: str = "cpu"
    dtype: str = "float32"

    def validate(self) -> QualityRequest:
        """Check the values; return ``self``.

        Raises:
            UserError: Naming the bad option.
        """
        if self.seq_len < 2:
            raise UserError(f"--seq-len must be at least 2 (got {self.seq_len})")
        if self.max_tokens is not None and self.max_tokens < self.seq_len + 1:
            raise UserError(f"--max-tokens must be at least {self.seq_len + 1}")
        if self.task != PERPLEXITY_TASK and not self.lm_eval_task:
            raise UserError(f"unknown task {self.task!r}", "use perplexity or lm-eval:<task>")
        return self

    @property
    def lm_eval_task(self) -> str | None:
        """The harness task name of an ``lm-eval:<task>`` request, else ``None``."""
        name = self.task.removeprefix(TASK_PREFIX)
        return name if self.task.startswith(TASK_PREFIX) and name else None


def evaluate_quality(request: QualityRequest) -> list[QualityResult]:
    """Evaluate ``request.model`` on ``request.task``.

    Returns:
        One record for perplexity; one per metric for an lm-eval task.

    Raises:
        UserError: For a bad request, model source or corpus, or a missing lm-eval extra.
    """
    request.validate()
    task = request.lm_eval_task
    if task is None:
        return [model_perplexity(request)]

    require_lm_eval()
    return evaluate_lm_eval(
        request.model,
        task,
        model=pretrained_info(request.model, request.dtype),
        software=collect_software(),
        device=request.device,
        dtype=request.dtype,
        limit=request.limit,
    )


def pretrained_info(model: str, dtype: str) -> ModelInfo:
    """The :class:`ModelInfo` of a hub or local checkpoint from its config (no weights read).

    Raises:
        UserError: If the source has no real weights (lm-eval needs a checkpoint) or its config
            cannot be read.
    """
    resolved = resolve_source(model)
    if not resolved.pretrained:
        raise UserError(
            f"{model!r} has no trained weights to evaluate with lm-eval",
            "use a hub id or a local checkpoint folder",
        )
    return model_info_from_config(resolved.config, resolved.model_id, dtype, "pretrained")


def model_perplexity(
    request: QualityRequest, *, seed: int = 0, tags: dict[str, str] | None = None
) -> QualityResult:
    """Perplexity of one model on the held-out split of ``request.corpus``.

    Args:
        request: Model, corpus, context, token cap, device and dtype.
        seed: Seed of the random weights of a model built from a config or preset.
        tags: Tags added to the record's own (``tokenizer``).

    Raises:
        UserError: For a bad model or corpus, or a vocabulary too small for a trained tokenizer.
    """
    import torch

    split = split_corpus(load_corpus(request.corpus))
    loaded = load_model(request.model, request.dtype, request.device, seed)
    if loaded.tokenizer is not None:
        ids = loaded.tokenizer(split.val, add_special_tokens=False)["input_ids"]
        val_ids = torch.tensor(ids, dtype=torch.long)
        how = "model tokenizer"
    else:
        vocab = min(loaded.vocab_size, _MAX_TRAINED_VOCAB)
        if vocab < MIN_VOCAB_SIZE:
            raise UserError(
                f"model vocabulary of {loaded.vocab_size} is too small for a trained tokenizer",
                "use a model with its own tokenizer",
            )
        val_ids = encode_text(train_tokenizer(split.train, vocab), split.val)
        how = f"bpe-{vocab} trained on the corpus"
    result = perplexity(
        loaded.model,
        val_ids,
        seq_len=request.seq_len,
        device=loaded.device,
        max_tokens=request.max_tokens,
    )
    return perplexity_record(
        result,
        model=loaded.info,
        software=collect_software(),
        corpus=split.corpus.name,
        dataset=split.dataset_label("val"),
        tags={"tokenizer": how, **(tags or {})},
    )


def link_to_runs(record: QualityResult, store: RunStore) -> QualityResult:
    """Link a quality record to the stored energy runs of the same model instance.

    Runs match on model id, config fingerprint, dtype and weights.

    Returns:
        The record with the matching run ids added to ``linked_run_ids`` (unchanged if none).
    """
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
