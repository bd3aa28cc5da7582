"""The one strict check of a ``config.json``'s counts, shared by the estimator and the builder.

A config's sizes and counts (layers, heads, experts, widths) must be whole numbers:
``"num_hidden_layers": "thirty-two"`` or ``2.5`` is refused with one
:class:`~mlenergy.errors.UserError` naming the field, whether the config goes to the estimator
(:meth:`~mlenergy.models.architecture.ArchitectureSpec.from_config`) or to ``transformers``
(:func:`~mlenergy.models.config_file.read_config_file`, used by ``bench`` and ``quality``).
Pure Python: no torch, no transformers.
"""

from __future__ import annotations

from typing import Any

from mlenergy.errors import UserError

NESTED_TEXT_KEYS = ("text_config", "thinker_config", "llm_config", "language_config")
"""Keys under which multimodal configs nest the text model's config."""

REQUIRED_SIZES: tuple[tuple[str, ...], ...] = (
    ("hidden_size", "d_model", "n_embd"),
    ("num_hidden_layers", "n_layer", "num_layers"),
    ("num_attention_heads", "n_head"),
    ("vocab_size",),
)
"""Sizes every decoder config gives (first name shown; the others are accepted aliases)."""

COUNT_FIELDS = frozenset(
    {
        "attention_chunk_size", "conv_kernel", "d_model", "decoder_sparse_step",
        "experts_per_token", "ff_intermediate_size", "ffn_hidden_size", "first_k_dense_replace",
        "head_dim", "hidden_size", "interleave_moe_layer_step", "intermediate_size",
        "intermediate_size_mlp", "kv_lora_rank", "mamba_head_dim", "mamba_num_heads",
        "max_position_embeddings", "moe_intermediate_size", "moe_layer_freq", "moe_topk",
        "n_embd", "n_groups", "n_head", "n_layer", "n_routed_experts", "n_shared_experts",
        "num_attention_heads", "num_experts", "num_experts_per_tok", "num_hidden_layers",
        "num_key_value_heads", "num_kv_heads", "num_layers", "num_local_experts",
        "num_nextn_predict_layers", "num_shared_experts", "q_lora_rank", "qk_nope_head_dim",
        "qk_rope_head_dim", "shared_expert_intermediate_size", "sliding_window",
        "sliding_window_pattern", "ssm_state_size", "v_head_dim", "vocab_size",
    }
)  # fmt: skip
"""Config fields that count something (layers, heads, experts, widths): whole numbers only."""

_POSITIVE = frozenset(name for names in REQUIRED_SIZES for name in names)


def flatten_text_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with nested text configs (multimodal models) merged over the top level.

    The top level's ``model_type`` is kept.

    Raises:
        UserError: ``config`` is not a JSON object.
    """
    if not isinstance(config, dict):
        raise UserError("model config must be a JSON object", "Pass a Hugging Face config.json")
    flat = dict(config)
    for key in NESTED_TEXT_KEYS:
        nested = config.get(key)
        if isinstance(nested, dict):
            top_type = flat.get("model_type")
            flat.update(flatten_text_config(nested))
            if top_type:
                flat["model_type"] = top_type
    return flat


def count_field(cfg: dict[str, Any], name: str) -> int | None:
    """The value of count field ``name``: ``None`` if absent, else a checked integer.

    Raises:
        UserError: The value is not a whole number (``"thirty-two"``, ``2.5``, ``true``), or
            is below 1 for a required size (below 0 for the other counts).
    """
    value = cfg.get(name)
    if value is None:
        return None
    low = 1 if name in _POSITIVE else 0
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        kind = "a positive integer" if low else "a non-negative integer"
        raise UserError(
            f"model config field '{name}' must be {kind}, got {value!r}",
            "Fix the config.json (counts and sizes are whole numbers)",
        )
    return value


def check_config_values(config: dict[str, Any]) -> None:
    """Refuse a config whose count fields are not whole numbers (nested text configs too).

    Raises:
        UserError: Naming the first bad field (in alphabetical order).
    """
    flat = flatten_text_config(config)
    for name in sorted(COUNT_FIELDS & flat.keys()):
        count_field(flat, name)
