"""optimum-benchmark reports become measured:codecarbon records: kWh -> J, per-call figures."""

from __future__ import annotations

import json

import pytest
from importer_fixtures import FIXTURES, OPTIMUM

from mlenergy.errors import UserError
from mlenergy.importers.optimum_benchmark import KWH_TO_J, OptimumOptions, read_report


def test_report_converts_units_and_keeps_the_gpu_energy(configs_dir):
    raw = json.loads(OPTIMUM.read_text())
    (run,) = read_report(OPTIMUM, OptimumOptions(configs_dir=configs_dir)).records
    rep, scen = raw["report"], raw["config"]["scenario"]
    batch, seq = scen["input_shapes"]["batch_size"], scen["input_shapes"]["sequence_length"]
    new = scen["generate_kwargs"]["max_new_tokens"]
    prefill, decode = run.phase("prefill"), run.phase("decode")
    assert KWH_TO_J == 3.6e6
    assert prefill.energy_j == pytest.approx(rep["prefill"]["energy"]["gpu"] * 3.6e6)
    assert prefill.duration_s == pytest.approx(rep["prefill"]["latency"]["mean"])
    assert prefill.tokens == batch * seq
    assert decode.tokens == batch * (new - 1)
    assert decode.energy_j == pytest.approx(rep["decode"]["energy"]["gpu"] * 3.6e6)
    assert decode.energy_per_token_j == pytest.approx(decode.energy_j / decode.tokens)
    # the report's efficiency is tokens per kWh of the machine total
    total_j = rep["decode"]["energy"]["total"] * 3.6e6
    assert rep["decode"]["efficiency"]["value"] == pytest.approx(decode.tokens / total_j * 3.6e6)
    assert decode.energy_by_device_j["cpu"] == pytest.approx(rep["decode"]["energy"]["cpu"] * 3.6e6)
    assert decode.avg_power_w == pytest.approx(decode.energy_j / decode.duration_s)
    assert run.energy_source == "measured:codecarbon"
    assert run.hardware.accelerator_model == "A100-SXM4-80GB"
    assert run.software.torch == "2.5.1+cu124"  # the pytorch backend's version
    assert run.model.model_id == "meta-llama/Llama-3.1-8B-Instruct"
    assert run.model.dtype == "bfloat16" and run.model.weights == "pretrained"
    assert run.workload.batch_size == batch and run.workload.input_tokens == seq
    assert run.workload.output_tokens == new


def test_zero_gpu_energy_is_refused_with_the_codecarbon_reason(configs_dir):
    path = FIXTURES / "optimum_benchmark" / "broken_zero_gpu_energy.json"
    with pytest.raises(UserError) as info:
        read_report(path, OptimumOptions(configs_dir=configs_dir))
    message = str(info.value)
    assert "broken_zero_gpu_energy.json: report.prefill.energy.gpu" in message
    assert "CodeCarbon reads 0" in message


def test_missing_energy_target_names_the_key(configs_dir):
    path = FIXTURES / "optimum_benchmark" / "broken_no_decode_energy.json"
    with pytest.raises(UserError, match=r"report\.decode\.energy: missing"):
        read_report(path, OptimumOptions(configs_dir=configs_dir))


def test_edited_efficiency_is_caught(configs_dir, tmp_path):
    raw = json.loads(OPTIMUM.read_text())
    raw["report"]["decode"]["efficiency"]["value"] *= 2
    path = tmp_path / "benchmark.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(UserError, match=r"report\.decode\.efficiency\.value"):
        read_report(path, OptimumOptions(configs_dir=configs_dir))


def test_unknown_gpu_lists_the_names_that_resolve(configs_dir, tmp_path):
    raw = json.loads(OPTIMUM.read_text())
    raw["config"]["environment"]["gpu"] = ["NVIDIA A10G"]
    path = tmp_path / "benchmark.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(UserError) as info:
        read_report(path, OptimumOptions(configs_dir=configs_dir))
    assert "config.environment.gpu: unknown GPU 'NVIDIA A10G'" in str(info.value)
    assert "A100-SXM4-80GB" in str(info.value)
    run = read_report(path, OptimumOptions(configs_dir=configs_dir, gpu="L4")).records[0]
    assert run.hardware.accelerator_model == "L4"
