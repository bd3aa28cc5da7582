"""Tiny random-weight models saved as servable folders (tests, notebook 06, benchmarks).

:func:`save_tiny_served_model` writes a Hugging Face model folder that a real OpenAI-compatible
server (``transformers serve``) can load: weights built from a config (a dense Llama or a
Mixtral MoE), a byte-level BPE tokenizer trained offline with ``tokenizers`` on generated text,
and a chat template. Nothing is downloaded. :func:`transformers_serve_command` is the launch
template that runs such a folder on a CPU with continuous batching.
"""

from __future__ import annotations

import random
import shutil
import sys
from pathlib import Path
from typing import Literal

from mlenergy.quality.tokenizer import as_transformers_tokenizer, train_tokenizer

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>{{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
"""A minimal chat template: one line per message, tagged with its role."""

_WORDS = [
    "energy",
    "power",
    "token",
    "model",
    "serve",
    "request",
    "batch",
    "window",
    "steady",
    "state",
    "joule",
    "watt",
    "second",
    "prefill",
    "decode",
    "cache",
    "expert",
    "router",
    "layer",
    "attention",
    "query",
    "key",
    "value",
    "engine",
    "queue",
]

TINY_SERVE_VOCAB = 512
"""Vocabulary of the tiny served models (the trained tokenizer's size)."""


def generated_text(words: int = 20_000, seed: int = 0) -> str:
    """Seeded pseudo-text from a small word list (tokenizer training and prompt files)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(max(1, words // 12)):
        lines.append(" ".join(rng.choice(_WORDS) for _ in range(12)) + ".")
    return "\n".join(lines)


def save_tiny_served_model(
    folder: Path, kind: Literal["dense", "moe"] = "dense", seed: int = 0
) -> Path:
    """Build a tiny random-weight model and save it, with tokenizer and chat template.

    Args:
        folder: Where to write the model (created).
        kind: ``dense`` (Llama, 2 layers, hidden 64) or ``moe`` (Mixtral, 4 experts, top-2).
        seed: Seed of the weights and of the tokenizer's training text.

    Returns:
        ``folder``, the path the server must be given as ``model``.
    """
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, MixtralConfig, PretrainedConfig

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = as_transformers_tokenizer(
        train_tokenizer(generated_text(seed=seed), vocab_size=TINY_SERVE_VOCAB, use_cache=False)
    )
    tok.chat_template = CHAT_TEMPLATE
    common = {
        "vocab_size": len(tok),
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 1024,
        "bos_token_id": tok.bos_token_id,
        "eos_token_id": tok.eos_token_id,
        "pad_token_id": tok.pad_token_id,
        "tie_word_embeddings": False,
    }
    config: PretrainedConfig
    if kind == "dense":
        config = LlamaConfig(intermediate_size=128, **common)
    elif kind == "moe":
        config = MixtralConfig(
            intermediate_size=64, num_local_experts=4, num_experts_per_tok=2, **common
        )
    else:
        raise ValueError(f"unknown tiny model kind {kind!r}")
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def transformers_serve_command(extra: str = "") -> str:
    """The ``--launch`` template that serves a model folder with ``transformers serve`` on CPU.

    Continuous batching with the KV cache capped at 2 % of memory (uncapped, it sizes the
    cache from all system memory). ``transformers serve`` has no concurrency cap flag, so
    ``{max_num_seqs}`` is not used by it.
    """
    exe = shutil.which("transformers") or str(Path(sys.executable).parent / "transformers")
    return (
        f"{exe} serve {{model}} --host 127.0.0.1 --port {{port}} --continuous-batching "
        f"--cb-max-memory-percent 0.02 --device cpu --log-level warning {extra}"
    ).strip()
