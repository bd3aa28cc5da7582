"""Zeus ZeusMonitor logs become one run record per window name, repeats with their spread."""

from __future__ import annotations

import csv

import pytest
from importer_fixtures import FIXTURES, ZEUS_LOG

from mlenergy.errors import UserError
from mlenergy.importers.zeus_log import ZeusLogOptions, read_log


def _opts(configs_dir, **kw):
    base = dict(model="Qwen/Qwen3-8B", gpu="H100", tokens={"prefill": 2048, "decode": 4096})
    return ZeusLogOptions(configs_dir=configs_dir, **{**base, **kw})


def test_windows_become_runs_with_repeats(configs_dir):
    rows = list(csv.DictReader(ZEUS_LOG.read_text().splitlines()))
    decode_rows = [r for r in rows if r["window_name"] == "decode"]
    batch = read_log(ZEUS_LOG, _opts(configs_dir, batch_size=8))
    runs = {r.tags["window_name"]: r for r in batch.records}
    assert set(runs) == {"prefill", "decode"}
    decode = runs["decode"]
    phase = decode.phase("decode")
    energies = [float(r["gpu0_energy"]) + float(r["gpu1_energy"]) for r in decode_rows]
    durations = [float(r["elapsed_time"]) for r in decode_rows]
    assert decode.repeats == 3
    assert phase.energy_j == pytest.approx(sum(energies) / 3)
    assert phase.duration_s == pytest.approx(sum(durations) / 3)
    assert phase.energy_j_repeats.values == tuple(energies)
    assert phase.energy_j_repeats.ci95 is not None
    assert phase.energy_per_token_j == pytest.approx(phase.energy_j / 4096)
    assert phase.energy_by_device_j["gpu:1"] == pytest.approx(
        sum(float(r["gpu1_energy"]) for r in decode_rows) / 3
    )
    assert decode.hardware.accelerator_count == 2 and decode.scope.gpu_indices == (0, 1)
    assert decode.workload.output_tokens == 4096 // 8
    prefill = runs["prefill"]
    assert prefill.phase("prefill").tokens == 2048 and prefill.workload.input_tokens == 2048 // 8
    assert decode.energy_source == "measured:zeus-nvml"


def test_inference_log_without_any_token_count_is_refused(configs_dir):
    with pytest.raises(UserError, match="--tokens: window 'prefill'"):
        read_log(ZEUS_LOG, _opts(configs_dir, tokens={}))


def test_only_the_counted_window_is_imported_the_other_noted(configs_dir):
    # The README's `--tokens decode=N` on a log that also has a prefill window.
    batch = read_log(ZEUS_LOG, _opts(configs_dir, tokens={"decode": 4096}))
    assert [r.tags["window_name"] for r in batch.records] == ["decode"]
    assert any("'prefill' not imported" in n and "--tokens prefill=N" in n for n in batch.notes)
    batch = read_log(ZEUS_LOG, _opts(configs_dir, tokens={"prefill": 10}))
    assert [r.tags["window_name"] for r in batch.records] == ["prefill"]


def test_readme_command_imports_the_decode_window(configs_dir, tmp_path):
    from mlenergy.cli import main

    data = tmp_path / "data"
    argv = ["import", "zeus-log", str(ZEUS_LOG), "--model", "Qwen/Qwen3-8B", "--gpu", "H100"]
    argv += ["--tokens", "decode=4096", "--data-dir", str(data), "--configs-dir", str(configs_dir)]
    assert main(argv) == 0


def test_training_windows_need_no_tokens(configs_dir):
    batch = read_log(ZEUS_LOG, _opts(configs_dir, kind="training", tokens={}))
    assert {r.phases[0].phase.value for r in batch.records} == {"prefill", "decode"}
    assert all(r.phases[0].energy_per_token_j is None for r in batch.records)


@pytest.mark.parametrize(
    "name,key",
    [
        ("broken_header.csv", "header"),
        ("broken_negative_energy.csv", "line 5 gpu0_energy: must be a positive number"),
    ],
)
def test_broken_logs_name_the_file_and_key(name, key, configs_dir):
    with pytest.raises(UserError) as info:
        read_log(FIXTURES / "zeus" / name, _opts(configs_dir))
    assert f"{name}: {key}" in str(info.value)
