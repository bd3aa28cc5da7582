"""Perplexity of a causal language model on held-out text, with a standard error.

The token stream is cut into windows of ``seq_len + 1`` tokens that overlap by one, so every
token but the first is predicted exactly once, from at most ``seq_len`` tokens of context.
Perplexity is ``exp`` of the mean negative log-likelihood per predicted token (nats); its
standard error comes from the spread of per-window means (delta method).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mlenergy.errors import UserError
from mlenergy.records import ModelInfo, QualityResult, Software

if TYPE_CHECKING:
    import torch
    from tokenizers import Tokenizer


@dataclass(frozen=True)
class PerplexityResult:
    """Perplexity of one model on one token stream.

    Attributes:
        perplexity: ``exp(nll_per_token)`` (dimensionless).
        nll_per_token: Mean negative log-likelihood per predicted token, in nats.
        stderr: Standard error of :attr:`perplexity` (delta method over windows); ``None``
            with a single window.
        num_tokens: Tokens predicted.
        num_windows: Windows evaluated.
        seq_len: Context length in tokens.
    """

    perplexity: float
    nll_per_token: float
    stderr: float | None
    num_tokens: int
    num_windows: int
    seq_len: int


def encode_text(tok: Tokenizer, text: str, *, chunk_lines: int = 200) -> torch.Tensor:
    """Tokenise ``text`` into one stream of token ids (int64 tensor).

    Lines are encoded in batches (``encode_batch``), which is exact for a byte-level
    tokenizer because its pre-tokenizer never merges across a line break.

    Args:
        tok: A ``tokenizers.Tokenizer``.
        text: The text.
        chunk_lines: Lines per encoded chunk.

    Returns:
        A 1-D ``torch.long`` tensor of token ids.
    """
    import torch

    lines = text.splitlines(keepends=True)
    chunks = ["".join(lines[i : i + chunk_lines]) for i in range(0, len(lines), chunk_lines)]
    ids: list[int] = []
    for enc in tok.encode_batch(chunks, add_special_tokens=False):
        ids.extend(enc.ids)
    return torch.tensor(ids, dtype=torch.long)


def _forward_logits(model: Any, input_ids: torch.Tensor) -> torch.Tensor:
    kwargs: dict[str, Any] = {"use_cache": False}
    if getattr(getattr(model, "config", None), "output_router_logits", None) is not None:
        kwargs["output_router_logits"] = False
    return model(input_ids=input_ids, **kwargs).logits


def perplexity(
    model: Any,
    token_ids: torch.Tensor,
    *,
    seq_len: int = 128,
    batch_size: int = 16,
    device: str = "cpu",
    max_tokens: int | None = None,
) -> PerplexityResult:
    """Compute the perplexity of ``model`` on a token stream.

    The model is evaluated in ``eval`` mode under ``torch.no_grad`` and restored to its
    previous mode afterwards.

    Args:
        model: A ``transformers`` causal LM (anything returning ``.logits``).
        token_ids: 1-D tensor of token ids (all below the model's vocabulary size).
        seq_len: Context length per window, in tokens.
        batch_size: Windows per forward pass.
        device: Torch device of the model.
        max_tokens: Evaluate at most this many tokens from the start (``None``: all).

    Returns:
        The perplexity and its standard error.

    Raises:
        UserError: If the stream is shorter than one window or holds out-of-vocabulary ids.
    """
    import torch
    import torch.nn.functional as F

    ids = token_ids.reshape(-1)
    if max_tokens is not None:
        ids = ids[: max_tokens + 1]
    n_windows = (ids.numel() - 1) // seq_len
    if n_windows < 1:
        raise UserError(
            f"held-out text has {ids.numel()} tokens, fewer than one window of {seq_len + 1}",
            "use a larger text source, a larger validation split or a shorter --seq-len",
        )
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    if vocab is not None and int(ids.max()) >= vocab:
        raise UserError(
            f"token id {int(ids.max())} is outside the model's vocabulary of {vocab}",
            "use the tokenizer the model was trained with, or a vocabulary that fits",
        )
    starts = torch.arange(n_windows) * seq_len
    was_training = bool(getattr(model, "training", False))
    model.eval()
    window_nll: list[float] = []
    try:
        with torch.no_grad():
            for b in range(0, n_windows, batch_size):
                idx = starts[b : b + batch_size, None] + torch.arange(seq_len + 1)[None, :]
                batch = ids[idx].to(device)
                logits = _forward_logits(model, batch[:, :-1]).float()
                nll = F.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1), reduction="none"
                ).reshape(batch.shape[0], seq_len)
                window_nll.extend(nll.mean(dim=1).tolist())
    finally:
        if was_training:
            model.train()
    mean_nll = sum(window_nll) / len(window_nll)
    ppl = math.exp(mean_nll)
    stderr = None
    if len(window_nll) > 1:
        var = sum((v - mean_nll) ** 2 for v in window_nll) / (len(window_nll) - 1)
        stderr = ppl * math.sqrt(var / len(window_nll))
    return PerplexityResult(
        perplexity=ppl,
        nll_per_token=mean_nll,
        stderr=stderr,
        num_tokens=n_windows * seq_len,
        num_windows=n_windows,
        seq_len=seq_len,
    )


def perplexity_record(
    result: PerplexityResult,
    *,
    model: ModelInfo,
    software: Software,
    corpus: str,
    dataset: str | None = None,
    linked_run_ids: Sequence[str] = (),
    tags: dict[str, str] | None = None,
) -> QualityResult:
    """Wrap a :class:`PerplexityResult` as a :class:`QualityResult` record.

    Args:
        result: The perplexity.
        model: The model evaluated (its fingerprint links the result to its energy runs).
        software: Software versions.
        corpus: Corpus name; the task is ``perplexity:<corpus>``.
        dataset: Data source and split, e.g. ``pydoc_data.topics[val]``.
        linked_run_ids: Energy runs of the same model instance.
        tags: Free labels (study id, variant, seed...).

    Returns:
        The record.
    """
    return QualityResult(
        model=model,
        software=software,
        task=f"perplexity:{corpus}",
        metric="perplexity",
        value=result.perplexity,
        stderr=result.stderr,
        higher_is_better=False,
        num_tokens=result.num_tokens,
        num_samples=result.num_windows,
        dataset=dataset,
        linked_run_ids=tuple(linked_run_ids),
        tags={"seq_len": str(result.seq_len), **(tags or {})},
    )
