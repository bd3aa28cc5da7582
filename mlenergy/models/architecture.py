"""Pure-Python reading of Hugging Face ``config.json`` dicts: architecture and parameter counts.

:class:`ArchitectureSpec` normalises the many spellings of transformer configs (dense with
grouped-query attention, Mixture-of-Experts with shared experts and dense first layers,
multi-head latent attention, sliding-window and chunked attention, Mamba-2 hybrids) into one
layer-by-layer description. :func:`count_parameters` turns it into total and active (per token)
parameter counts. No torch, no transformers: the estimator and the store use this too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mlenergy.errors import UserError
from mlenergy.models.config_values import check_config_values, count_field, flatten_text_config

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
    mtp_layers: int = 0
    max_position_embeddings: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def num_moe_layers(self) -> int:
        """Number of layers with a routed-expert MLP."""
        return sum(1 for layer in self.layers if layer.mlp == "moe")

    @property
    def kind(self) -> str:
        """``dense``, ``moe`` or ``hybrid`` (Mamba layers present; MoE wins if both)."""
        if self.is_moe:
            return "moe"
        if any(layer.mixer == "mamba" for layer in self.layers):
            return "hybrid"
        return "dense"

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
    tie = bool(cfg.get("tie_word_embeddings", False))
    kw: dict[str, Any] = {}

    # MoE fields, any spelling.
    n_experts = _opt(cfg, "num_experts", "n_routed_experts", "num_local_experts")
    top_k = _opt(cfg, "num_experts_per_tok", "experts_per_token", "moe_topk")
    n_shared = _opt(cfg, "n_shared_experts", "num_shared_experts")
    is_moe = bool(n_experts and n_experts > 1 and top_k)
    moe_inter = _opt(cfg, "moe_intermediate_size")
    dense_inter = _opt(cfg, "intermediate_size", "ff_intermediate_size", "ffn_hidden_size")

    window = _opt(cfg, "sliding_window")
    mixers = ["attention"] * n_layers
    mlps = ["dense"] * n_layers
    windows: list[int | None] = [None] * n_layers

    if model_type in ("llama4",):
        step = _opt(cfg, "interleave_moe_layer_step") or 1
        mlps = ["moe" if (i + 1) % step == 0 else "dense" for i in range(n_layers)]
        n_shared = 1 if n_shared is None else n_shared
        moe_inter = moe_inter or dense_inter
        dense_inter = _opt(cfg, "intermediate_size_mlp") or dense_inter
        kw["shared_expert_intermediate_size"] = moe_inter
        chunk = _opt(cfg, "attention_chunk_size")
        if chunk:
            for i in range(n_layers):
                if (i + 1) % 4:  # every 4th layer is global (NoPE)
                    mixers[i], windows[i] = "chunked", chunk
    elif model_type in ("deepseek_v3", "deepseek_v2", "kimi_k2"):
        first_dense = _opt(cfg, "first_k_dense_replace") or 0
        freq = _opt(cfg, "moe_layer_freq") or 1
        mlps = ["moe" if i >= first_dense and i % freq == 0 else "dense" for i in range(n_layers)]
        mixers = ["mla"] * n_layers
        kw.update(
            q_lora_rank=_opt(cfg, "q_lora_rank"),
            kv_lora_rank=_req(cfg, "kv_lora_rank"),
            qk_rope_head_dim=_req(cfg, "qk_rope_head_dim"),
            qk_nope_head_dim=_req(cfg, "qk_nope_head_dim"),
            v_head_dim=_req(cfg, "v_head_dim"),
            mtp_layers=_opt(cfg, "num_nextn_predict_layers") or 0,
        )
        kw["shared_expert_intermediate_size"] = moe_inter
    elif model_type in ("nemotron_h",):
        pattern = str(cfg.get("hybrid_override_pattern") or "")
        if len(pattern) != n_layers:
            raise UserError(
                f"model config hybrid_override_pattern has {len(pattern)} layers, "
                f"num_hidden_layers says {n_layers}",
                "Fix the config.json",
            )
        table = {"M": ("mamba", "none"), "*": ("attention", "none"), "-": ("none", "dense")}
        table["E"] = ("none", "moe")
        mixers = [table[c][0] for c in pattern]
        mlps = [table[c][1] for c in pattern]
        kw.update(
            mamba_num_heads=_req(cfg, "mamba_num_heads"),
            mamba_head_dim=_req(cfg, "mamba_head_dim"),
            ssm_state_size=_req(cfg, "ssm_state_size"),
            mamba_n_groups=_opt(cfg, "n_groups") or 1,
            conv_kernel=_opt(cfg, "conv_kernel") or 4,
            mamba_conv_bias=bool(cfg.get("use_conv_bias", True)),
            norms_per_layer=1,
            mlp_gated=False,
        )
    elif is_moe:
        sparse_step = _opt(cfg, "decoder_sparse_step") or 1
        mlp_only = set(cfg.get("mlp_only_layers") or [])
        mlps = [
            "moe" if (i not in mlp_only and (i + 1) % sparse_step == 0) else "dense"
            for i in range(n_layers)
        ]
        if model_type in ("mixtral", "gpt_oss") or moe_inter is None:
            moe_inter = moe_inter or dense_inter
        if model_type == "qwen2_moe":
            # One shared expert sized by its own field, behind a sigmoid gate that is built
            # even when that size is 0.
            kw["shared_expert_gate"] = True
            if n_shared is None and _opt(cfg, "shared_expert_intermediate_size"):
                n_shared = 1
        if n_shared:
            shared_inter = _opt(cfg, "shared_expert_intermediate_size") or moe_inter
            kw["shared_expert_intermediate_size"] = shared_inter

    # Sliding windows.
    if model_type == "gpt_oss" or model_type in ("gemma2",):
        if window:
            for i in range(0, n_layers, 2):
                mixers[i], windows[i] = "sliding", window
    elif model_type in ("gemma3", "gemma3_text"):
        pattern_n = _opt(cfg, "sliding_window_pattern") or 6
        if window:
            for i in range(n_layers):
                if (i + 1) % pattern_n:
                    mixers[i], windows[i] = "sliding", window
    elif (
        window
        and model_type in ("mistral", "starcoder2", "phi3", "qwen2")
        and (cfg.get("use_sliding_window", True))
    ):
        max_pos = _opt(cfg, "max_position_embeddings") or 0
        if window < max_pos:
            for i in range(n_layers):
                if mixers[i] == "attention":
                    mixers[i], windows[i] = "sliding", window

    if is_moe and not any(m == "moe" for m in mlps):
        is_moe = False
    if not is_moe:
        n_experts = top_k = n_shared = moe_inter = None
        kw.pop("shared_expert_intermediate_size", None)
    elif top_k is not None and n_experts is not None and top_k > n_experts:
        raise UserError(
            f"model config num_experts_per_tok ({top_k}) exceeds num_experts ({n_experts})",
            "Fix the config.json",
        )
    needs_dense = any(m == "dense" for m in mlps)
    if dense_inter is None:
        if needs_dense:
            raise UserError(
                "model config is missing required field 'intermediate_size'",
                "Pass a complete Hugging Face config.json",
            )
        dense_inter = 0

    # Per-family details that change parameter counts.
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

    layers = tuple(LayerSpec(m, p, w) for m, p, w in zip(mixers, mlps, windows, strict=True))
    return ArchitectureSpec(
        model_type=model_type,
        hidden_size=hidden,
        num_layers=n_layers,
        num_heads=n_heads,
        num_kv_heads=n_kv,
        head_dim=head_dim,
        vocab_size=vocab,
        tie_embeddings=tie,
        intermediate_size=dense_inter,
        layers=layers,
        is_moe=is_moe,
        num_experts=n_experts,
        experts_per_token=top_k,
        num_shared_experts=(n_shared or 0) if is_moe else None,
        moe_intermediate_size=moe_inter,
        max_position_embeddings=_opt(cfg, "max_position_embeddings"),
        extra={"model_id": cfg.get("model_id")},
        **kw,
    )


@dataclass(frozen=True)
class ParameterCount:
    """Parameter counts of a model (counts, not bytes).

    Attributes:
        total: All parameters (main model; multi-token-prediction heads excluded).
        active: Parameters used per token: routed experts counted ``experts_per_token`` times.
        embedding: Input embedding table.
        lm_head: Output projection (0 when tied to the embedding).
        attention: Token-mixer parameters over all layers (attention, MLA or Mamba).
        dense_mlp: Dense MLP parameters over all layers.
        routed_experts: All routed-expert parameters over all layers.
        active_routed_experts: Routed-expert parameters a token uses.
        shared_experts: Always-on shared-expert parameters (plus routers).
        norms: Normalisation parameters.
        mtp: Multi-token-prediction module parameters (not in ``total``).
    """

    total: int
    active: int
    embedding: int
    lm_head: int
    attention: int
    dense_mlp: int
    routed_experts: int
    active_routed_experts: int
    shared_experts: int
    norms: int
    mtp: int = 0

    @property
    def expert_params_per_expert_layer(self) -> int:
        """Routed-expert parameters of one expert summed over layers (0 for dense)."""
        return self.routed_experts


def mixer_params(spec: ArchitectureSpec, mixer: str) -> int:
    """Parameters of one token mixer of kind ``mixer`` (see :data:`MIXERS`)."""
    h = spec.hidden_size
    if mixer in ("attention", "sliding", "chunked"):
        q = spec.num_heads * spec.head_dim
        kv = spec.num_kv_heads * spec.head_dim
        n = h * (q + 2 * kv) + q * h
        if spec.qkv_bias:
            n += q + 2 * kv
        if spec.o_bias:
            n += h
        if spec.qk_norm:
            n += 2 * spec.head_dim
        if spec.attention_sinks:
            n += spec.num_heads
        return n
    if mixer == "mla":
        nh = spec.num_heads
        rope, nope, v = spec.qk_rope_head_dim or 0, spec.qk_nope_head_dim or 0, spec.v_head_dim or 0
        kvr = spec.kv_lora_rank or 0
        if spec.q_lora_rank:
            n = h * spec.q_lora_rank + spec.q_lora_rank + spec.q_lora_rank * nh * (nope + rope)
        else:
            n = h * nh * (nope + rope)
        n += h * (kvr + rope) + kvr + kvr * nh * (nope + v) + nh * v * h
        return n
    if mixer == "mamba":
        nh = spec.mamba_num_heads or 0
        d_inner = nh * (spec.mamba_head_dim or 0)
        gs = (spec.mamba_n_groups or 1) * (spec.ssm_state_size or 0)
        conv_dim = d_inner + 2 * gs
        n = h * (2 * d_inner + 2 * gs + nh)  # in_proj: z, x, B, C, dt
        n += conv_dim * (spec.conv_kernel or 4) + (conv_dim if spec.mamba_conv_bias else 0)
        n += 3 * nh + d_inner  # dt_bias, A_log, D, gated norm
        n += d_inner * h  # out_proj
        return n
    return 0


def mlp_params(hidden: int, inter: int, gated: bool, bias: bool) -> int:
    """Parameters of one MLP (or one expert) of width ``inter``."""
    n = hidden * inter * (3 if gated else 2)
    if bias:
        n += inter * (2 if gated else 1) + hidden
    return n


def count_parameters(spec: ArchitectureSpec) -> ParameterCount:
    """Count total and active parameters from an :class:`ArchitectureSpec`.

    Args:
        spec: The architecture.

    Returns:
        Counts of parameters (integers). ``active`` counts embedding and LM head once each.
    """
    h = spec.hidden_size
    embedding = spec.vocab_size * h
    lm_head = 0 if spec.tie_embeddings else spec.vocab_size * h
    norm_size = 2 * h if spec.norm_bias else h
    attention = dense = routed = routed_active = shared = norms = 0
    for layer in spec.layers:
        attention += mixer_params(spec, layer.mixer)
        if layer.mlp == "dense":
            dense += mlp_params(h, spec.intermediate_size, spec.mlp_gated, spec.mlp_bias)
        elif layer.mlp == "moe":
            inter = spec.moe_intermediate_size or spec.intermediate_size
            one = mlp_params(h, inter, spec.mlp_gated, spec.expert_bias)
            routed += one * (spec.num_experts or 0)
            routed_active += one * (spec.experts_per_token or 0)
            n_sh = spec.num_shared_experts or 0
            if n_sh:
                sh_inter = spec.shared_expert_intermediate_size or inter
                shared += n_sh * mlp_params(h, sh_inter, spec.mlp_gated, False)
            if spec.shared_expert_gate:
                shared += h  # sigmoid gate of the shared expert (Linear(h, 1))
            shared += h * (spec.num_experts or 0)  # router
            if spec.router_bias:
                shared += spec.num_experts or 0
            if spec.model_type.startswith("deepseek"):
                shared += spec.num_experts or 0  # e_score_correction_bias
        norms += spec.norms_per_layer * norm_size
    norms += norm_size  # final norm
    common = embedding + lm_head + attention + dense + shared + norms
    total = common + routed
    active = common + routed_active
    mtp = 0
    if spec.mtp_layers:
        # DeepSeek MTP: embed projections (2h -> h), a full MoE layer and norms, per module.
        moe_layer = next((i for i, layer in enumerate(spec.layers) if layer.mlp == "moe"), 0)
        per_layer = mixer_params(spec, spec.layers[moe_layer].mixer)
        inter = spec.moe_intermediate_size or spec.intermediate_size
        per_layer += (spec.num_experts or 0) * mlp_params(h, inter, spec.mlp_gated, False)
        per_layer += (spec.num_shared_experts or 0) * mlp_params(h, inter, spec.mlp_gated, False)
        mtp = spec.mtp_layers * (per_layer + 2 * h * h + 4 * h)
    return ParameterCount(
        total=total,
        active=active,
        embedding=embedding,
        lm_head=lm_head,
        attention=attention,
        dense_mlp=dense,
        routed_experts=routed,
        active_routed_experts=routed_active,
        shared_experts=shared,
        norms=norms,
        mtp=mtp,
    )
