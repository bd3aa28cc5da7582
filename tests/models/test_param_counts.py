"""Parameter counts from every reference config agree with the published figures.

Published figures and where they come from. ``rel_tol`` is tight (0.4%) where the figure is
quoted to three or more significant digits (model-card tables, Hugging Face safetensors
counts), and equals the rounding half-step where only a rounded label exists ("30B-A3B" means
anything that rounds to 30 and 3: +-0.5B, i.e. 1.7% and 17%). Known convention differences
(vision towers, embedding tables) are corrected for explicitly and explained per row.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlenergy.models.architecture import ArchitectureSpec
from mlenergy.models.parameters import count_parameters
from mlenergy.reference import reference_dir

TIGHT = 0.004

# file stem: (published total B, published active B or None, rel_tol total, rel_tol active, source)
PUBLISHED: dict[str, tuple[float, float | None, float, float, str]] = {
    "Qwen__Qwen3-8B": (8.2, None, 0.006, 0, "Qwen3-8B model card: 8.2B parameters"),
    "Qwen__Qwen3-14B": (14.8, None, 0.004, 0, "Qwen3-14B model card: 14.8B"),
    "Qwen__Qwen3-32B": (32.8, None, 0.004, 0, "Qwen3-32B model card: 32.8B"),
    "Qwen__Qwen3-30B-A3B-Instruct-2507": (
        30.5,
        3.3,
        TIGHT,
        0.05 / 3.3 + TIGHT,
        "card: 30.5B, 3.3B",
    ),
    "Qwen__Qwen3-Coder-30B-A3B-Instruct": (
        30.5,
        3.3,
        TIGHT,
        0.05 / 3.3 + TIGHT,
        "card: 30.5B, 3.3B",
    ),
    "Qwen__Qwen3-235B-A22B-Instruct-2507": (235, 22, 0.004, 0.023, "model card: 235B, 22B"),
    "Qwen__Qwen3-Coder-480B-A35B-Instruct": (480, 35, 0.004, 0.015, "model card: 480B, 35B"),
    # Multimodal: configs describe the text model only (vision towers not counted); where the
    # text model equals a Qwen3 LLM we use that card's figure, else the rounded v3 label.
    "Qwen__Qwen3-VL-8B-Instruct": (8.2, None, 0.006, 0, "text model = Qwen3-8B (card 8.2B)"),
    "Qwen__Qwen3-VL-32B-Instruct": (32.8, None, TIGHT, 0, "text model = Qwen3-32B (32.8B)"),
    "Qwen__Qwen3-VL-30B-A3B-Instruct": (30, 3, 0.5 / 30 + TIGHT, 0.5 / 3, "v3 label 30B-A3B"),
    "Qwen__Qwen3-VL-235B-A22B-Instruct": (235, 22, 0.5 / 235, 0.5 / 22, "v3 label 235B-A22B"),
    "Qwen__Qwen3-Omni-30B-A3B-Instruct": (30, 3, 0.5 / 30 + TIGHT, 0.5 / 3, "v3 label 30B-A3B"),
    "bigcode__starcoder2-3b": (3.03, None, TIGHT, 0, "StarCoder2 paper/HF: 3.03B"),
    "bigcode__starcoder2-7b": (7.17, None, TIGHT, 0, "HF safetensors: 7.17B"),
    "bigcode__starcoder2-15b": (15.96, None, TIGHT, 0, "HF safetensors: 15.96B"),
    "codellama__CodeLlama-7b-hf": (6.74, None, TIGHT, 0, "HF safetensors: 6.74B"),
    "codellama__CodeLlama-13b-hf": (13.0, None, TIGHT, 0, "HF safetensors: 13.0B"),
    "codellama__CodeLlama-34b-hf": (33.7, None, TIGHT, 0, "HF safetensors: 33.7B"),
    "codellama__CodeLlama-70b-hf": (69.0, None, TIGHT, 0, "HF safetensors: 69.0B"),
    "deepseek-ai__DeepSeek-V3.1": (
        671,
        37,
        TIGHT,
        0.5 / 37 + TIGHT,
        "card: 671B main + 14B MTP; 37B",
    ),
    "deepseek-ai__DeepSeek-R1-0528": (671, 37, TIGHT, 0.5 / 37 + TIGHT, "card: 671B, 37B act."),
    "google__codegemma-1.1-2b": (2.51, None, TIGHT, 0, "HF safetensors: 2.51B (Gemma-2B arch)"),
    "google__codegemma-7b": (8.54, None, TIGHT, 0, "HF safetensors: 8.54B"),
    "google__gemma-2-2b-it": (2.61, None, TIGHT, 0, "HF safetensors: 2.61B"),
    "google__gemma-2-9b-it": (9.24, None, TIGHT, 0, "HF safetensors: 9.24B"),
    "google__gemma-2-27b-it": (27.2, None, TIGHT, 0, "HF safetensors: 27.2B"),
    # gemma-3 published totals include the ~0.42B SigLIP vision tower (not in the text config).
    "google__gemma-3-12b-it": (12.2 - 0.42, None, 0.01, 0, "HF: 12.2B incl. 0.42B vision"),
    "google__gemma-3-27b-it": (27.4 - 0.42, None, 0.01, 0, "HF: 27.4B incl. 0.42B vision"),
    "meta-llama__Llama-3.1-8B-Instruct": (8.03, None, 0.002, 0, "HF safetensors: 8.03B"),
    "meta-llama__Meta-Llama-3.1-8B-Instruct": (8.03, None, 0.002, 0, "HF safetensors: 8.03B"),
    "meta-llama__Llama-3.1-70B-Instruct": (70.6, None, TIGHT, 0, "HF safetensors: 70.6B"),
    "meta-llama__Meta-Llama-3.1-70B-Instruct": (70.6, None, TIGHT, 0, "HF safetensors: 70.6B"),
    "meta-llama__Llama-3.3-70B-Instruct": (70.6, None, TIGHT, 0, "HF safetensors: 70.6B"),
    "meta-llama__Llama-3.1-405B-Instruct": (406, None, TIGHT, 0, "HF safetensors: 406B"),
    "meta-llama__Meta-Llama-3.1-405B-Instruct": (406, None, TIGHT, 0, "HF safetensors: 406B"),
    # Llama 4 published totals include the vision encoder (~0.8B for Scout); actives are rounded.
    "meta-llama__Llama-4-Scout-17B-16E-Instruct": (109, 17, 0.015, 0.5 / 17, "card: 109B, 17B"),
    "meta-llama__Llama-4-Maverick-17B-128E-Instruct": (400, 17, TIGHT, 0.5 / 17, "card: 400B/17B"),
    "microsoft__Phi-3-mini-4k-instruct": (3.82, None, TIGHT, 0, "HF safetensors: 3.82B"),
    "microsoft__Phi-3-small-8k-instruct": (7.39, None, TIGHT, 0, "HF safetensors: 7.39B"),
    "microsoft__Phi-3-medium-4k-instruct": (14.0, None, TIGHT, 0, "HF safetensors: 14.0B"),
    "mistralai__Mistral-7B-Instruct-v0.3": (7.25, None, TIGHT, 0, "HF safetensors: 7.25B"),
    "mistralai__Mistral-Nemo-Instruct-2407": (12.2, None, TIGHT, 0, "HF safetensors: 12.2B"),
    "mistralai__Mistral-Large-Instruct-2407": (123, None, TIGHT, 0, "model card: 123B"),
    "mistralai__Mixtral-8x7B-Instruct-v0.1": (46.7, 12.9, TIGHT, TIGHT, "Mistral: 46.7B, 12.9B"),
    "mistralai__Mixtral-8x22B-Instruct-v0.1": (141, 39, TIGHT, 0.5 / 39, "Mistral: 141B, 39B"),
    "nvidia__NVIDIA-Nemotron-Nano-9B-v2": (8.89, None, TIGHT, 0, "HF safetensors: 8.89B"),
    "nvidia__NVIDIA-Nemotron-Nano-12B-v2": (12.31, None, TIGHT, 0, "HF safetensors: 12.31B"),
    # gpt-oss model card: 116.83B / 5.13B and 20.91B / 3.61B; the published *active* counts
    # exclude the 0.58B embedding table, so we compare active minus embedding.
    "openai__gpt-oss-120b": (116.83, 5.13, TIGHT, TIGHT, "gpt-oss model card table"),
    "openai__gpt-oss-20b": (20.91, 3.61, TIGHT, TIGHT, "gpt-oss model card table"),
}

_REF = reference_dir()


def _configs() -> list[Path]:
    return sorted((_REF / "model-configs").glob("*.json")) if _REF else []


def test_every_reference_config_has_a_published_figure() -> None:
    assert {p.stem for p in _configs()} <= set(PUBLISHED)


@pytest.mark.parametrize("path", _configs(), ids=lambda p: p.stem)
def test_count_matches_published(path: Path) -> None:
    total_b, active_b, tol_total, tol_active, source = PUBLISHED[path.stem]
    spec = ArchitectureSpec.from_config(json.loads(path.read_text()))
    counts = count_parameters(spec)
    assert counts.total / 1e9 == pytest.approx(total_b, rel=tol_total), source
    if active_b is None:
        assert counts.active == counts.total
        assert not spec.is_moe
    else:
        active = counts.active
        if spec.model_type == "gpt_oss":
            active -= counts.embedding
        assert spec.is_moe
        assert active / 1e9 == pytest.approx(active_b, rel=tol_active), source
        assert spec.num_experts and spec.experts_per_token


def test_moe_fields_for_model_info() -> None:
    cfg = json.loads((_REF / "model-configs" / "deepseek-ai__DeepSeek-V3.1.json").read_text())
    spec = ArchitectureSpec.from_config(cfg)
    assert (spec.model_type, spec.num_experts, spec.experts_per_token) == ("deepseek_v3", 256, 8)
    assert spec.num_shared_experts == 1
    assert spec.num_moe_layers == 58
    assert count_parameters(spec).mtp / 1e9 == pytest.approx(11.7, rel=0.2)  # 14B incl. embed
