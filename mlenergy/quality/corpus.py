"""Text corpora for training tiny models and measuring perplexity.

The default corpus, ``pydoc``, is the English documentation text that ships inside every
CPython installation (``pydoc_data.topics``: about 465,000 characters), so the study works
offline with nothing downloaded. Local files and folders, and any Hugging Face ``datasets``
source (when the hub or a local cache is reachable), are accepted for real use.

Source strings:
    ``pydoc``: CPython's ``pydoc_data.topics`` (the default).
    ``<path>``: a ``.txt``/``.md``/``.rst`` file, a ``.jsonl`` file with a ``text`` field per
    line, or a folder (searched recursively for those files).
    ``hf:<dataset>[@<config>][#<split>]``: a ``datasets`` source, text from its ``text`` column
    (split ``train`` unless given), e.g. ``hf:wikitext@wikitext-2-raw-v1#test``.
"""

from __future__ import annotations

import json
import pydoc_data.topics as topics
from dataclasses import dataclass
from pathlib import Path

from mlenergy.errors import UserError
from mlenergy.records import sha256_hex

DEFAULT_CORPUS = "pydoc"
"""Name of the built-in offline corpus."""

MIN_CORPUS_CHARS = 2000
"""A corpus with fewer non-blank characters than this has no usable text."""

_TEXT_SUFFIXES = (".txt", ".md", ".rst", ".text")


@dataclass(frozen=True)
class TextCorpus:
    """A named collection of documents.

    Attributes:
        name: Short name used in records (``pydoc``, a file name, ``hf:<dataset>``).
        source: Where the text came from, e.g. ``pydoc_data.topics`` or an absolute path.
        documents: The documents, in a deterministic order.
    """

    name: str
    source: str
    documents: tuple[str, ...]

    @property
    def text(self) -> str:
        """All documents joined by blank lines."""
        return "\n\n".join(self.documents)

    @property
    def num_chars(self) -> int:
        """Characters in :attr:`text`."""
        return len(self.text)

    @property
    def fingerprint(self) -> str:
        """First 16 hex digits of the SHA-256 of :attr:`text` (keys tokenizer caches)."""
        return sha256_hex(self.text)[:16]


@dataclass(frozen=True)
class TextSplit:
    """A corpus cut in two at a line boundary: training text and held-out validation text.

    Attributes:
        corpus: The corpus that was split.
        train: Training text (the first ``1 - val_fraction`` of the characters).
        val: Held-out validation text (the rest).
        val_fraction: Requested validation fraction of the characters.
    """

    corpus: TextCorpus
    train: str
    val: str
    val_fraction: float

    def dataset_label(self, split: str) -> str:
        """Return a label such as ``pydoc_data.topics[val]`` for records."""
        return f"{self.corpus.source}[{split}]"


def _pydoc_corpus() -> TextCorpus:
    docs = tuple(topics.topics[k].strip() for k in sorted(topics.topics))
    return TextCorpus(name="pydoc", source="pydoc_data.topics", documents=docs)


