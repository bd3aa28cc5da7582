"""Pure-Python reading of Hugging Face ``config.json`` dicts: architecture and parameter counts.

:class:`ArchitectureSpec` normalises the many spellings of transformer configs (dense with
grouped-query attention, Mixture-of-Experts with shared experts and dense first layers,
multi-head latent attention, sliding-window and chunked attention, Mamba-2 hybrids) into one
layer-by-layer description; :func:`~mlenergy.models.parameters.count_parameters` turns it into
total and active (per token) parameter counts. Each family with its own
layer layout (Llama 4, DeepSeek, Nemotron-H, routed MoE) has one small reader below. No torch,
no transformers: the estimator and the store use this too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlenergy.errors import UserError
from mlenergy.models.config_values import check_config_values, count_field, flatten_text_config
from mlenergy.records.model_kind import model_kind

__all__ = [
    "MIXERS",
    "MLPS",
    "ArchitectureSpec",
    "LayerSpec",
]

MIXERS = ("attention", "sliding", "chunked", "mla", "mamba", "none")
"""Token mixers a layer may have: full attention, sliding-window attention, chunked attention,
multi-head latent attention, a Mamba-2 block, or nothing."""

MLPS = ("dense", "moe", "none")
"""Channel mixers a layer may have."""


@dataclass(frozen=True)
class LayerSpec:
    """One decoder layer.

    Attributes:
        mixer: One of :data:`MIXERS`.
        mlp: One of :data:`MLPS`.
        window: Attention window in tokens for ``sliding``/``chunked`` mixers, else ``None``.
    """

    mixer: str
    mlp: str
    window: int | None = None


@dataclass(frozen=True)
class ArchitectureSpec:
    """Compute- and memory-relevant hyperparameters of a decoder-only language model.

    Sizes are counts (not bytes). ``layers`` lists every decoder layer in order.
    """

    model_type: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_embeddings: bool
    intermediate_size: int
    layers: tuple[LayerSpec, ...]
    mlp_gated: bool = True
    mlp_bias: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    norm_bias: bool = False
    norms_per_layer: int = 2
    qk_norm: bool = False
    is_moe: bool = False
    num_experts: int | None = None
    experts_per_token: int | None = None
    num_shared_experts: int | None = None
    moe_intermediate_size: int | None = None
    shared_expert_intermediate_size: int | None = None
    expert_bias: bool = False
    router_bias: bool = False
    shared_expert_gate: bool = False
    attention_sinks: bool = False
    # multi-head latent attention (DeepSeek-V2/V3)
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    # Mamba-2
    mamba_num_heads: int | None = None
    mamba_head_dim: int | None = None
    ssm_state_size: int | None = None
    mamba_n_groups: int | None = None
    conv_kernel: int | None = None
    mamba_conv_bias: bool = True
    # weights
    quant_method: str | None = None
    bf16_attention: bool = False  # a quantised checkpoint keeps self-attention in BF16
    epilogue_scaled: bool = False  # fp8 scales per tensor or channel (not per block)
    mtp_layers: int = 0
    max_position_embeddings: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def num_moe_layers(self) -> int:
        """Number of layers with a routed-expert MLP."""
        return sum(1 for layer in self.layers if layer.mlp == "moe")

    @property
    def kind(self) -> str:
        """``dense``, ``moe`` or ``hybrid``: :func:`mlenergy.records.model_kind.model_kind`.

        Mamba layers in the parsed config count as recurrent layers; MoE wins if both.
        """
        return model_kind(
            self.model_type,
            self.is_moe,
            recurrent_layers=any(layer.mixer == "mamba" for layer in self.layers),
        )

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ArchitectureSpec:
        """Parse a Hugging Face ``config.json`` dict (text part of multimodal configs).

        Args:
            config: The parsed JSON. Nested ``text_config`` / ``thinker_config.text_config``
                are merged over the top level.

        Returns:
            The normalised specification.

        Raises:
            UserError: A required key is missing or a value is invalid (names the field).
        """
        flat = flatten_text_config(config)
        check_config_values(flat)
        return _parse(flat)


def _req(cfg: dict[str, Any], *names: str) -> int:
    for name in names:
        value = count_field(cfg, name)
        if value is not None:
            if value <= 0:
                raise UserError(
                    f"model config field '{name}' must be a positive integer, got {value!r}",
                    "Fix the config.json",
                )
            return value
    raise UserError(
        f"model config is missing required field '{names[0]}'",
        "Pass a complete Hugging Face config.json (hidden_size, num_hidden_layers, "
        "num_attention_heads, vocab_size, intermediate_size)",
    )


def _opt(cfg: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = count_field(cfg, name)
        if value is not None:
            return value
    return None


@dataclass
class _Draft:
    """The per-layer layout and extra fields of a spec while a config is being read."""

    model_type: str
    n_layers: int
    n_experts: int | None
    top_k: int | None
    n_shared: int | None
    moe_inter: int | None
    dense_inter: int | None
    mixers: list[str] = field(default_factory=list)
    mlps: list[str] = field(default_factory=list)
    windows: list[int | None] = field(default_factory=list)
    kw: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.mixers = ["attention"] * self.n_layers
        self.mlps = ["dense"] * self.n_layers
        self.windows = [None] * self.n_layers

    @property
    def is_moe(self) -> bool:
        return bool(self.n_experts and self.n_experts > 1 and self.top_k)


def _layout_llama4(cfg: dict[str, Any], d: _Draft) -> None:
    step = _opt(cfg, "interleave_moe_layer_step") or 1
    d.mlps = ["moe" if (i + 1) % step == 0 else "dense" for i in range(d.n_layers)]
    d.n_shared = 1 if d.n_shared is None else d.n_shared
    d.moe_inter = d.moe_inter or d.dense_inter
    d.dense_inter = _opt(cfg, "intermediate_size_mlp") or d.dense_inter
    d.kw["shared_expert_intermediate_size"] = d.moe_inter
    chunk = _opt(cfg, "attention_chunk_size")
    if chunk:
        for i in range(d.n_layers):
            if (i + 1) % 4:  # every 4th layer is global (NoPE)
                d.mixers[i], d.windows[i] = "chunked", chunk


def _layout_deepseek(cfg: dict[str, Any], d: _Draft) -> None:
    first_dense = _opt(cfg, "first_k_dense_replace") or 0
    freq = _opt(cfg, "moe_layer_freq") or 1
    d.mlps = ["moe" if i >= first_dense and i % freq == 0 else "dense" for i in range(d.n_layers)]
    d.mixers = ["mla"] * d.n_layers
    d.kw.update(
        q_lora_rank=_opt(cfg, "q_lora_rank"),
        kv_lora_rank=_req(cfg, "kv_lora_rank"),
        qk_rope_head_dim=_req(cfg, "qk_rope_head_dim"),
        qk_nope_head_dim=_req(cfg, "qk_nope_head_dim"),
        v_head_dim=_req(cfg, "v_head_dim"),
        mtp_layers=_opt(cfg, "num_nextn_predict_layers") or 0,
    )
    d.kw["shared_expert_intermediate_size"] = d.moe_inter


def _layout_nemotron_h(cfg: dict[str, Any], d: _Draft) -> None:
    pattern = str(cfg.get("hybrid_override_pattern") or "")
    if len(pattern) != d.n_layers:
        raise UserError(
            f"model config hybrid_override_pattern has {len(pattern)} layers, "
            f"num_hidden_layers says {d.n_layers}",
            "Fix the config.json",
        )
    table = {"M": ("mamba", "none"), "*": ("attention", "none"), "-": ("none", "dense")}
    table["E"] = ("none", "moe")
    d.mixers = [table[c][0] for c in pattern]
    d.mlps = [table[c][1] for c in pattern]
    d.kw.update(
        mamba_num_heads=_req(cfg, "mamba_num_heads"),
        mamba_head_dim=_req(cfg, "mamba_head_dim"),
        ssm_state_size=_req(cfg, "ssm_state_size"),
        mamba_n_groups=_opt(cfg, "n_groups") or 1,
        conv_kernel=_opt(cfg, "conv_kernel") or 4,
        mamba_conv_bias=bool(cfg.get("use_conv_bias", True)),
        norms_per_layer=1,
        mlp_gated=False,
    )


def _layout_moe(cfg: dict[str, Any], d: _Draft) -> None:
    """Mixtral-, Qwen-MoE- and gpt-oss-style models: every ``decoder_sparse_step``-th layer."""
    sparse_step = _opt(cfg, "decoder_sparse_step") or 1
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    d.mlps = [
        "moe" if (i not in mlp_only and (i + 1) % sparse_step == 0) else "dense"
        for i in range(d.n_layers)
    ]
    if d.model_type in ("mixtral", "gpt_oss") or d.moe_inter is None:
        d.moe_inter = d.moe_inter or d.dense_inter
    if d.model_type == "qwen2_moe":
        # One shared expert sized by its own field, behind a sigmoid gate that is built
        # even when that size is 0.
        d.kw["shared_expert_gate"] = True
        if d.n_shared is None and _opt(cfg, "shared_expert_intermediate_size"):
            d.n_shared = 1
    if d.n_shared:
        shared_inter = _opt(cfg, "shared_expert_intermediate_size") or d.moe_inter
        d.kw["shared_expert_intermediate_size"] = shared_inter


_LAYOUTS = {
    "llama4": _layout_llama4,
    "deepseek_v3": _layout_deepseek,
    "deepseek_v2": _layout_deepseek,
    "kimi_k2": _layout_deepseek,
    "nemotron_h": _layout_nemotron_h,
}
"""Model types whose layer layout has its own reader (other MoE models: :func:`_layout_moe`)."""


def _sliding_windows(cfg: dict[str, Any], d: _Draft) -> None:
    """Mark the sliding-window layers of the families that have them."""
    window = _opt(cfg, "sliding_window")
    if not window:
        return
    if d.model_type in ("gpt_oss", "gemma2"):
        for i in range(0, d.n_layers, 2):
            d.mixers[i], d.windows[i] = "sliding", window
    elif d.model_type in ("gemma3", "gemma3_text"):
        pattern_n = _opt(cfg, "sliding_window_pattern") or 6
        for i in range(d.n_layers):
            if (i + 1) % pattern_n:
                d.mixers[i], d.windows[i] = "sliding", window
    elif d.model_type in ("mistral", "starcoder2", "phi3", "qwen2") and cfg.get(
        "use_sliding_window", True
    ):
        max_pos = _opt(cfg, "max_position_embeddings") or 0
        if window < max_pos:
            for i in range(d.n_layers):
                if d.mixers[i] == "attention":
                    d.mixers[i], d.windows[i] = "sliding", window


def _family_details(cfg: dict[str, Any], model_type: str) -> dict[str, Any]:
    """Biases, norms and quantization: the per-family details that change parameter counts."""
    kw: dict[str, Any] = {}
    if model_type == "starcoder2":
        kw.update(mlp_gated=False, mlp_bias=True, qkv_bias=True, o_bias=True, norm_bias=True)
        kw["qkv_bias"] = bool(cfg.get("use_bias", True))
    elif model_type == "phi3small":
        kw.update(mlp_bias=True, qkv_bias=True, o_bias=True, norm_bias=True)
    elif model_type == "gpt_oss":
        kw.update(
            qkv_bias=True, o_bias=True, expert_bias=True, router_bias=True, attention_sinks=True
        )
    elif model_type in ("qwen2", "qwen2_moe"):
        kw.update(qkv_bias=True, o_bias=False)  # Qwen2 projects q, k, v with biases, o without
    else:
        attn_bias = bool(cfg.get("attention_bias", False))
        kw.update(qkv_bias=attn_bias, o_bias=attn_bias, mlp_bias=bool(cfg.get("mlp_bias", False)))
    if model_type in ("gemma2", "gemma3", "gemma3_text"):
        kw["norms_per_layer"] = 4
    if model_type.startswith("qwen3") or model_type in ("gemma3", "gemma3_text", "olmo2"):
        kw["qk_norm"] = True
    qcfg = cfg.get("quantization_config")
    if isinstance(qcfg, dict):
        kw["quant_method"] = qcfg.get("quant_method")
        # Meta's fbgemm fp8 checkpoints list every self-attention projection among the
        # modules left in BF16 (only the feed-forward layers are fp8).
        kept = qcfg.get("modules_to_not_convert") or []
        kw["bf16_attention"] = any("self_attn" in str(m) for m in kept)
        kw["epilogue_scaled"] = _epilogue_scaled(qcfg)
    return kw


def _epilogue_scaled(qcfg: dict[str, Any]) -> bool:
    """Whether an fp8 checkpoint scales its weights per tensor or per output channel.

    Such scales are applied once, in the matmul's epilogue; 128 x 128 block scales
    (``weight_block_size``, DeepSeek's and Qwen's fp8) are applied in the main loop.
    """
    method = str(qcfg.get("quant_method") or "")
    if method == "fbgemm_fp8":  # Meta's row-wise (per-channel) fp8
        return True
    if method == "fp8":
        return not qcfg.get("weight_block_size")
    if method == "compressed-tensors":  # llm-compressor: the weights' strategy says
        groups = qcfg.get("config_groups") or {}
        strategies = {
            str((g.get("weights") or {}).get("strategy", ""))
            for g in groups.values()
            if isinstance(g, dict) and (g.get("weights") or {}).get("type") == "float"
        }
        return bool(strategies) and strategies <= {"tensor", "channel"}
    return False


def _finish_moe(d: _Draft) -> bool:
    """Settle whether the model is MoE (some layer routes) and check its expert counts."""
    is_moe = d.is_moe and any(m == "moe" for m in d.mlps)
    if not is_moe:
        d.n_experts = d.top_k = d.n_shared = d.moe_inter = None
        d.kw.pop("shared_expert_intermediate_size", None)
    elif d.top_k is not None and d.n_experts is not None and d.top_k > d.n_experts:
        raise UserError(
            f"model config num_experts_per_tok ({d.top_k}) exceeds num_experts ({d.n_experts})",
            "Fix the config.json",
        )
    if d.dense_inter is None:
        if any(m == "dense" for m in d.mlps):
            raise UserError(
                "model config is missing required field 'intermediate_size'",
                "Pass a complete Hugging Face config.json",
            )
        d.dense_inter = 0
    return is_moe


def _parse(cfg: dict[str, Any]) -> ArchitectureSpec:
    model_type = str(cfg.get("model_type") or "unknown")
    hidden = _req(cfg, "hidden_size", "d_model", "n_embd")
    n_layers = _req(cfg, "num_hidden_layers", "n_layer", "num_layers")
    n_heads = _req(cfg, "num_attention_heads", "n_head")
    n_kv = _opt(cfg, "num_key_value_heads", "num_kv_heads") or n_heads
    head_dim = _opt(cfg, "head_dim") or hidden // n_heads
    vocab = _req(cfg, "vocab_size")
    if n_heads % n_kv:
        raise UserError(
            f"model config num_attention_heads ({n_heads}) is not a multiple of "
            f"num_key_value_heads ({n_kv})",
            "Fix the config.json",
        )
    draft = _Draft(
        model_type=model_type,
        n_layers=n_layers,
        n_experts=_opt(cfg, "num_experts", "n_routed_experts", "num_local_experts"),
        top_k=_opt(cfg, "num_experts_per_tok", "experts_per_token", "moe_topk"),
        n_shared=_opt(cfg, "n_shared_experts", "num_shared_experts"),
        moe_inter=_opt(cfg, "moe_intermediate_size"),
        dense_inter=_opt(cfg, "intermediate_size", "ff_intermediate_size", "ffn_hidden_size"),
    )
    layout = _LAYOUTS.get(model_type) or (_layout_moe if draft.is_moe else None)
    if layout is not None:
        layout(cfg, draft)
    _sliding_windows(cfg, draft)
    is_moe = _finish_moe(draft)
    kw = {**draft.kw, **_family_details(cfg, model_type)}
    layers = tuple(
        LayerSpec(m, p, w) for m, p, w in zip(draft.mixers, draft.mlps, draft.windows, strict=True)
    )
    return ArchitectureSpec(
        model_type=model_type,
        hidden_size=hidden,
        num_layers=n_layers,
        num_heads=n_heads,
        num_kv_heads=n_kv,
        head_dim=head_dim,
        vocab_size=vocab,
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        intermediate_size=draft.dense_inter or 0,
        layers=layers,
        is_moe=is_moe,
        num_experts=draft.n_experts,
        experts_per_token=draft.top_k,
        num_shared_experts=(draft.n_shared or 0) if is_moe else None,
        moe_intermediate_size=draft.moe_inter,
        max_position_embeddings=_opt(cfg, "max_position_embeddings"),
        extra={"model_id": cfg.get("model_id")},
        **kw,
    )
