"""Per-model workload profile: bytes and FLOPs per token that the physical model needs.

A :class:`ModelProfile` condenses an :class:`~mlenergy.models.architecture.ArchitectureSpec`
and a weight precision into a dozen numbers (weight bytes, expert bytes, FLOPs per token, KV
bytes per context token, attention FLOPs per context token, recurrent-state bytes), so that
the estimator's hot loop is pure numpy arithmetic.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from mlenergy.errors import UserError
from mlenergy.models.architecture import ArchitectureSpec
from mlenergy.models.parameters import count_parameters, mixer_params, mlp_params
from mlenergy.reference.precisions import precision_name, precisions

PRECISION_BYTES: dict[str, float] = {p.name: p.bytes_per_weight for p in precisions().values()}
"""Bytes per weight for each supported precision (block scales included; the precision
vocabulary's, :mod:`mlenergy.reference.precisions`)."""

QUANTISED = frozenset(p.name for p in precisions().values() if p.block_scaled)
"""Precisions stored with block scales that kernels must apply when reading weights."""

KV_BYTES = 2.0
"""Bytes per KV-cache element: vLLM's default cache dtype follows the activations (BF16)."""
SSM_STATE_BYTES = 2.0
"""Bytes per Mamba SSM-state element: vLLM's ``mamba_ssm_cache_dtype`` default (``auto``)
follows the cache dtype (BF16). Model cards may ask for ``float32`` (4 bytes); the measured
decode steps of the Nemotron-H hybrids match the BF16 state (see the estimator README)."""


def normalise_precision(precision: str | None) -> str:
    """Return the canonical precision name; raise :class:`UserError` for unknown ones.

    Spellings are the precision vocabulary's (:mod:`mlenergy.reference.precisions`); ``None``
    or empty is ``bfloat16``.
    """
    p = precision_name(precision or "bfloat16")
    if p is None:
        raise UserError(
            f"unknown precision '{precision}'",
            f"Use one of {', '.join(k for k in PRECISION_BYTES if k != 'float32')}",
        )
    return p


@dataclass(frozen=True)
class ModelProfile:
    """What one token costs in a model at a given weight precision.

    Attributes:
        precision: Weight precision of the linear layers (dense part).
        expert_precision: Weight precision of routed experts.
        common_bytes: Bytes of weights read every decode step (all but routed experts and
            the input embedding; includes the LM head).
        embedding_bytes: Bytes of the input embedding table (in memory, not read per step).
        expert_bytes: Bytes of one routed expert in one layer.
        n_moe_layers: Layers with routed experts.
        num_experts: Routed experts per MoE layer (1 for dense).
        experts_per_token: Routed experts per token (0 for dense).
        dense_flops_per_token: Matmul FLOPs per token outside routed experts (LM head included).
        bf16_flops_per_token: The part of ``dense_flops_per_token`` in self-attention that a
            quantised checkpoint keeps in BF16 (run at the BF16 tensor rate); 0 otherwise.
            The LM head, BF16 too, is counted at the dense precision's rate (the BF16 rate
            for it and for attention on the KV cache scored worse: docs/estimator-tried.md).
        epilogue_scaled: The fp8 weights carry per-tensor or per-channel scales, which the
            matmul applies in its epilogue (no dequantising work while the weights stream on
            GPUs with fp8 tensor cores); False for block scales.
        expert_flops_per_token: Matmul FLOPs per token inside routed experts.
        kv_full_bytes_per_token: KV bytes per context token over full-attention layers.
        kv_window_bytes_per_token: KV bytes per context token over windowed layers.
        window: Attention window of windowed layers in tokens (0 if none).
        attn_full_flops: Attention FLOPs per query token per context token (full layers).
        attn_window_flops: Same, for windowed layers (applies up to ``window`` tokens).
        ssm_state_bytes: Recurrent-state bytes per sequence (Mamba SSM and conv states).
        ssm_flops_per_token: State-update FLOPs per token.
        n_mamba_layers: Mamba (SSM) layers of a hybrid (0 for attention-only models).
        quant_common_elems: Weight elements outside routed experts stored in a scaled
            low-precision format (fp8, mxfp4, nvfp4) that kernels dequantise when read.
        quant_expert_elems: Same, for one routed expert in one layer.
        quant_common_bytes: Stored bytes of those elements (what the dequantising kernels
            stream).
        quant_expert_bytes: Same, for one routed expert in one layer.
        num_kv_heads: KV heads (TP shards the KV cache at most this many ways).
        latent_kv: True for MLA (the latent cache is replicated across TP ranks).
        num_layers: Decoder layers.
        hidden_size: Model width.
        total_params: Total parameters.
        active_params: Parameters used per token.
    """

    precision: str
    expert_precision: str
    common_bytes: float
    embedding_bytes: float
    expert_bytes: float
    n_moe_layers: int
    num_experts: int
    experts_per_token: int
    dense_flops_per_token: float
    expert_flops_per_token: float
    kv_full_bytes_per_token: float
    kv_window_bytes_per_token: float
    window: int
    attn_full_flops: float
    attn_window_flops: float
    ssm_state_bytes: float
    ssm_flops_per_token: float
    quant_common_elems: float
    quant_expert_elems: float
    quant_common_bytes: float
    quant_expert_bytes: float
    num_kv_heads: int
    latent_kv: bool
    num_layers: int
    hidden_size: int
    total_params: int
    active_params: int
    is_moe: bool
    kind: str
    expert_intermediate: int = 0
    n_mamba_layers: int = 0
    bf16_flops_per_token: float = 0.0
    epilogue_scaled: bool = False

    @property
    def weight_bytes(self) -> float:
        """Bytes of all weights in memory."""
        moe = self.expert_bytes * self.num_experts * self.n_moe_layers
        return self.common_bytes + self.embedding_bytes + moe

    def as_dict(self) -> dict[str, float | int | str | bool]:
        """Plain-dict form."""
        return asdict(self)


def _mixer_terms(spec: ArchitectureSpec) -> tuple[float, float, float, float, int, float, float]:
    """What the layers' token mixers keep and compute per token, summed over the layers.

    Returns:
        KV cache bytes per token of full and of windowed attention layers, attention FLOPs
        per context token of the same two, the widest window (tokens), and the Mamba
        layers' recurrent state bytes per sequence and FLOPs per token.
    """
    kv_full = kv_win = attn_full = attn_win = 0.0
    window = 0
    ssm_bytes = ssm_flops = 0.0
    kv_per_layer = 2 * spec.num_kv_heads * spec.head_dim * KV_BYTES
    attn_per_layer = 4.0 * spec.num_heads * spec.head_dim
    for layer in spec.layers:
        if layer.mixer == "attention":
            kv_full += kv_per_layer
            attn_full += attn_per_layer
        elif layer.mixer in ("sliding", "chunked"):
            kv_win += kv_per_layer
            attn_win += attn_per_layer
            window = max(window, layer.window or 0)
        elif layer.mixer == "mla":
            rank, rope = spec.kv_lora_rank or 0, spec.qk_rope_head_dim or 0
            kv_full += (rank + rope) * KV_BYTES
            attn_full += 2.0 * spec.num_heads * (2 * rank + rope)
        elif layer.mixer == "mamba":
            nh, hd = spec.mamba_num_heads or 0, spec.mamba_head_dim or 0
            gs = (spec.mamba_n_groups or 1) * (spec.ssm_state_size or 0)
            state = nh * hd * (spec.ssm_state_size or 0)
            conv = (nh * hd + 2 * gs) * ((spec.conv_kernel or 4) - 1)
            ssm_bytes += state * SSM_STATE_BYTES + conv * KV_BYTES
            ssm_flops += 6.0 * state
    return kv_full, kv_win, attn_full, attn_win, window, ssm_bytes, ssm_flops


def build_profile(spec: ArchitectureSpec, precision: str | None = "bfloat16") -> ModelProfile:
    """Compute the :class:`ModelProfile` of ``spec`` with weights in ``precision``.

    Norms, routers, embeddings and the LM head stay in BF16 (as serving engines keep them),
    and so does self-attention where the checkpoint keeps it (``spec.bf16_attention``).
    gpt-oss style checkpoints (``quant_method: mxfp4``) keep attention in BF16 and routed
    experts in MXFP4 whatever ``precision`` says, unless ``precision`` is nvfp4.

    Args:
        spec: Parsed architecture.
        precision: ``bfloat16``, ``float16``, ``fp8``, ``mxfp4`` or ``nvfp4``.
    """
    prec = normalise_precision(precision)
    counts = count_parameters(spec)
    h = spec.hidden_size
    expert_prec = prec
    dense_prec = prec
    if spec.quant_method == "mxfp4" and prec in ("bfloat16", "mxfp4", "float16"):
        expert_prec, dense_prec = "mxfp4", "bfloat16"
    elif prec == "mxfp4" and not spec.is_moe:
        dense_prec = "mxfp4"
    bd, be, b16 = PRECISION_BYTES[dense_prec], PRECISION_BYTES[expert_prec], 2.0

    linear_common = counts.attention + counts.dense_mlp + counts.shared_experts
    # Linear weights outside the routed experts kept in BF16 while the rest is quantised:
    # self-attention in checkpoints that leave it out (Meta's fp8), else none.
    kept_bf16 = counts.attention if dense_prec in QUANTISED and spec.bf16_attention else 0
    linear_quant = linear_common - kept_bf16
    common_bytes = linear_quant * bd + kept_bf16 * b16 + counts.norms * b16 + counts.lm_head * b16
    if spec.tie_embeddings:
        common_bytes += counts.embedding * b16  # the tied table is read as the LM head
    embedding_bytes = 0.0 if spec.tie_embeddings else counts.embedding * b16
    expert_one = 0
    if spec.is_moe:
        inter = spec.moe_intermediate_size or spec.intermediate_size
        expert_one = mlp_params(h, inter, spec.mlp_gated, spec.expert_bias)
    lm_head = counts.lm_head or counts.embedding
    dense_flops = 2.0 * (linear_common + lm_head)
    # Matmuls whose weights stay BF16 run at the BF16 tensor rate whatever the rest uses.
    bf16_flops = 2.0 * kept_bf16
    expert_flops = 2.0 * counts.active_routed_experts

    kv_full, kv_win, attn_full, attn_win, window, ssm_bytes, ssm_flops = _mixer_terms(spec)
    return ModelProfile(
        precision=dense_prec,
        expert_precision=expert_prec,
        common_bytes=float(common_bytes),
        embedding_bytes=float(embedding_bytes),
        expert_bytes=float(expert_one * be),
        n_moe_layers=spec.num_moe_layers,
        num_experts=spec.num_experts or 1,
        experts_per_token=spec.experts_per_token or 0,
        dense_flops_per_token=dense_flops,
        bf16_flops_per_token=bf16_flops,
        epilogue_scaled=bool(spec.epilogue_scaled and "fp8" in (dense_prec, expert_prec)),
        expert_flops_per_token=expert_flops,
        kv_full_bytes_per_token=kv_full,
        kv_window_bytes_per_token=kv_win,
        window=window,
        attn_full_flops=attn_full,
        attn_window_flops=attn_win,
        ssm_state_bytes=ssm_bytes,
        ssm_flops_per_token=ssm_flops,
        quant_common_elems=float(linear_quant if dense_prec in QUANTISED else 0),
        quant_expert_elems=float(expert_one if expert_prec in QUANTISED else 0),
        quant_common_bytes=float(linear_quant * bd if dense_prec in QUANTISED else 0),
        quant_expert_bytes=float(expert_one * be if expert_prec in QUANTISED else 0),
        num_kv_heads=spec.num_kv_heads,
        latent_kv=any(layer.mixer == "mla" for layer in spec.layers),
        num_layers=spec.num_layers,
        hidden_size=h,
        total_params=counts.total,
        active_params=counts.active,
        is_moe=spec.is_moe,
        kind=spec.kind,
        n_mamba_layers=sum(layer.mixer == "mamba" for layer in spec.layers),
        expert_intermediate=int(
            (spec.moe_intermediate_size or spec.intermediate_size) if spec.is_moe else 0
        ),
    )


def check_divisibility(spec: ArchitectureSpec, tensor_parallel: int) -> None:
    """Raise :class:`UserError` if ``tensor_parallel`` does not divide the attention heads."""
    if tensor_parallel < 1:
        raise UserError(f"tensor_parallel must be >= 1, got {tensor_parallel}")
    if spec.num_heads % tensor_parallel:
        raise UserError(
            f"tensor_parallel ({tensor_parallel}) does not divide num_attention_heads "
            f"({spec.num_heads})",
            "Pick a tensor-parallel degree that divides the number of heads",
        )


__all__ = [
    "PRECISION_BYTES",
    "ModelProfile",
    "build_profile",
    "check_divisibility",
    "mixer_params",
    "normalise_precision",
]


def weight_precision(fp8_id: bool, precision: str | None, stored: str | None = None) -> str:
    """Weight precision of a row: ``precision``, else what the checkpoint stores.

    Empty (or ``auto``) ``precision``: fp8 for a ``-FP8`` id or a checkpoint whose
    ``quantization_config`` says ``quant_method: fp8`` (DeepSeek-V3/R1 ship fp8 weights, and
    vLLM serves them so) or ``fbgemm_fp8`` (Meta's fp8 checkpoints),
    else bfloat16 (gpt-oss style ``mxfp4`` checkpoints are handled by the profile).
    A ``-FP8`` id means fp8 weights: its precision must be empty or ``fp8``.

    Args:
        fp8_id: The model id ends in ``-FP8``.
        precision: The requested precision (may be empty).
        stored: The checkpoint's ``quant_method`` (None if unquantised).

    Raises:
        UserError: A ``-FP8`` id with another precision (conflicting precision).
    """
    p = (precision or "").strip()
    if p.lower() == "auto":  # vLLM's --dtype auto: what the checkpoint stores
        p = ""
    if fp8_id:
        if p and normalise_precision(p) != "fp8":
            raise UserError(
                f"precision '{p}' conflicts with the model's -FP8 weights",
                "Omit --precision or give fp8 for a -FP8 model (or drop the -FP8 suffix)",
            )
        return "fp8"
    if not p and stored in ("fp8", "fbgemm_fp8"):
        return "fp8"
    return normalise_precision(p or None)