def _read_text_file(path: Path) -> list[str]:
    try:
        raw = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UserError(f"cannot read corpus file {path}: {exc.strerror}", "check the path") from (
            exc
        )
    if path.suffix == ".jsonl":
        docs = []
        for lineno, line in enumerate(raw.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(
                    f"corpus file {path} line {lineno} is not JSON",
                    'write one {"text": "..."} object per line',
                ) from exc
            if isinstance(obj, dict) and isinstance(obj.get("text"), str):
                docs.append(obj["text"])
        return docs
    return [raw]


def _path_corpus(path: Path) -> TextCorpus:
    if path.is_dir():
        files = sorted(
            p for p in path.rglob("*") if p.is_file() and p.suffix in (*_TEXT_SUFFIXES, ".jsonl")
        )
        if not files:
            raise UserError(
                f"corpus folder {path} holds no .txt, .md, .rst or .jsonl files",
                "point --corpus at a folder of text files",
            )
        docs = [d for f in files for d in _read_text_file(f)]
    else:
        docs = _read_text_file(path)
    return TextCorpus(name=path.name, source=str(path.resolve()), documents=tuple(docs))


def _hf_corpus(spec: str, max_chars: int | None) -> TextCorpus:
    rest = spec.removeprefix("hf:")
    split = "train"
    config = None
    if "#" in rest:
        rest, split = rest.split("#", 1)
    if "@" in rest:
        rest, config = rest.split("@", 1)
    if not rest:
        raise UserError(
            f"corpus {spec!r} names no dataset", "use hf:<dataset>[@<config>][#<split>]"
        )
    try:
        import datasets
    except ImportError as exc:  # pragma: no cover - datasets is a dependency
        raise UserError("the 'datasets' package is not installed", "pip install datasets") from exc
    try:
        ds = datasets.load_dataset(rest, config, split=split)
    except Exception as exc:
        raise UserError(
            f"cannot load dataset {rest!r} (config {config}, split {split}): {exc}",
            "check the name and that the hub or a local cache is reachable",
        ) from exc
    if "text" not in ds.column_names:
        raise UserError(
            f"dataset {rest!r} has no 'text' column (has: {', '.join(ds.column_names)})",
            "use a dataset with a 'text' column or export it to a .jsonl file",
        )
    docs: list[str] = []
    total = 0
    for text in ds["text"]:
        if isinstance(text, str) and text.strip():
            docs.append(text)
            total += len(text)
            if max_chars is not None and total >= max_chars:
                break
    return TextCorpus(name=spec, source=spec, documents=tuple(docs))


def load_corpus(source: str = DEFAULT_CORPUS, *, max_chars: int | None = None) -> TextCorpus:
    """Load a text corpus.

    Args:
        source: ``pydoc`` (default), a local file or folder, or
            ``hf:<dataset>[@<config>][#<split>]``.
        max_chars: Keep documents until this many characters (``None``: all).

    Returns:
        The corpus, blank documents removed.

    Raises:
        UserError: If the source does not exist or holds no usable text.
    """
    if source == DEFAULT_CORPUS:
        corpus = _pydoc_corpus()
    elif source.startswith("hf:"):
        corpus = _hf_corpus(source, max_chars)
    else:
        path = Path(source).expanduser()
        if not path.exists():
            raise UserError(
                f"corpus {source!r} is neither 'pydoc', an existing path nor hf:<dataset>",
                "use --corpus pydoc, a text file or folder, or hf:<dataset>",
            )
        corpus = _path_corpus(path)
    docs = [d for d in corpus.documents if d.strip()]
    if max_chars is not None:
        kept, total = [], 0
        for d in docs:
            if total >= max_chars:
                break
            kept.append(d[: max_chars - total])
            total += len(kept[-1])
        docs = kept
    usable = sum(len(d.strip()) for d in docs)
    if usable < MIN_CORPUS_CHARS:
        raise UserError(
            f"corpus {corpus.name!r} has no usable text ({usable} non-blank characters, "
            f"need at least {MIN_CORPUS_CHARS})",
            "give a larger text source",
        )
    return TextCorpus(name=corpus.name, source=corpus.source, documents=tuple(docs))


def split_corpus(corpus: TextCorpus, val_fraction: float = 0.1) -> TextSplit:
    """Cut a corpus into training and validation text at the line break nearest the cut.

    The last ``val_fraction`` of the characters is held out, so validation text is never seen
    in training (the tokenizer is trained on the training text only).

    Args:
        corpus: The corpus.
        val_fraction: Fraction of characters held out, in ``(0, 0.5]``.

    Returns:
        The split.

    Raises:
        UserError: If ``val_fraction`` is out of range or either side would be empty.
    """
    if not 0.0 < val_fraction <= 0.5:
        raise UserError(f"val_fraction {val_fraction} is out of range", "use a value in (0, 0.5]")
    text = corpus.text
    cut = int(len(text) * (1.0 - val_fraction))
    newline = text.rfind("\n", 0, cut)
    if newline > cut * 0.9:
        cut = newline + 1
    train, val = text[:cut], text[cut:]
    if not train.strip() or not val.strip():
        raise UserError(
            f"corpus {corpus.name!r} is too small to hold out {val_fraction:.0%} for validation",
            "give a larger text source",
        )
    return TextSplit(corpus=corpus, train=train, val=val, val_fraction=val_fraction)
