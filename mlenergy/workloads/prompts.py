"""Prompt sources for the inference runner: synthetic token ids, local files, hub datasets.

Every source yields prompts of a *fixed* length in tokens, so that runs of different models
and batch sizes compare: each prompt's token ids are tiled (repeated) or truncated to exactly
``input_tokens`` ids.

Source strings:
    ``synthetic``: uniform random token ids from a seeded generator (no text, no tokenizer).
    a local ``.txt``, ``.json``, ``.jsonl``, ``.parquet`` or ``.csv`` file: loaded with
        ``datasets.load_dataset`` (builders ``text``, ``json``, ``parquet``, ``csv``); the
        ``text`` column is used, else the first string column.
    ``hf:<dataset id>[:<split>]``: a Hugging Face Hub dataset (cached, or downloaded when the
        hub is reachable); split ``train`` unless given.

Tokenisation: a model's own tokenizer when it has one. Models without one (presets, configs)
get a byte-level BPE tokenizer trained with the ``tokenizers`` library on the prompt text itself,
with the model's vocabulary size, so ids stay in range; if the vocabulary is too small for
that (under 300 ids) the UTF-8 bytes are used as ids (modulo the vocabulary size).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mlenergy.errors import UserError
from mlenergy.models.loading import hub_reachable

if TYPE_CHECKING:
    import torch

SYNTHETIC = "synthetic"
HUB_PREFIX = "hf:"
_BUILDERS = {
    ".txt": "text",
    ".json": "json",
    ".jsonl": "json",
    ".parquet": "parquet",
    ".csv": "csv",
}
_SOURCE_FIX = (
    "Use 'synthetic', a local .txt/.json/.jsonl/.parquet/.csv file, or hf:<dataset id>[:<split>]"
)
_MAX_TEXTS = 4096
_MIN_TRAINED_VOCAB = 300

TokenizerKind = Literal["random-ids", "model", "trained-bpe", "bytes"]


@dataclass(frozen=True)
class PromptSource:
    """A parsed prompt source.

    Attributes:
        kind: ``synthetic``, ``file`` or ``hub``.
        value: File path or dataset id (empty for synthetic).
        split: Dataset split (hub sources).
    """

    kind: Literal["synthetic", "file", "hub"]
    value: str = ""
    split: str = "train"

    @property
    def label(self) -> str:
        """The string recorded as the workload's ``prompt_source``."""
        if self.kind == "synthetic":
            return SYNTHETIC
        if self.kind == "hub":
            return f"{HUB_PREFIX}{self.value}:{self.split}"
        return self.value

    @classmethod
    def parse(cls, text: str | os.PathLike[str]) -> PromptSource:
        """Parse a prompt source string.

        Raises:
            UserError: If the string is empty, names a missing file or an unsupported format.
        """
        raw = str(text).strip()
        if not raw:
            raise UserError("empty prompt source", _SOURCE_FIX)
        if raw.lower() == SYNTHETIC:
            return cls("synthetic")
        if raw.startswith(HUB_PREFIX):
            rest = raw.removeprefix(HUB_PREFIX)
            name, _, split = rest.partition(":")
            if not name:
                raise UserError(f"prompt source {raw!r} names no dataset", _SOURCE_FIX)
            return cls("hub", name, split or "train")
        path = Path(raw).expanduser()
        if not path.exists():
            raise UserError(f"prompt file {raw!r} does not exist", _SOURCE_FIX)
        if path.is_dir() or path.suffix.lower() not in _BUILDERS:
            raise UserError(
                f"prompt file {raw!r} has an unsupported format ({path.suffix or 'folder'})",
                _SOURCE_FIX,
            )
        return cls("file", str(path))


def _text_column(columns: dict[str, Any], origin: str) -> str:
    if "text" in columns:
        return "text"
    for name, feature in columns.items():
        if getattr(feature, "dtype", None) in ("string", "large_string"):
            return name
    raise UserError(
        f"prompt source {origin!r} has no text column (columns: {', '.join(columns) or 'none'})",
        "Give a dataset with a 'text' column or another string column",
    )


def _hub_offline_patch(offline: bool) -> list[tuple[Any, str, Any]]:
    """Force the hub libraries offline (returns what to restore)."""
    restore: list[tuple[Any, str, Any]] = []
    if not offline:
        return restore
    import datasets.config
    import huggingface_hub.constants

    modules: tuple[Any, ...] = (datasets.config, huggingface_hub.constants)
    for module in modules:
        if hasattr(module, "HF_HUB_OFFLINE"):
            restore.append((module, "HF_HUB_OFFLINE", module.HF_HUB_OFFLINE))
            module.HF_HUB_OFFLINE = True
    return restore


def load_texts(source: PromptSource, limit: int = _MAX_TEXTS) -> list[str]:
    """Load up to ``limit`` non-empty prompt texts from a file or hub source.

    ``datasets``' own progress bars are silenced (the runner has its own, and ``--json``
    output must stay clean).

    Raises:
        UserError: If the source cannot be read or holds no text.
    """
    import datasets

    if source.kind == "synthetic":
        return []
    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        return _load_texts(source, limit)
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


