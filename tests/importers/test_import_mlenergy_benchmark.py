"""ML.ENERGY benchmark run folders become measured:zeus-nvml run records with the right figures."""

from __future__ import annotations

import json
import shutil

import pytest
from importer_fixtures import HARNESS_CONFIGS, MLEB, RUN_DENSE, RUN_MOE

from mlenergy.errors import UserError
from mlenergy.importers.mlenergy_benchmark import HarnessOptions, parallelism, read_run


def _read(path, configs_dir, **kw):
    return read_run(path, HarnessOptions(configs_dir=configs_dir, **kw))


def test_dense_run_figures_follow_the_file(configs_dir):
    raw = json.loads((RUN_DENSE / "results.json").read_text())
    batch = _read(RUN_DENSE, configs_dir)
    (run,) = batch.records
    phase = run.phase("request")
    energy = raw["steady_state_energy"]
    per_token = raw["steady_state_energy_per_token"]
    duration = raw["steady_state_duration"]
    assert phase.energy_j == energy
    assert phase.duration_s == duration
    assert phase.energy_per_token_j == per_token
    # steady-state tokens = energy / energy per token; throughput over the steady window
    assert phase.tokens == round(energy / per_token)
    assert phase.throughput_tokens_per_s == pytest.approx(energy / per_token / duration, rel=1e-5)
    assert phase.throughput_tokens_per_s != pytest.approx(raw["output_throughput"], rel=0.05)
    assert phase.avg_power_w == pytest.approx(energy / duration)
    assert phase.energy_per_token_j == pytest.approx(phase.energy_j / phase.tokens, rel=1e-4)
    # milliseconds -> seconds
    assert phase.itl_p50_s == pytest.approx(raw["median_itl_ms"] / 1000)
    assert phase.itl_p90_s == pytest.approx(raw["p90_itl_ms"] / 1000)
    assert phase.itl_p99_s == pytest.approx(raw["p99_itl_ms"] / 1000)
    assert phase.ttft_s == pytest.approx(raw["median_ttft_ms"] / 1000)
    assert phase.energy_by_device_j == {"gpu:0": energy}
    assert run.energy_source == "measured:zeus-nvml"
    assert run.hardware.accelerator_model == "H100-SXM5-80GB"  # "H100" through the catalog
    assert run.hardware.accelerator_count == 1
    assert run.tags["gpu_model_as_recorded"] == "H100"
    assert run.software.engine == "vllm 0.11.1"  # from driver.log's server image
    assert run.tags["origin"] == "mlenergy.benchmark"
    work = run.workload
    assert work.task == "lm-arena-chat"  # from the folder layout
    assert work.max_num_seqs == 64
    assert work.output_tokens == round(raw["total_output_tokens"] / raw["completed"])
    assert work.input_tokens == round(raw["total_input_tokens"] / raw["completed"])
    prom = json.loads((RUN_DENSE / "prometheus.json").read_text())
    assert work.avg_batch_size == prom["steady_state_stats"]["vllm:num_requests_running"]
    assert run.model.model_id == "Qwen/Qwen3-8B"
    assert run.model.dtype == "bfloat16"
    assert 8.0e9 < run.model.total_params < 8.4e9
    assert any("parallelism assumed" in n for n in batch.notes)
    assert work.tensor_parallel == 1


def test_moe_run_reads_parallelism_and_dtype_from_the_harness_configs(configs_dir):
    batch = _read(RUN_MOE, configs_dir, harness_configs=HARNESS_CONFIGS, engine="vllm 0.11.1")
    (run,) = batch.records
    assert (run.workload.tensor_parallel, run.workload.expert_parallel) == (1, 2)
    assert run.workload.data_parallel == 1
    assert run.model.is_moe and run.model.num_experts == 128
    assert run.model.dtype == "bfloat16"
    assert run.tags["dtype_from"] == "model_info.json weight_precision"
    assert not any("parallelism assumed" in n for n in batch.notes)
    raw = json.loads((RUN_MOE / "results.json").read_text())
    gpu_energy = raw["steady_state_measurement"]["gpu_energy"]
    phase = run.phase("request")
    assert phase.energy_by_device_j == {f"gpu:{k}": v for k, v in gpu_energy.items()}
    assert phase.energy_j == pytest.approx(sum(gpu_energy.values()))
    assert run.hardware.accelerator_model == "B200" and run.hardware.accelerator_count == 2
    # power timeline: the two GPUs' samples summed, seconds since the benchmark start
    timeline = run.power_timeline
    power = raw["timeline"]["power"]["device_instant"]
    assert timeline.t_s[0] == 0.0
    assert timeline.power_w[0] == pytest.approx(power["0"][0][1] + power["1"][0][1])
    assert timeline.energy_source == "measured:zeus-nvml"


