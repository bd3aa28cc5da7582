"""fp8 checkpoints: which layers stay BF16 and where the weight scales are applied."""

from __future__ import annotations

import json

import pytest

from mlenergy.estimate import estimate
from mlenergy.estimate.configs import resolve_model_config
from mlenergy.estimate.features import feature_row
from mlenergy.estimate.profile import build_profile, weight_precision
from mlenergy.estimate.serving import ServingSetup
from mlenergy.models.architecture import ArchitectureSpec
from mlenergy.models.parameters import count_parameters
from mlenergy.reference.gpus import resolve_gpu

SETUP = ServingSetup(batch_size=8.0, input_tokens=512.0, output_tokens=256.0)


def _fbgemm(config: dict[str, object]) -> dict[str, object]:
    layers = int(config["num_hidden_layers"])
    kept = [f"model.layers.{i}.self_attn.{p}_proj" for i in range(layers) for p in "qkvo"]
    return {
        **config,
        "quantization_config": {
            "quant_method": "fbgemm_fp8",
            "activation_scale_ub": 1200.0,
            "modules_to_not_convert": [*kept, "lm_head"],
        },
    }


def test_a_meta_fp8_config_keeps_attention_bf16_and_scales_in_the_epilogue(tiny_config_dict):
    plain = ArchitectureSpec.from_config(tiny_config_dict)
    meta = ArchitectureSpec.from_config(_fbgemm(tiny_config_dict))
    assert meta.bf16_attention and meta.epilogue_scaled
    assert not plain.bf16_attention and not plain.epilogue_scaled
    assert weight_precision(False, None, meta.quant_method) == "fp8"

    attn = count_parameters(meta).attention
    block, kept = build_profile(plain, "fp8"), build_profile(meta, "fp8")
    # Attention weights take 2 bytes instead of 1, run at the BF16 tensor rate and are not
    # among the scaled weights.
    assert kept.common_bytes - block.common_bytes == pytest.approx(attn)
    assert kept.bf16_flops_per_token == pytest.approx(2.0 * attn)
    assert block.bf16_flops_per_token == 0.0
    assert block.quant_common_elems - kept.quant_common_elems == pytest.approx(attn)
    assert kept.dense_flops_per_token == block.dense_flops_per_token
    # A BF16 run of the same checkpoint has nothing kept apart.
    assert build_profile(meta, "bfloat16").bf16_flops_per_token == 0.0


def test_epilogue_scales_are_not_dequantised_where_the_tensor_cores_take_fp8(tiny_config_dict):
    meta = build_profile(ArchitectureSpec.from_config(_fbgemm(tiny_config_dict)), "fp8")
    block = build_profile(ArchitectureSpec.from_config(tiny_config_dict), "fp8")
    h100, a100 = resolve_gpu("H100"), resolve_gpu("A100")
    assert feature_row(meta, h100, SETUP)["quant_common_bytes"] == 0.0
    # Ampere has no fp8 tensor cores: vLLM's weight-only kernels dequantise every weight.
    assert feature_row(meta, a100, SETUP)["quant_common_bytes"] == meta.quant_common_bytes > 0
    assert feature_row(block, h100, SETUP)["quant_common_bytes"] == block.quant_common_bytes > 0


@pytest.mark.parametrize(
    ("qcfg", "epilogue"),
    [
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, False),
        ({"quant_method": "fp8", "activation_scheme": "dynamic"}, True),
        ({"quant_method": "fbgemm_fp8"}, True),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"type": "float", "strategy": "channel"}}},
            },
            True,
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"g": {"weights": {"type": "float", "strategy": "block"}}},
            },
            False,
        ),
        ({"quant_method": "mxfp4"}, False),
    ],
)
def test_where_scales_are_applied_is_read_from_the_quantization_config(
    tiny_config_dict, qcfg, epilogue
):
    spec = ArchitectureSpec.from_config({**tiny_config_dict, "quantization_config": qcfg})
    assert spec.epilogue_scaled is epilogue
    assert not spec.bf16_attention


