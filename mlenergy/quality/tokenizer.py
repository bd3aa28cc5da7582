"""A byte-level BPE tokenizer trained locally with the ``tokenizers`` library.

Training on the default corpus (about 400,000 characters) takes a second or two, so nothing
is downloaded: the tokenizer is cached as JSON under the user cache folder, keyed by the
SHA-256 of the training text and the vocabulary size
(``$MLENERGY_CACHE_DIR``, else ``$XDG_CACHE_HOME/mlenergy``, else ``~/.cache/mlenergy``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from mlenergy.errors import UserError
from mlenergy.records import sha256_hex

if TYPE_CHECKING:
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

CACHE_ENV = "MLENERGY_CACHE_DIR"
SPECIAL_TOKENS = ("<|endoftext|>", "<|pad|>")
"""Special tokens, ids 0 and 1: document separator (also BOS/EOS) and padding."""

MIN_VOCAB_SIZE = 300
"""Below this a byte-level BPE has almost no merges (256 byte tokens + specials)."""


def cache_dir() -> Path:
    """Return the mlenergy cache folder (not created)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mlenergy"


def _cache_path(text: str, vocab_size: int) -> Path:
    key = sha256_hex(f"bytelevel-bpe:v1:{vocab_size}:{text}")[:24]
    return cache_dir() / "tokenizers" / f"bpe-{vocab_size}-{key}.json"


def train_tokenizer(text: str, vocab_size: int = 2048, *, use_cache: bool = True) -> Tokenizer:
    """Train (or load from the cache) a byte-level BPE tokenizer on ``text``.

    Args:
        text: Training text (use the training split only, never validation text).
        vocab_size: Target vocabulary size in tokens, including 256 byte tokens and the
            special tokens. The trained vocabulary can be smaller on a small text.
        use_cache: Read and write the JSON cache (a failure to write is ignored).

    Returns:
        A ``tokenizers.Tokenizer``; ``<|endoftext|>`` has id 0 and ``<|pad|>`` id 1.

    Raises:
        UserError: If ``vocab_size`` is too small or ``text`` is blank.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < MIN_VOCAB_SIZE:
        raise UserError(f"vocab_size {vocab_size} is too small", f"use at least {MIN_VOCAB_SIZE}")
    if not text.strip():
        raise UserError("cannot train a tokenizer on blank text", "give a corpus with text")
    path = _cache_path(text, vocab_size)
    if use_cache and path.is_file():
        try:
            return Tokenizer.from_file(str(path))
        except Exception:  # corrupt cache entry: retrain below
            pass
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    chunk = 20_000
    tok.train_from_iterator(
        (text[i : i + chunk] for i in range(0, len(text), chunk)), trainer=trainer
    )
    if use_cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tok-", suffix=".tmp")
            os.close(fd)
            tok.save(tmp)
            os.replace(tmp, path)
        except OSError:
            pass
    return tok


def as_transformers_tokenizer(tok: Tokenizer) -> PreTrainedTokenizerFast:
    """Wrap a ``tokenizers.Tokenizer`` for code that expects a ``transformers`` tokenizer.

    Args:
        tok: A tokenizer from :func:`train_tokenizer`.

    Returns:
        A ``PreTrainedTokenizerFast`` with BOS/EOS ``<|endoftext|>`` and pad ``<|pad|>``.
    """
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=SPECIAL_TOKENS[0],
        eos_token=SPECIAL_TOKENS[0],
        pad_token=SPECIAL_TOKENS[1],
    )
