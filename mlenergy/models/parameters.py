"""Total and active parameter counts of a decoder-only model, from its :class:`ArchitectureSpec`.

Pure Python (no torch, no transformers): counts come from the layer-by-layer description that
:meth:`~mlenergy.models.architecture.ArchitectureSpec.from_config` reads from a config, so the
estimator and the store count a 600B model without building it.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlenergy.models.architecture import ArchitectureSpec


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
