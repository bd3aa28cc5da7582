"""Describe a model for the records: config fingerprint, MoE shape, total and active parameters.

Parameter counts come from :func:`mlenergy.models.parameters.count_parameters` (pure Python,
from the config) when it understands the architecture; otherwise the real tensors are counted
(of the given model, or of one built on PyTorch's ``meta`` device, which allocates nothing).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from mlenergy.models.architecture import ArchitectureSpec
from mlenergy.models.parameters import count_parameters
from mlenergy.records import ModelInfo, canonical_json, sha256_hex
from mlenergy.records.provenance import Weights

if TYPE_CHECKING:
    import torch
    from transformers import PretrainedConfig

# Keys that describe how a config was saved or run, not the architecture: left out of the
# fingerprint so that the same model hashes alike across transformers versions and dtypes.
_VOLATILE_KEYS = frozenset(
    {
        "transformers_version",
        "torch_dtype",
        "dtype",
        "architectures",
        "use_cache",
        "output_attentions",
        "output_hidden_states",
        "return_dict",
        "output_router_logits",
        "attn_implementation",
        "model_id",
        "quantization_config",
    }
)

_NUM_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_TOP_K_KEYS = ("num_experts_per_tok", "moe_top_k", "top_k", "num_experts_per_token")


def config_dict(config: PretrainedConfig | dict[str, Any]) -> dict[str, Any]:
    """Return a config as a plain, JSON-compatible dict (no private or volatile keys).

    Args:
        config: A ``transformers`` config or a ``config.json`` dict.
    """
    raw = config if isinstance(config, dict) else config.to_dict()
    clean = {k: v for k, v in raw.items() if not k.startswith("_") and k not in _VOLATILE_KEYS}
    # Round-trip through JSON so that tuples, enums and dtypes become plain values.
    return json.loads(json.dumps(clean, default=str, sort_keys=True))


def config_fingerprint(config: PretrainedConfig | dict[str, Any]) -> str:
    """First 16 hex digits of the SHA-256 of the canonical config dict.

    Args:
        config: A ``transformers`` config or a ``config.json`` dict.
    """
    return sha256_hex(canonical_json(config_dict(config)))[:16]


def _first_int(d: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = d.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def moe_shape(config: PretrainedConfig | dict[str, Any]) -> tuple[int | None, int | None, int]:
    """Return ``(num_experts, experts_per_token, num_shared_experts)`` of a config.

    Dense models give ``(None, None, 0)``.
    """
    d = config if isinstance(config, dict) else config.to_dict()
    text = d.get("text_config")
    if isinstance(text, dict) and _first_int(d, _NUM_EXPERT_KEYS) is None:
        d = {**text, **d}
    experts = _first_int(d, _NUM_EXPERT_KEYS)
    if experts is None or experts < 2:
        return None, None, 0
    top_k = _first_int(d, _TOP_K_KEYS) or 1
    shared = d.get("n_shared_experts")
    if not isinstance(shared, int):
        shared = 1 if d.get("shared_expert_intermediate_size") else 0
    return experts, min(top_k, experts), shared


def count_model_parameters(
    model: torch.nn.Module, num_experts: int | None, experts_per_token: int | None
) -> tuple[int, int]:
    """Count total and active parameters of a built model from its tensors.

    Routed-expert tensors are those whose name contains ``experts`` but not ``shared``; a token
    uses ``experts_per_token / num_experts`` of them.

    Args:
        model: The model (may live on the ``meta`` device).
        num_experts: Routed experts per MoE layer, or ``None`` for dense.
        experts_per_token: Routed experts per token, or ``None`` for dense.

    Returns:
        ``(total, active)`` parameter counts.
    """
    total = 0
    routed = 0
    for name, param in model.named_parameters():
        total += param.numel()
        if "experts" in name and "shared" not in name:
            routed += param.numel()
    if not num_experts or not experts_per_token:
        return total, total
    active = total - routed + round(routed * experts_per_token / num_experts)
    return total, active


def _counts_from_architecture(
    config: PretrainedConfig | dict[str, Any],
) -> tuple[int, int] | None:
    raw = config if isinstance(config, dict) else config.to_dict()
    try:
        counts = count_parameters(ArchitectureSpec.from_config(raw))
    except Exception:  # unsupported architecture: fall back to the tensors
        return None
    return int(counts.total), int(counts.active)


def _counts_from_tensors(
    config: PretrainedConfig | dict[str, Any],
    model: torch.nn.Module | None,
    num_experts: int | None,
    experts_per_token: int | None,
) -> tuple[int, int]:
    if model is None and isinstance(config, dict):
        raise ValueError(
            f"cannot count the parameters of config model_type={config.get('model_type')!r}"
        )
    if model is None:
        import torch
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    return count_model_parameters(model, num_experts, experts_per_token)


def _shape_from_architecture(
    config: PretrainedConfig | dict[str, Any],
) -> tuple[int | None, int | None, int] | None:
    """:func:`moe_shape` as the architecture parser reads it, or ``None`` if it cannot.

    The parser knows shared experts that a config leaves implicit (Llama 4's).
    """
    raw = config if isinstance(config, dict) else config.to_dict()
    try:
        spec = ArchitectureSpec.from_config(raw)
    except Exception:  # unsupported architecture: the generic reading applies
        return None
    if not spec.is_moe:
        return None, None, 0
    return spec.num_experts, spec.experts_per_token, spec.num_shared_experts or 0


def parameter_counts(
    config: PretrainedConfig | dict[str, Any], model: torch.nn.Module | None = None
) -> tuple[int, int]:
    """Return ``(total, active)`` parameters of a config (estimator first, then the tensors).

    Args:
        config: The model's ``transformers`` config or its ``config.json`` dict.
        model: The built model, if any (avoids building one on the meta device).

    Raises:
        ValueError: ``config`` is a dict the architecture parser does not understand and no
            model is given (a dict cannot be built into tensors here).
    """
    counts = _counts_from_architecture(config)
    if counts is not None and counts[0] > 0 and 0 < counts[1] <= counts[0]:
        return counts
    experts, top_k, _ = moe_shape(config)
    return _counts_from_tensors(config, model, experts, top_k)


def model_info_from_config(
    config: PretrainedConfig | dict[str, Any],
    model_id: str,
    dtype: str,
    weights: Weights,
    model: torch.nn.Module | None = None,
) -> ModelInfo:
    """Build the :class:`~mlenergy.records.ModelInfo` of a model: the one place that does.

    Bench runs, estimates and imported reference measurements all describe their model
    with it, so the same config has the same fingerprint, MoE shape and counts everywhere.

    Args:
        config: The model's ``transformers`` config or its ``config.json`` dict.
        model_id: Hub id, ``preset:<name>``, ``config:<name>@<fingerprint>`` or the path
            of a local checkpoint folder (see :class:`~mlenergy.records.ModelInfo`).
        dtype: Weight dtype as run (``float32``, ``bfloat16``...).
        weights: ``pretrained``, ``random`` or ``trained``.
        model: The built model, if any: used to count parameters when the estimator's
            architecture parser does not know the config.

    Returns:
        The model description with fingerprint, MoE shape and parameter counts.

    Raises:
        ValueError: See :func:`parameter_counts`.
    """
    experts, top_k, shared = _shape_from_architecture(config) or moe_shape(config)
    total, active = parameter_counts(config, model)
    model_type = config.get("model_type") if isinstance(config, dict) else config.model_type
    return ModelInfo(
        model_id=model_id,
        config_fingerprint=config_fingerprint(config),
        architecture=str(model_type or "unknown"),
        is_moe=experts is not None,
        num_experts=experts,
        experts_per_token=top_k,
        num_shared_experts=shared if experts is not None else None,
        total_params=total,
        active_params=active,
        dtype=dtype,
        weights=weights,
    )
