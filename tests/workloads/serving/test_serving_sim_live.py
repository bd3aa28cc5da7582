"""``mlenergy bench --endpoint`` against the emulated server over HTTP, in real time.

The emulated server (a cap of 4 requests) runs in this process and drives the power of emulated
GPU 0, the only GPU on which NVML lists this process; GPUs 1-3 idle at 60 W for other work. The
benchmark must find the server's GPU by itself, say that its level 8 is above the server's cap,
report the server's batch, and split the energy the way the emulated GPU spent it.
"""

from __future__ import annotations

import contextlib
import io
import os

import numpy as np
import pytest

from mlenergy.cli import main
from mlenergy.measure.emulated import LivePower, install_emulated_gpus
from mlenergy.store import RunStore
from mlenergy.store.serving_checks import serving_problems
from mlenergy.testing.serving_sim import SimPhysics
from mlenergy.testing.serving_sim_http import serve_sim

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

PROMPT = 1000
PHYSICS = SimPhysics(max_num_seqs=4)


def _bench(endpoint: str, data, *extra: str) -> tuple[int, str]:
    argv = [
        "bench", "--endpoint", endpoint, "--model", "sim-model",
        "--model-config", "preset:tiny-dense", "--concurrency", "8", "--num-requests", "32",
        "--input-tokens", str(PROMPT), "--max-output-tokens", "48", "--ignore-eos",
        "--idle-s", "0.3", "--data-dir", str(data), *extra,
    ]  # fmt: skip
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, err.getvalue()


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory):
    """One level measured against the emulated server: (record, output, truths, power)."""
    power = LivePower(PHYSICS.idle_w)
    data = tmp_path_factory.mktemp("sim") / "data"
    held = [[os.getpid()], [], [], []]
    gpus = install_emulated_gpus(
        [power, 60.0, 60.0, 60.0], count=4, counter_period_s=0.02, processes=held
    )
    with serve_sim(PHYSICS, power) as sim, gpus:
        rc, out = _bench(sim.endpoint, data)
        # by arrival at the server (the short test requests first): the client's send order,
        # but for the first 8, sent together, which may arrive in any order
        truth = [e for rid, e in sorted(sim.truth_j().items()) if sim.prompt_of(rid) == PROMPT]
    assert rc == 0, out
    (record,) = RunStore(data).runs()
    return record, out, np.array(truth), power


def test_only_the_servers_gpu_is_measured(sim_run):
    record, _, _, power = sim_run
    assert record.status == "ok", record.error
    assert record.scope.gpu_indices == (0,)
    assert "held by the listening server process tree" in record.scope.description
    phase = record.phase("request")
    assert set(phase.energy_by_device_j) == {"gpu:0"}
    t0 = record.started_at.timestamp()
    start, end = t0 + record.serving.window_start_s, t0 + record.serving.window_end_s
    # the window's energy is the emulated server's GPU, edges quantised to its 20 ms counter
    assert phase.energy_j == pytest.approx(power.energy_j(start, end), abs=2 * 0.02 * 700)
    assert record.scope.counter_period_s == 0.02
    assert record.serving.window_counter_periods == pytest.approx(phase.duration_s / 0.02)


def test_the_batch_is_the_servers_and_a_level_above_its_cap_is_said(sim_run):
    record, out, _, _ = sim_run
    s = record.serving
    assert s.engine == "vllm 0.0.0+mlenergy-sim" and s.engine_metrics is not None
    assert (s.server_cap, s.server_cap_source, s.level_above_server_cap) == (4, "/metrics", True)
    assert s.batch_source == "server"
    assert record.workload.avg_batch_size == pytest.approx(s.engine_metrics.running_mean)
    assert 3.0 <= record.workload.avg_batch_size <= 4.0 < 7.0 <= s.achieved_concurrency <= 8.0
    assert "above the server's cap" in out and "4 running at most" in out
    assert s.request_queue_s.p50 > 0.1  # half the client's requests wait in the server's queue
    assert serving_problems(record, "run") == []


def test_each_request_gets_the_energy_its_work_cost(sim_run):
    record, _, truth, _ = sim_run
    s = record.serving
    energies = np.array(s.request_energies_j)
    assert len(truth) == len(energies) == 32
    error = np.abs(energies / truth - 1)
    # real time on a shared machine: the client and the server share this process, so the
    # client reads tokens late by a varying few ms (in virtual time, every request is within 3%:
    # test_serving_split_sim.py); taken as running from sending, they would be 34% off at p90
    assert np.percentile(error, 90) < 0.10 and error.max() < 0.25
    assert s.split_costs["prompt_token_j"] == pytest.approx(PHYSICS.prefill_j, rel=0.25)
    # the split's power samples agree with the counter over the window
    assert s.split_window_energy_j == pytest.approx(record.phase("request").energy_j, rel=0.02)
    assert s.split_withheld is None


def test_a_window_the_counter_cannot_resolve_is_a_failed_point(tmp_path):
    power = LivePower(PHYSICS.idle_w)
    with (
        serve_sim(PHYSICS, power) as sim,
        install_emulated_gpus([power], count=1, counter_period_s=2.0),
    ):
        rc, out = _bench(sim.endpoint, tmp_path / "data")
    assert rc == 2
    assert "periods of the energy counter (2e+03 ms each); at least 10 are needed" in out
    assert "--num-requests" in out
    assert not RunStore(tmp_path / "data").runs()


def test_several_gpus_and_no_process_list_stop_with_one_line(tmp_path):
    power = LivePower(PHYSICS.idle_w)
    with serve_sim(PHYSICS, power) as sim, install_emulated_gpus([power, 60.0], count=2):
        rc, out = _bench(sim.endpoint, tmp_path / "data")
    assert rc == 2
    (line,) = [x for x in out.splitlines() if x.startswith("error:")]
    assert "cannot be read to find the listening server" in line and "--gpu-indices" in line
    assert not RunStore(tmp_path / "data").runs()
