"""Tiny built-in models (``preset:<name>``): real architectures, random weights, CPU-fast.

Every preset is a Hugging Face ``transformers`` config of a real architecture, scaled down so
that a benchmark of 64 input and 64 output tokens at batch 16 takes well under a second per
pass on one CPU thread. They share one shape (hidden size 128, 4 layers, 4 attention heads,
a vocabulary of 2048 ids) so that dense and Mixture-of-Experts variants compare fairly.

Presets come without a tokenizer: synthetic prompts are random token ids; dataset prompts are
tokenised by :mod:`mlenergy.workloads.prompts` (a small tokenizer trained on the text, or bytes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mlenergy.errors import UserError

if TYPE_CHECKING:
    from transformers import PretrainedConfig

PRESET_PREFIX = "preset:"
"""Prefix that marks a preset in a model source string (``preset:tiny-moe``)."""

PRESET_VOCAB_SIZE = 2048
"""Vocabulary size shared by all presets (token ids are in ``[0, 2048)``)."""

_COMMON: dict[str, Any] = {
    "vocab_size": PRESET_VOCAB_SIZE,
    "hidden_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False,
}


@dataclass(frozen=True)
class Preset:
    """A named tiny model.

    Attributes:
        name: Preset name, used as ``preset:<name>``.
        style: The real model family it imitates.
        description: One line about its shape.
        build_config: Returns a fresh ``transformers`` config of the preset.
    """

    name: str
    style: str
    description: str
    build_config: Callable[[], PretrainedConfig]

    @property
    def model_id(self) -> str:
        """The model id recorded for this preset (``preset:<name>``)."""
        return f"{PRESET_PREFIX}{self.name}"


def _tiny_dense() -> PretrainedConfig:
    from transformers import LlamaConfig

    return LlamaConfig(intermediate_size=512, **_COMMON)


def _tiny_moe() -> PretrainedConfig:
    from transformers import MixtralConfig

    return MixtralConfig(
        intermediate_size=256, num_local_experts=8, num_experts_per_tok=2, **_COMMON
    )


def _tiny_moe_fine() -> PretrainedConfig:
    from transformers import Qwen3MoeConfig

    return Qwen3MoeConfig(
        intermediate_size=512,
        moe_intermediate_size=64,
        num_experts=32,
        num_experts_per_tok=4,
        norm_topk_prob=True,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        # head_dim is no parameter of this config class; configs keep extra keywords as fields
        **{**_COMMON, "head_dim": 32},
    )


def _tiny_moe_deepseek() -> PretrainedConfig:
    from transformers import DeepseekV3Config

    common = dict(_COMMON)
    common["num_key_value_heads"] = common["num_attention_heads"]  # MLA: one latent per token
    common["num_nextn_predict_layers"] = 0  # a field, though no parameter of the config class
    return DeepseekV3Config(
        intermediate_size=512,
        moe_intermediate_size=64,
        n_routed_experts=16,
        n_shared_experts=1,
        num_experts_per_tok=4,
        n_group=4,
        topk_group=2,
        first_k_dense_replace=1,
        routed_scaling_factor=2.5,
        norm_topk_prob=True,
        q_lora_rank=64,
        kv_lora_rank=32,
        qk_rope_head_dim=16,
        qk_nope_head_dim=16,
        v_head_dim=32,
        **common,
    )


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "tiny-dense",
            "Llama",
            "dense Llama-style decoder: 4 layers, hidden 128, GQA 4/2 heads, SwiGLU 512",
            _tiny_dense,
        ),
        Preset(
            "tiny-moe",
            "Mixtral",
            "Mixtral-style MoE: 8 experts of SwiGLU 256, top-2 routing",
            _tiny_moe,
        ),
        Preset(
            "tiny-moe-fine",
            "Qwen3-MoE / OLMoE",
            "fine-grained MoE: 32 small experts of SwiGLU 64, top-4, normalised top-k",
            _tiny_moe_fine,
        ),
        Preset(
            "tiny-moe-deepseek",
            "DeepSeek-V3",
            "DeepSeek-V3-style MoE: MLA attention, 1 shared + 16 routed experts top-4 "
            "(group-limited routing), first layer dense",
            _tiny_moe_deepseek,
        ),
    )
}
"""The built-in presets by name."""


def preset_config(name: str) -> PretrainedConfig:
    """Return a fresh config of preset ``name`` (with or without the ``preset:`` prefix).

    Raises:
        UserError: If no preset has that name.
    """
    key = name.removeprefix(PRESET_PREFIX)
    if key not in PRESETS:
        raise UserError(
            f"unknown preset {name!r}",
            f"Use one of: {', '.join(PRESET_PREFIX + n for n in PRESETS)}",
        )
    return PRESETS[key].build_config()
