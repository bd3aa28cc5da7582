"""Model families of the dense-vs-MoE study, one per study size.

Every family shares one attention stack (Qwen2-style: GQA, RoPE, RMSNorm, SwiGLU) and
differs only in the feed-forward block, so energy and quality differences come from the MoE
design. Dense models are ``qwen2``; MoE models are ``qwen2_moe`` (a shared expert when
``shared_ffn > 0``).

Matching, by construction of the feed-forward widths (``F`` = the small dense width):
    * matched on active parameters: ``dense-F`` versus every MoE, whose
      ``top_k * expert_ffn + shared_ffn == F``;
    * matched on total parameters: ``dense-<num_experts * expert_ffn>`` versus the MoE models
      with that many expert parameters.
The variants cover top-1 and top-2 routing, few large versus many small experts, and with
or without a shared expert.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from mlenergy.errors import UserError

if TYPE_CHECKING:
    from transformers import PretrainedConfig

Role = Literal["dense-active", "dense-total", "moe"]


@dataclass(frozen=True)
class Variant:
    """One model of a family.

    Attributes:
        name: Short name used in tags, tables and plots (``moe-8x256-top2``).
        role: ``dense-active`` (baseline matched on active parameters), ``dense-total``
            (baseline matched on total parameters) or ``moe``.
        description: One line for the report.
        ffn: Dense feed-forward width (dense models).
        num_experts: Routed experts per layer (MoE).
        top_k: Experts per token (MoE).
        expert_ffn: Width of one expert (MoE).
        shared_ffn: Width of the always-on shared expert (0: none).
    """

    name: str
    role: Role
    description: str
    ffn: int | None = None
    num_experts: int | None = None
    top_k: int | None = None
    expert_ffn: int | None = None
    shared_ffn: int = 0

    @property
    def family(self) -> str:
        """``dense`` or ``moe``."""
        return "moe" if self.role == "moe" else "dense"


@dataclass(frozen=True)
class StudySize:
    """Shape and budget of one study size.

    Attributes:
        name: ``test``, ``tiny`` or ``small``.
        vocab_size: BPE vocabulary trained on the corpus.
        hidden_size: Model width.
        num_layers: Decoder layers.
        num_heads: Attention heads.
        num_kv_heads: Key/value heads (GQA).
        seq_len: Training and evaluation context, tokens.
        batch_size: Training sequences per step.
        steps: Default training steps.
        learning_rate: Peak AdamW learning rate.
        num_checkpoints: Evaluation points on the energy-to-quality curve.
        eval_max_tokens: Validation tokens per checkpoint (``None``: the whole split).
        corpus_max_chars: Characters of the corpus used (``None``: all).
        infer_batch_sizes: Inference batch sizes benchmarked after training.
        infer_input_tokens: Prompt tokens per sequence.
        infer_output_tokens: Generated tokens per sequence.
        infer_repeats: Measured repeats per inference point.
        infer_warmup: Unmeasured warm-up generations per point.
        idle_s: Idle-power measurement per model, seconds (0: skip).
        aux_loss_coef: Weight of the MoE load-balancing loss.
        variants: The models.
    """

    name: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    seq_len: int
    batch_size: int
    steps: int
    learning_rate: float
    num_checkpoints: int
    eval_max_tokens: int | None
    corpus_max_chars: int | None
    infer_batch_sizes: tuple[int, ...]
    infer_input_tokens: int
    infer_output_tokens: int
    infer_repeats: int
    infer_warmup: int
    idle_s: float
    aux_loss_coef: float
    variants: tuple[Variant, ...]

    def pairs(self) -> list[tuple[str, str, str]]:
        """``(comparison, moe_variant, dense_baseline)`` for every MoE and each baseline."""
        active = [v.name for v in self.variants if v.role == "dense-active"]
        total = [v.name for v in self.variants if v.role == "dense-total"]
        out: list[tuple[str, str, str]] = []
        for v in self.variants:
            if v.role != "moe":
                continue
            out.extend(("matched-active", v.name, b) for b in active)
            out.extend(("matched-total", v.name, b) for b in total)
        return out

    def build_config(self, variant: Variant, vocab_size: int | None = None) -> PretrainedConfig:
        """Return the ``transformers`` config of ``variant`` at this size.

        Args:
            variant: One of :attr:`variants`.
            vocab_size: Vocabulary of the trained tokenizer (default: :attr:`vocab_size`).
        """
        from transformers import Qwen2Config, Qwen2MoeConfig

        max_pos = max(self.seq_len, self.infer_input_tokens + self.infer_output_tokens) + 8
        common: dict[str, Any] = {
            "vocab_size": vocab_size or self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "max_position_embeddings": max_pos,
            "tie_word_embeddings": True,
            "bos_token_id": 0,
            "eos_token_id": 0,
            "pad_token_id": 1,
        }
        if variant.family == "dense":
            if variant.ffn is None:
                raise ValueError(f"dense variant {variant.name} has no ffn width")
            return Qwen2Config(intermediate_size=variant.ffn, **common)
        ffn, experts, top_k = variant.expert_ffn, variant.num_experts, variant.top_k
        if ffn is None or experts is None or top_k is None:
            raise ValueError(f"MoE variant {variant.name} needs expert_ffn, num_experts and top_k")
        return Qwen2MoeConfig(
            intermediate_size=ffn,
            moe_intermediate_size=ffn,
            num_experts=experts,
            num_experts_per_tok=top_k,
            shared_expert_intermediate_size=variant.shared_ffn,
            norm_topk_prob=top_k > 1,
            output_router_logits=True,
            router_aux_loss_coef=self.aux_loss_coef,
            decoder_sparse_step=1,
            mlp_only_layers=[],
            **common,
        )


def _variants(f: int) -> tuple[Variant, ...]:
    """The five-model family around dense width ``f`` (``f`` divisible by 4)."""
    return (
        Variant(f"dense-{f}", "dense-active", f"dense, FFN {f} (active baseline)", ffn=f),
        Variant(f"dense-{4 * f}", "dense-total", f"dense, FFN {4 * f} (total baseline)", ffn=4 * f),
        Variant(
            f"moe-4x{f}-top1",
            "moe",
            f"4 large experts of {f}, top-1",
            num_experts=4,
            top_k=1,
            expert_ffn=f,
        ),
        Variant(
            f"moe-8x{f // 2}-top2",
            "moe",
            f"8 experts of {f // 2}, top-2",
            num_experts=8,
            top_k=2,
            expert_ffn=f // 2,
        ),
        Variant(
            f"moe-14x{f // 4}-top2-shared",
            "moe",
            f"14 small experts of {f // 4}, top-2, plus a shared expert of {f // 2}",
            num_experts=14,
            top_k=2,
            expert_ffn=f // 4,
            shared_ffn=f // 2,
        ),
    )


def _test_variants(f: int) -> tuple[Variant, ...]:
    full = _variants(f)
    return (full[0], full[1], full[3])


# One line per concern: model shape; training budget; evaluation; inference benchmark.
# fmt: off
SIZES: dict[str, StudySize] = {
    "test": StudySize(
        name="test", vocab_size=384, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1,
        seq_len=32, batch_size=4, steps=6, learning_rate=3e-3, num_checkpoints=2,
        eval_max_tokens=1024, corpus_max_chars=60_000,
        infer_batch_sizes=(1, 2), infer_input_tokens=8, infer_output_tokens=4, infer_repeats=1,
        infer_warmup=0, idle_s=0.0, aux_loss_coef=0.01, variants=_test_variants(64),
    ),
    "tiny": StudySize(
        name="tiny", vocab_size=2048, hidden_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
        seq_len=64, batch_size=8, steps=300, learning_rate=3e-3, num_checkpoints=12,
        eval_max_tokens=None, corpus_max_chars=None,
        infer_batch_sizes=(1, 8, 32), infer_input_tokens=64, infer_output_tokens=64,
        infer_repeats=10, infer_warmup=1, idle_s=0.5, aux_loss_coef=0.01, variants=_variants(512),
    ),
    "small": StudySize(
        name="small", vocab_size=8192, hidden_size=512, num_layers=8, num_heads=8, num_kv_heads=4,
        seq_len=256, batch_size=16, steps=2000, learning_rate=1e-3, num_checkpoints=10,
        eval_max_tokens=65_536, corpus_max_chars=None,
        infer_batch_sizes=(1, 8, 32), infer_input_tokens=128, infer_output_tokens=64,
        infer_repeats=3, infer_warmup=1, idle_s=2.0, aux_loss_coef=0.01, variants=_variants(1536),
    ),
}
# fmt: on
"""Study sizes by name: ``test`` (CI, seconds), ``tiny`` (default, minutes on a laptop CPU),
``small`` (a GPU; give it a larger ``--corpus``)."""


def get_size(name: str) -> StudySize:
    """Return the study size ``name``.

    Raises:
        UserError: For an unknown size.
    """
    if name not in SIZES:
        raise UserError(f"unknown study size {name!r}", f"use one of: {', '.join(SIZES)}")
    return SIZES[name]
