"""Completeness of a ``config.json`` given by path, before ``transformers`` fills defaults."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlenergy.errors import UserError
from mlenergy.models.architecture import ArchitectureSpec
from mlenergy.models.config_values import REQUIRED_SIZES, flatten_text_config

if TYPE_CHECKING:
    from transformers import PretrainedConfig

PARSED_MODEL_TYPES = frozenset(
    {
        "deepseek_v2",
        "deepseek_v3",
        "gemma",
        "gemma2",
        "gemma3",
        "gemma3_text",
        "gpt_oss",
        "kimi_k2",
        "llama",
        "llama4",
        "mistral",
        "mixtral",
        "nemotron_h",
        "olmo2",
        "phi3",
        "phi3small",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_moe",
        "qwen3_omni_moe",
        "qwen3_vl",
        "qwen3_vl_moe",
        "starcoder2",
    }
)
"""Model types whose config.json :class:`ArchitectureSpec` parses fully (families it knows)."""


def check_config_fields(data: dict[str, Any], config: PretrainedConfig, origin: str) -> None:
    """Refuse a causal-LM config.json that lacks fields, instead of filling defaults.

    ``transformers`` fills any missing size with its defaults (a bare ``{"model_type":
    "llama"}`` becomes a 6.7B model), so a config given by path must name its sizes:
    hidden_size, num_hidden_layers, num_attention_heads and vocab_size for every model type
    (all missing ones are named at once), and, for the families
    :class:`~mlenergy.models.architecture.ArchitectureSpec` parses, whatever else it needs
    (e.g. intermediate_size, the MLA ranks of DeepSeek).

    Args:
        data: The parsed config.json.
        config: The ``transformers`` config built from it (non-causal ones are left to
            :func:`check_buildable`).
        origin: Where it came from, for messages.

    Raises:
        UserError: Naming the missing or invalid fields.
    """
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING

    if type(config) not in MODEL_FOR_CAUSAL_LM_MAPPING:
        return
    flat = flatten_text_config(data)
    missing = [names[0] for names in REQUIRED_SIZES if all(flat.get(n) is None for n in names)]
    if missing:
        raise UserError(
            f"config {origin!r} is missing required field(s) {', '.join(missing)} "
            "(they would silently get the library defaults)",
            "Pass a complete Hugging Face config.json (hidden_size, num_hidden_layers, "
            "num_attention_heads, vocab_size, intermediate_size)",
        )
    if config.model_type not in PARSED_MODEL_TYPES:
        return
    try:
        ArchitectureSpec.from_config(data)
    except UserError as exc:
        raise UserError(f"config {origin!r}: {exc.problem}", exc.fix) from exc
