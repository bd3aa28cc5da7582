"""A log written by Zeus's real ZeusMonitor (emulated GPUs injected) imports with its figures."""

from __future__ import annotations

import csv
import time

import pytest

from mlenergy.importers.zeus_log import ZeusLogOptions, read_log
from mlenergy.measure.emulated import install_emulated_gpus


def test_real_zeus_monitor_log_round_trips(tmp_path, configs_dir):
    from zeus.monitor import ZeusMonitor

    log = tmp_path / "zeus" / "log.csv"
    with install_emulated_gpus(power_w=[300.0, 200.0], count=2):
        monitor = ZeusMonitor(log_file=str(log), approx_instant_energy=True)
        for _ in range(2):
            monitor.begin_window("decode", sync_execution=False)
            time.sleep(0.15)
            monitor.end_window("decode", sync_execution=False)
        monitor.log_file.close()
    rows = list(csv.DictReader(log.read_text().splitlines()))
    assert list(rows[0]) == [
        "start_time",
        "window_name",
        "elapsed_time",
        "gpu0_energy",
        "gpu1_energy",
    ]
    opts = ZeusLogOptions(
        model="Qwen/Qwen3-8B",
        gpu="H100",
        tokens={"decode": 100},
        energy_source="emulated:zeus-gpu",
        configs_dir=configs_dir,
    )
    (run,) = read_log(log, opts).records
    phase = run.phase("decode")  # a window named decode is the decode phase
    assert run.repeats == 2 and run.energy_source == "emulated:zeus-gpu"
    durations = [float(r["elapsed_time"]) for r in rows]
    assert phase.duration_s == pytest.approx(sum(durations) / 2)
    # emulated power is exact: 500 W over each window
    assert phase.energy_j == pytest.approx(500.0 * phase.duration_s, rel=0.05)
    assert phase.energy_by_device_j["gpu:0"] == pytest.approx(300.0 * phase.duration_s, rel=0.05)
    assert phase.energy_per_token_j == pytest.approx(phase.energy_j / 100)
