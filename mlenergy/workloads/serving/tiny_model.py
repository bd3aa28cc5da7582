"""A tiny random-weight model saved as a servable folder, to try the serving benchmark on a CPU.

:func:`save_tiny_served_model` writes a Hugging Face model folder that a real OpenAI-compatible
server (``transformers serve``) loads: weights built from a config (a dense Llama or a Mixtral
MoE), a byte-level BPE tokenizer trained offline with ``tokenizers`` on generated text, and a
chat template. Nothing is downloaded. :func:`transformers_serve_command` is the ``--launch``
template that serves such a folder on a CPU with continuous batching, and
:func:`serving_extra_missing` names what ``transformers serve`` still needs here.
``mlenergy models save-tiny`` calls them; so do the serving tests and notebook 06.
"""

from __future__ import annotations

import importlib.util
import random
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mlenergy.errors import UserError
from mlenergy.quality.tokenizer import as_transformers_tokenizer, train_tokenizer

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>{{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
"""A minimal chat template: one line per message, tagged with its role."""

_WORDS = [
    "energy", "power", "token", "model", "serve", "request", "batch", "window", "steady",
    "state", "joule", "watt", "second", "prefill", "decode", "cache", "expert", "router",
    "layer", "attention", "query", "key", "value", "engine", "queue",
]  # fmt: skip

TINY_SERVE_VOCAB = 512
"""Vocabulary of the tiny served models (the trained tokenizer's size)."""

KINDS = ("dense", "moe")
"""The tiny models: a dense Llama and a Mixtral MoE."""

SERVING_MODULES = ("fastapi", "uvicorn", "openai", "pydantic")
"""What ``transformers serve`` imports before it starts (``transformers[serving]``)."""


@dataclass(frozen=True)
class TinyModel:
    """A saved tiny model.

    Attributes:
        folder: The folder written, the name a server is given as ``model``.
        kind: ``dense`` or ``moe``.
        architecture: The ``transformers`` model class.
        params: Parameters in all.
    """

    folder: Path
    kind: str
    architecture: str
    params: int


def generated_text(words: int = 20_000, seed: int = 0) -> str:
    """Seeded pseudo-text from a small word list (tokenizer training and prompt files)."""
    rng = random.Random(seed)
    lines = []
    for _ in range(max(1, words // 12)):
        lines.append(" ".join(rng.choice(_WORDS) for _ in range(12)) + ".")
    return "\n".join(lines)


def save_tiny_model(folder: Path, kind: str = "dense", seed: int = 0) -> TinyModel:
    """Build a tiny random-weight model and save it, with tokenizer and chat template.

    Args:
        folder: Where to write the model (created; files of the same names are replaced).
        kind: ``dense`` (Llama, 2 layers, hidden 64) or ``moe`` (Mixtral, 4 experts, top-2).
        seed: Seed of the weights and of the tokenizer's training text.

    Returns:
        What was written.

    Raises:
        UserError: An unknown ``kind``, or a ``folder`` that is a file.
    """
    if kind not in KINDS:
        raise UserError(f"unknown tiny model kind {kind!r}", f"Use one of {', '.join(KINDS)}")
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder} is a file, not a folder", "Name a folder to write the model to")
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, MixtralConfig, PretrainedConfig
    from transformers.utils import logging as hf_logging

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
    else:
        config = MixtralConfig(
            intermediate_size=64, num_local_experts=4, num_experts_per_tok=2, **common
        )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # one shard: its bar says nothing
    try:
        model.save_pretrained(folder)
        tok.save_pretrained(folder)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    params = sum(p.numel() for p in model.parameters())
    return TinyModel(folder, kind, type(model).__name__, int(params))


def save_tiny_served_model(
    folder: Path, kind: Literal["dense", "moe"] = "dense", seed: int = 0
) -> Path:
    """:func:`save_tiny_model`, returning only the folder (the path a server is given)."""
    return save_tiny_model(folder, kind, seed).folder


def transformers_serve_command(extra: str = "", executable: str | None = None) -> str:
    """The ``--launch`` template that serves a model folder with ``transformers serve`` on CPU.

    Continuous batching with the KV cache capped at 2 % of memory (uncapped, it sizes the
    cache from all system memory). ``transformers serve`` has no concurrency cap flag, so
    ``{max_num_seqs}`` is not used by it.

    Args:
        extra: More arguments, appended.
        executable: The ``transformers`` command (default: the one on ``PATH``, else the one
            beside this Python).
    """
    exe = executable or shutil.which("transformers")
    exe = exe or str(Path(sys.executable).parent / "transformers")
    return (
        f"{exe} serve {{model}} --host 127.0.0.1 --port {{port}} --continuous-batching "
        f"--cb-max-memory-percent 0.02 --device cpu --log-level warning {extra}"
    ).strip()


def serving_extra_missing() -> list[str]:
    """The modules of :data:`SERVING_MODULES` this Python cannot import (``[]``: can serve)."""
    return [name for name in SERVING_MODULES if importlib.util.find_spec(name) is None]


QUICKSTART_LEVELS = "1,4"
"""Concurrency levels of the quickstart's benchmark (a tiny model on a CPU)."""

QUICKSTART_REQUESTS = 32
"""Requests per level of the quickstart's benchmark."""

QUICKSTART_OUTPUT_TOKENS = 32
"""Output tokens per request of the quickstart's benchmark."""


def next_steps(model: TinyModel) -> list[str]:
    """What ``mlenergy models save-tiny`` prints: what was written, how to serve and measure it."""
    # The bare name when a shell finds it, else the one beside this Python (a venv not activated).
    launch = transformers_serve_command(
        executable="transformers" if shutil.which("transformers") else None
    )
    lines = [
        f"wrote {model.folder}: a tiny {model.architecture} ({model.kind}, random weights, "
        f"{model.params / 1e6:.2f} M parameters, {TINY_SERVE_VOCAB}-token tokenizer, chat "
        "template)",
        f'measure it served:  mlenergy bench --launch "{launch}" --model {model.folder} '
        f"--concurrency {QUICKSTART_LEVELS} --num-requests {QUICKSTART_REQUESTS} "
        f"--max-output-tokens {QUICKSTART_OUTPUT_TOKENS} --ignore-eos",
        "or serve it yourself: "
        + launch.replace("{model}", str(model.folder)).replace("{port}", "8000")
        + f"  (then: mlenergy bench --endpoint http://127.0.0.1:8000/v1 --model {model.folder})",
    ]
    missing = serving_extra_missing()
    if missing:
        lines.append(
            f"note: `transformers serve` needs {', '.join(missing)} here: "
            "pip install 'mlenergy-lab[serve]'"
        )
    return lines