def test_parallelism_rule_matches_mlenergy_data():
    assert parallelism({}, 4, MLEB) == (4, 1, 1)
    assert parallelism({"enable-expert-parallel": True}, 8, MLEB) == (1, 8, 1)
    assert parallelism({"data-parallel-size": 0}, 4, MLEB) == (4, 1, 4)
    assert parallelism({"tensor-parallel-size": 2, "data-parallel-size": 2}, 4, MLEB) == (2, 1, 2)


def test_ids_derive_from_content_so_a_copy_gets_the_same_record(configs_dir, tmp_path):
    copy = tmp_path / "lm-arena-chat" / "results" / "Qwen" / "Qwen3-8B" / "H100" / RUN_DENSE.name
    shutil.copytree(RUN_DENSE, copy)
    a = _read(RUN_DENSE, configs_dir).records[0]
    b = _read(copy, configs_dir).records[0]
    assert a.run_id == b.run_id
    assert a.content_hash() == b.content_hash()


def test_task_needs_the_layout_or_an_option(configs_dir, tmp_path):
    flat = tmp_path / "somewhere"
    shutil.copytree(RUN_DENSE, flat)
    with pytest.raises(UserError, match="task"):
        _read(flat, configs_dir)
    assert _read(flat, configs_dir, task="chat").records[0].workload.task == "chat"


def test_folder_name_disagreeing_with_the_file_is_refused(configs_dir, tmp_path):
    wrong = (
        tmp_path / "chat" / "results" / "Qwen" / "Qwen3-8B" / "H100" / "num_gpus+2+max_num_seqs+64"
    )
    shutil.copytree(RUN_DENSE, wrong)
    with pytest.raises(UserError, match="num_gpus"):
        _read(wrong, configs_dir)


@pytest.mark.parametrize(
    "folder,key",
    [
        ("missing_energy", "steady_state_energy: missing"),
        ("zero_energy", "steady_state_energy: must be a positive number"),
        ("unknown_gpu", "gpu_model: unknown GPU 'TPU-v5e'"),
        ("not_a_run", "not a run folder"),
    ],
)
def test_broken_runs_name_the_file_and_key(folder, key, configs_dir):
    with pytest.raises(UserError) as info:
        _read(MLEB / "broken" / folder, configs_dir, task="chat")
    message = str(info.value)
    assert key in message
    assert folder in message
    if folder == "unknown_gpu":
        assert "H100-SXM5-80GB" in message  # says which names resolve


def test_unknown_model_says_where_to_put_its_config(tmp_path):
    with pytest.raises(UserError, match=r"no config\.json for model 'Qwen/Qwen3-8B'"):
        _read(RUN_DENSE, tmp_path)


def test_run_time_comes_from_the_timeline_else_the_date(configs_dir, tmp_path):
    raw = json.loads((RUN_DENSE / "results.json").read_text())
    run = _read(RUN_DENSE, configs_dir).records[0]
    assert run.started_at.timestamp() == raw["timeline"]["benchmark_start_time"]
    assert run.created_at.timestamp() == raw["timeline"]["benchmark_end_time"]
    del raw["timeline"]
    folder = tmp_path / "chat" / "results" / "Qwen" / "Qwen3-8B" / "H100" / RUN_DENSE.name
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(raw))
    run = _read(folder, configs_dir).records[0]
    assert run.created_at.strftime("%Y%m%d-%H%M%S") == raw["date"]
    assert run.power_timeline is None


def test_a_run_the_harness_counts_as_failed_is_refused(configs_dir, tmp_path):
    raw = json.loads((RUN_DENSE / "results.json").read_text())
    raw["completed"] = raw["num_prompts"] - 3
    folder = tmp_path / "chat" / "results" / "Qwen" / "Qwen3-8B" / "H100" / RUN_DENSE.name
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(raw))
    with pytest.raises(UserError, match="completed: 1021 of 1024 requests completed"):
        _read(folder, configs_dir)