def _load_texts(source: PromptSource, limit: int) -> list[str]:
    import datasets

    if source.kind == "file":
        builder = _BUILDERS[Path(source.value).suffix.lower()]
        # A throw-away cache: local files are small, and a shared cache would keep stale copies.
        with tempfile.TemporaryDirectory(prefix="mlenergy-prompts-") as cache_dir:
            try:
                ds = datasets.load_dataset(
                    builder,
                    data_files=source.value,
                    split="train",
                    cache_dir=cache_dir,
                    keep_in_memory=True,
                )
            except Exception as exc:  # datasets raises many types for unreadable files
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                raise UserError(
                    f"cannot read prompt file {source.value!r} ({type(exc).__name__}: {first})",
                    f"Check that it is valid {builder} data",
                ) from exc
            return _texts_of(ds, source.label, limit)
    else:
        restore = _hub_offline_patch(not hub_reachable())
        try:
            ds = datasets.load_dataset(source.value, split=source.split)
        except Exception as exc:
            raise UserError(
                f"could not load dataset {source.value!r} split {source.split!r} from the "
                "Hugging Face Hub (no network, unknown id or split)",
                "Use a local .txt/.json/.jsonl/.parquet file or 'synthetic'",
            ) from exc
        finally:
            for module, name, value in restore:
                setattr(module, name, value)
    return _texts_of(ds, source.label, limit)


def _texts_of(ds: Any, label: str, limit: int) -> list[str]:
    column = _text_column(dict(ds.features), label)
    texts: list[str] = []
    for value in ds[column]:
        if isinstance(value, str) and value.strip():
            texts.append(value)
            if len(texts) >= limit:
                break
    if not texts:
        raise UserError(
            f"prompt source {label!r} has no non-empty text in column {column!r}",
            "Give a dataset with some text",
        )
    return texts


def train_bpe_tokenizer(texts: list[str], vocab_size: int) -> Any:
    """Train a byte-level BPE tokenizer (``tokenizers`` library) on ``texts``.

    Args:
        texts: Training text.
        vocab_size: Largest vocabulary allowed (the model's); every id is below it.

    Returns:
        A ``tokenizers.Tokenizer`` whose ids are all ``< vocab_size``.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


@dataclass
class PromptSet:
    """Token-id prompts ready to batch at a fixed length.

    Attributes:
        source: Where the prompts came from.
        vocab_size: The model's vocabulary size (every id is below it).
        tokenizer_kind: ``random-ids``, ``model``, ``trained-bpe`` or ``bytes``.
        sequences: Token ids of each prompt text (empty for synthetic prompts).
        seed: Seed of synthetic ids.
    """

    source: PromptSource
    vocab_size: int
    tokenizer_kind: TokenizerKind
    sequences: list[list[int]] = field(default_factory=list)
    seed: int = 0

    @classmethod
    def prepare(
        cls,
        source: str | PromptSource,
        vocab_size: int,
        tokenizer: Any = None,
        seed: int = 0,
    ) -> PromptSet:
        """Load and tokenise prompts for one model.

        Args:
            source: A prompt source string (see the module doc) or a parsed source.
            vocab_size: The model's vocabulary size.
            tokenizer: The model's tokenizer (a ``transformers`` tokenizer), or ``None``.
            seed: Seed of synthetic ids.

        Raises:
            UserError: If the source is bad or yields no tokens.
        """
        src = source if isinstance(source, PromptSource) else PromptSource.parse(source)
        if src.kind == "synthetic":
            return cls(src, vocab_size, "random-ids", [], seed)
        texts = load_texts(src)
        kind: TokenizerKind
        if tokenizer is not None:
            kind = "model"
            encoded = tokenizer(texts, add_special_tokens=False)["input_ids"]
            seqs = [[i % vocab_size for i in ids] for ids in encoded]
        elif vocab_size >= _MIN_TRAINED_VOCAB:
            kind = "trained-bpe"
            tok = train_bpe_tokenizer(texts, vocab_size)
            seqs = [enc.ids for enc in tok.encode_batch(texts)]
        else:
            kind = "bytes"
            seqs = [[b % vocab_size for b in t.encode("utf-8")] for t in texts]
        seqs = [s for s in seqs if s]
        if not seqs:
            raise UserError(f"prompt source {src.label!r} yields no tokens", "Give some text")
        return cls(src, vocab_size, kind, seqs, seed)

    def batch(self, batch_size: int, input_tokens: int) -> torch.Tensor:
        """Return a ``(batch_size, input_tokens)`` tensor of token ids (int64, CPU).

        Synthetic ids are drawn from a generator seeded with ``seed`` and the batch shape,
        so every model sees the same ids for the same shape. Text prompts are taken in order
        (cycling when the batch is larger than the data) and tiled or truncated to length.
        """
        import torch

        if batch_size < 1 or input_tokens < 1:
            raise UserError(
                f"prompt batch of {batch_size} x {input_tokens} tokens", "Use values >= 1"
            )
        if not self.sequences:
            gen = torch.Generator().manual_seed(
                self.seed * 1_000_003 + batch_size * 10_007 + input_tokens
            )
            return torch.randint(0, self.vocab_size, (batch_size, input_tokens), generator=gen)
        rows = []
        for i in range(batch_size):
            seq = self.sequences[i % len(self.sequences)]
            reps = -(-input_tokens // len(seq))
            rows.append((seq * reps)[:input_tokens])
        return torch.tensor(rows, dtype=torch.long)
