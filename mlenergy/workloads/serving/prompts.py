"""Prompts for the serving benchmark, as text (the server tokenizes them).

Sources (the same strings as ``--prompts`` of the static-batch runner):
    ``synthetic``: seeded random words, ``input_tokens`` words per prompt, each prompt different
        (so that no prefix cache can serve one from another).
    a local file or ``hf:<dataset>[:split]``: texts read by
        :func:`mlenergy.workloads.prompts.load_texts`, cycled to the number of requests and cut
        to ``input_tokens`` words.

A word is roughly one token for English BPE vocabularies; the record keeps the prompt tokens the
server counted when it reports usage (``prompt_tokens``), else this estimate.
"""

from __future__ import annotations

import random

from mlenergy.workloads.prompts import PromptSource, load_texts

_VOCABULARY = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "an",
    "are",
    "were",
    "which",
    "be",
    "this",
    "energy",
    "power",
    "model",
    "token",
    "request",
    "server",
    "window",
    "steady",
    "state",
    "measure",
    "joule",
    "watt",
    "second",
    "light",
    "river",
    "mountain",
    "city",
    "garden",
    "music",
    "history",
    "science",
    "market",
    "water",
    "forest",
    "language",
    "number",
    "system",
    "value",
    "question",
    "answer",
    "story",
    "people",
    "world",
    "time",
    "year",
    "day",
    "night",
]


def synthetic_prompt(words: int, rng: random.Random) -> str:
    """A prompt of ``words`` random words from a fixed vocabulary."""
    return " ".join(rng.choice(_VOCABULARY) for _ in range(max(1, words)))


def build_prompts(source: str, num_requests: int, input_tokens: int, seed: int = 0) -> list[str]:
    """One prompt text per request.

    Args:
        source: ``synthetic``, a local text/json/jsonl/parquet/csv file, or ``hf:<id>[:split]``.
        num_requests: How many prompts.
        input_tokens: Words per prompt (synthetic), or the cut for file and dataset texts.
        seed: Seed of the synthetic words and of the order of file texts.

    Raises:
        UserError: An unreadable source or one without text.
    """
    parsed = PromptSource.parse(source)
    rng = random.Random(seed)
    if parsed.kind == "synthetic":
        return [synthetic_prompt(input_tokens, rng) for _ in range(num_requests)]
    texts = load_texts(parsed, limit=max(num_requests, 1))
    rng.shuffle(texts)
    out = []
    for i in range(num_requests):
        words = texts[i % len(texts)].split()
        out.append(" ".join(words[:input_tokens]) if words else texts[i % len(texts)])
    return out


def estimate_tokens(text: str) -> int:
    """The client's estimate of a prompt's tokens: its word count (at least 1)."""
    return max(1, len(text.split()))