def test_fp8_ids_take_their_organisations_format(configs_dir):
    meta = resolve_model_config("meta-llama/Llama-3.1-405B-Instruct-FP8", configs_dir).spec
    qwen = resolve_model_config("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", configs_dir).spec
    base = resolve_model_config("meta-llama/Llama-3.1-405B-Instruct", configs_dir).spec
    assert meta.bf16_attention and meta.epilogue_scaled
    assert not qwen.bf16_attention and not qwen.epilogue_scaled
    assert not base.bf16_attention and not base.epilogue_scaled


def test_meta_fp8_weights_fill_more_memory_and_stream_slower(configs_dir):
    args = dict(batch_size=64, output_tokens=256, input_tokens=512, num_gpus=8)
    args.update(tensor_parallel=8, configs_dir=configs_dir)
    fp8 = estimate("meta-llama/Llama-3.1-405B-Instruct-FP8", "H100", **args)
    bf16 = estimate("meta-llama/Llama-3.1-405B-Instruct", "H200", **args)
    # 405B: ~72B attention parameters stay BF16, so the weights take ~474 GB, not ~406 GB.
    weights_gb = fp8.memory_gb_per_gpu["weights"] * 8
    assert 440 < weights_gb < 500
    assert bf16.memory_gb_per_gpu["weights"] * 8 > 780


def test_a_config_file_with_fbgemm_fp8_is_served_as_fp8(tmp_path, tiny_config_dict):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_fbgemm(tiny_config_dict)))
    est = estimate(str(path), "H100", 8, output_tokens=128, input_tokens=256)
    assert est.precision == "fp8"


@pytest.mark.parametrize(
    ("precision", "gpu", "epilogue", "expected"),
    [
        ("fp8", "H100", False, 1.0),  # block scales: rescaled in the main loop
        ("fp8", "H100", True, 0.0),  # channel scales: the epilogue applies them
        ("fp8", "A100", True, 1.0),  # no fp8 tensor cores: weight-only dequantising kernels
        ("mxfp4", "B200", False, 0.0),  # Blackwell's tensor cores apply MX block scales
        ("mxfp4", "H100", False, 1.0),  # emulated before Blackwell
        ("nvfp4", "B200", False, 0.0),
    ],
)
def test_which_weights_keep_the_alus_dequantising(precision, gpu, epilogue, expected):
    from mlenergy.estimate.features import dequantising

    assert dequantising(precision, resolve_gpu(gpu), epilogue) == expected


def test_mxfp4_experts_draw_no_dequantising_power_on_b200(configs_dir):
    from mlenergy.estimate.configs import resolve_model_config

    spec = resolve_model_config("openai/gpt-oss-120b", configs_dir).spec
    prof = build_profile(spec, None)
    assert prof.expert_precision == "mxfp4" and prof.quant_expert_bytes > 0
    assert feature_row(prof, resolve_gpu("B200"), SETUP)["quant_expert_bytes"] == 0.0
    assert feature_row(prof, resolve_gpu("H100"), SETUP)["quant_expert_bytes"] > 0


def test_an_fp8_id_of_an_unknown_organisation_is_estimated_with_a_warning(
    tmp_path, tiny_config_dict, configs_dir
):
    (tmp_path / "acme__Tiny-7B.json").write_text(json.dumps(tiny_config_dict))
    est = estimate("acme/Tiny-7B-FP8", "H100", 8, output_tokens=128, configs_dir=tmp_path)
    assert est.precision == "fp8" and "block-scaled" in est.warning
    assert "acme/Tiny-7B-FP8" in est.warning
    # Known organisations say nothing.
    qwen = estimate(
        "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
        "H100",
        8,
        output_tokens=128,
        num_gpus=4,
        tensor_parallel=4,
        configs_dir=configs_dir,
    )
    assert "fp8 format" not in qwen.warning
