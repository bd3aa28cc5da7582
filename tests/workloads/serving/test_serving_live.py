"""The serving benchmark against a real ``transformers serve``, energy from emulated GPUs.

Every figure is checked against the known power profile of the emulated GPUs, and every
serving identity is checked by the store's submission rules.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import threading
from importlib import metadata

import psutil
import pytest

from mlenergy.cli import main
from mlenergy.errors import UserError
from mlenergy.measure.emulated import PowerProfile, install_emulated_gpus, install_no_devices
from mlenergy.records import RunRecord
from mlenergy.store import RunStore
from mlenergy.store.serving_checks import serving_problems
from mlenergy.testing.served_model import transformers_serve_command
from mlenergy.workloads.serving.runner import ServingLevelFailed, run_serving_bench
from mlenergy.workloads.serving.spec import ServingSpec

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ENGINE = "transformers (test)"


def _spec(endpoint, model, **kw):
    base = dict(
        model=model,
        levels=(4,),
        num_requests=24,
        endpoint=endpoint,
        input_tokens=12,
        max_output_tokens=48,
        ignore_eos=True,
        idle_s=0.2,
        power_period_s=0.02,
        engine=ENGINE,
        request_timeout_s=120.0,
    )
    base.update(kw)
    return ServingSpec(**base)


def _window_abs(record: RunRecord) -> tuple[float, float]:
    t0 = record.started_at.timestamp()
    return t0 + record.serving.window_start_s, t0 + record.serving.window_end_s


def test_steady_state_figures_meet_the_identities_on_a_known_profile(dense_server):
    endpoint, pid, model = dense_server
    # two GPUs that the server holds (it listens on the endpoint's port), a third it does not;
    # power alternating every 0.1 s: windows and splits must follow it exactly
    steps = [(0.1 * k, 150.0 if k % 2 else 450.0) for k in range(4000)]
    profile = PowerProfile.piecewise(steps)
    held = [[pid], [pid], [os.getpid()]]
    with install_emulated_gpus(power_w=[profile, profile, 60.0], count=3, processes=held):
        (record,) = run_serving_bench(_spec(endpoint, model))
    assert record.status == "ok", record.error
    assert record.workload.method == "serving-steady-state"
    assert record.energy_source == "emulated:zeus-gpu"
    assert record.scope.gpu_indices == (0, 1)
    assert f"held by the listening server process tree (pid {pid}" in record.scope.description
    s, phase = record.serving, record.phase("request")
    assert s.ignore_eos and s.ignore_eos_via == "generation_config"
    assert s.outputs_ended_early == 0  # every request ran to max_output_tokens
    assert s.output_tokens_total == 24 * 48 and s.requests_completed == 24
    assert s.engine == ENGINE and record.software.engine == ENGINE
    # the window's energy is the profile's integral over it, on both GPUs
    start, end = _window_abs(record)
    assert phase.duration_s > 0 and end > start
    # (Zeus stamps a window a few ms from its counter reads: 600 W x 4 ms at each edge)
    assert phase.energy_j == pytest.approx(2 * profile.energy_j(start, end), abs=5.0)
    # identities (exact by construction, and the submission rules agree)
    assert phase.energy_per_token_j * phase.tokens == pytest.approx(phase.energy_j, rel=1e-9)
    assert phase.throughput_tokens_per_s * phase.duration_s == pytest.approx(phase.tokens)
    assert 0 < s.achieved_concurrency <= 4 + 1e-9
    # transformers serve has no /metrics: the batch is the client's in-flight mean, said so
    assert s.batch_source == "client" and s.engine_metrics is None
    assert record.workload.avg_batch_size == pytest.approx(s.achieved_concurrency)
    assert serving_problems(record, "run") == []
    # the whole run holds the window; its energy is the profile's over the run
    assert s.run_energy_j >= phase.energy_j
    assert s.window_end_s <= s.run_duration_s + 0.05
    # per-request energies add up to the timeline's energy over the in-flight time, which
    # at full load is nearly all of the run (the server ends a batch's streams together, so
    # its slots are empty for a few ms before the next requests go out)
    assert sum(s.request_energies_j) == pytest.approx(s.split_energy_j, rel=1e-9)
    assert len(s.request_energies_j) == 24
    first, last = record.started_at.timestamp(), record.ended_at.timestamp()
    assert 0.8 * (last - first) <= s.split_span_s <= last - first + 0.02
    mean_w = 2 * profile.energy_j(first, last) / (last - first)
    assert s.split_energy_j == pytest.approx(mean_w * s.split_span_s, rel=0.15)
    assert s.request_energy_j.p50 <= s.request_energy_j.p90 <= s.request_energy_j.p99
    timeline = record.power_timeline
    assert timeline is not None and len(timeline.t_s) > 5
    assert 300 <= sum(timeline.power_w) / len(timeline.power_w) <= 900  # 2 GPUs, 150-450 W
    assert record.idle is not None and 300 <= record.idle.avg_power_w <= 900


def test_a_broken_identity_is_reported_by_the_submission_rules(dense_server):
    endpoint, _, model = dense_server
    with install_emulated_gpus(power_w=300.0, count=1):
        (record,) = run_serving_bench(_spec(endpoint, model, num_requests=8, levels=(2,)))
    phase = record.phase("request")
    bad_phase = phase.model_copy(update={"energy_per_token_j": phase.energy_per_token_j * 1.5})
    bad = record.model_copy(update={"phases": (bad_phase,)})
    problems = serving_problems(bad, "run")
    assert any("energy_per_token_j" in p for p in problems)
    over = record.model_copy(
        update={"serving": record.serving.model_copy(update={"achieved_concurrency": 3.5})}
    )
    assert any("exceeds the level 2" in p for p in serving_problems(over, "run"))


def test_poisson_arrivals_and_completions_api(dense_server):
    endpoint, _, model = dense_server
    with install_emulated_gpus(power_w=300.0, count=1):
        (record,) = run_serving_bench(
            _spec(endpoint, model, api="completions", request_rate=200.0, burstiness=4.0, seed=1)
        )
    assert record.status == "ok", record.error
    s = record.serving
    assert s.endpoint_api == "completions"
    assert s.request_rate_per_s == 200.0 and s.burstiness == 4.0
    assert serving_problems(record, "run") == []


def test_cli_attach_stores_one_record_per_level(dense_server, tmp_path):
    endpoint, _, model = dense_server
    data = tmp_path / "data"
    out = io.StringIO()
    argv = [
        "bench", "--endpoint", endpoint, "--model", model, "--concurrency", "2,4",
        "--num-requests", "12", "--input-tokens", "8", "--max-output-tokens", "24",
        "--ignore-eos", "--idle-s", "0.1", "--engine", ENGINE, "--gpu-indices", "0",
        "--data-dir", str(data), "--json",
    ]  # fmt: skip
    with install_emulated_gpus(power_w=200.0, count=2), contextlib.redirect_stdout(out):
        assert main(argv) == 0
    lines = [json.loads(x) for x in out.getvalue().splitlines() if x.startswith("{")]
    assert [x["workload"]["batch_size"] for x in lines] == [2, 4]
    stored = RunStore(data).runs()
    assert sorted(r.workload.batch_size for r in stored) == [2, 4]
    for r in stored:
        assert r.scope.gpu_indices == (0,)
        assert r.phase("request").avg_power_w == pytest.approx(200.0, rel=1e-3)
        # one emulated GPU measured at a constant 200 W: the split is exact
        assert sum(r.serving.request_energies_j) == pytest.approx(
            200.0 * r.serving.split_span_s, rel=1e-3
        )
        assert serving_problems(r, "run") == []


def test_wrong_model_name_is_one_error_line_and_nothing_stored(dense_server, tmp_path, capsys):
    endpoint, _, _ = dense_server
    data = tmp_path / "data"
    rc = main(["bench", "--endpoint", endpoint, "--model", "no/such-model",
               "--concurrency", "2", "--num-requests", "4", "--data-dir", str(data)])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("error:") and "does not serve model 'no/such-model'" in err
    assert not (data / "results").exists() or not any((data / "results").iterdir())


def test_unreachable_endpoint_is_one_error_line(tmp_path, capsys):
    argv = ["bench", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m"]
    rc = main([*argv, "--concurrency", "2", "--num-requests", "4", "--data-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: cannot reach the server")


def test_cli_launch_measures_the_moe_with_the_servers_modelled_cpu_and_stops_it(
    tiny_models, tmp_path
):
    data = tmp_path / "data"
    model = tiny_models["moe"]
    argv = [
        "bench", "--launch", transformers_serve_command(), "--model", model,
        "--concurrency", "3", "--num-requests", "9", "--input-tokens", "8",
        "--max-output-tokens", "24", "--ignore-eos", "--idle-s", "0.1",
        "--startup-timeout", "240", "--data-dir", str(data),
    ]  # fmt: skip
    before = {p.pid for p in psutil.process_iter()}
    with install_no_devices():  # no counter: the launched server's CPU, modelled
        assert main(argv) == 0
    (record,) = RunStore(data).runs()
    assert record.status == "ok", record.error
    assert record.model.is_moe and record.workload.method == "serving-steady-state"
    assert record.energy_source == "modelled:cpu-tdp"
    assert "launched server process tree" in record.serving.energy_scope_note
    assert record.phase("request").energy_j > 0
    assert record.serving.launched and record.serving.engine.startswith("transformers ")
    assert record.serving.engine_version_source == "--launch"
    log = record.tags["server_log"]
    assert os.path.isfile(log) and log.startswith(str(data))
    assert record.workload.max_num_seqs is None  # transformers serve takes no {max_num_seqs}
    assert serving_problems(record, "run") == []
    leftover = [
        p for p in psutil.process_iter(["cmdline"])
        if p.pid not in before and model in " ".join(p.info["cmdline"] or [])
    ]  # fmt: skip
    assert leftover == []


def test_a_server_dying_mid_run_keeps_finished_levels_and_loses_nothing(tiny_models, tmp_path):
    from mlenergy.workloads.serving.engine import launched_server

    data = tmp_path / "data"
    model = tiny_models["dense"]
    log = tmp_path / "dying.log"
    with launched_server(transformers_serve_command(), model, 4, log, startup_timeout_s=240) as srv:

        def kill_soon(record):  # level 2 is stored: kill the server while level 4 runs
            threading.Timer(1.0, lambda: os.killpg(srv.pid, signal.SIGKILL)).start()

        # level 4 streams 16 rounds of 64 tokens: still under way when the kill comes, 1 s in
        spec = _spec(srv.endpoint, model, levels=(2, 4), num_requests=64, max_output_tokens=64)
        with install_emulated_gpus(power_w=300.0, count=1), pytest.raises(UserError) as info:
            run_serving_bench(spec, data_dir=data, on_record=kill_soon)
        assert srv.process.wait(timeout=10) == -signal.SIGKILL  # it really died
    stored = RunStore(data).runs()
    assert [r.workload.batch_size for r in stored] == [2]
    assert stored[0].status == "ok"
    if isinstance(info.value, ServingLevelFailed):  # killed during the load (the usual case)
        assert info.value.stored_ids == [stored[0].run_id]
        assert info.value.record.status == "failed"
        assert "level 4" in info.value.problem


def test_attached_without_counters_models_the_server_pid_or_the_listening_server(dense_server):
    endpoint, pid, model = dense_server
    small = dict(levels=(2,), num_requests=8, max_output_tokens=16)
    with install_no_devices():
        (own,) = run_serving_bench(_spec(endpoint, model, server_pid=pid, **small))
        (listening,) = run_serving_bench(_spec(endpoint, model, engine=None, **small))
        with pytest.raises(UserError, match="not a running process"):
            run_serving_bench(_spec(endpoint, model, server_pid=2**22 + 7, **small))
    for record in (own, listening):
        assert record.energy_source == "modelled:cpu-tdp"
        assert record.phase("request").energy_j > 0
        assert serving_problems(record, "run") == []
    assert f"--server-pid process tree (pid {pid})" in own.serving.energy_scope_note
    # no --server-pid: the process listening on the endpoint's port, not the whole machine
    assert f"listening server process tree (pid {pid})" in listening.serving.energy_scope_note
    # no --engine, and transformers serve names no engine: its command line does
    assert listening.serving.engine == f"transformers {metadata.version('transformers')}"
    assert listening.serving.engine_version_source == "listening server command line"
