"""Launching and stopping a server process group; reading what engine a server is."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil
import pytest

from mlenergy.errors import UserError
from mlenergy.workloads.serving.engine import (
    Watchdog,
    engine_of_command,
    engine_of_process,
    launch_argv,
    launched_server,
    scrape_metrics,
    server_root,
)
from mlenergy.workloads.serving.signals import Caught, interrupted, signals_as_interrupt

# a tiny OpenAI-looking server: /v1/models answers, with a child process in its group
FAKE = (
    f'{sys.executable} -c "import http.server,json,subprocess,sys;'
    "subprocess.Popen(['sleep','300']);"
    "H=type('H',(http.server.BaseHTTPRequestHandler,),{'do_GET':lambda s:(s.send_response(200),"
    "s.end_headers(),s.wfile.write(json.dumps({'data':[{'id':'m'}]}).encode())),"
    "'log_message':lambda *a:None});"
    "http.server.HTTPServer(('127.0.0.1',int(sys.argv[1])),H).serve_forever()\" {port}"
)


def test_placeholders_are_filled_and_checked():
    argv = launch_argv("vllm serve {model} --port {port} --max-num-seqs {max_num_seqs}", "m", 9, 4)
    assert argv == ["vllm", "serve", "m", "--port", "9", "--max-num-seqs", "4"]
    with pytest.raises(UserError, match="no \\{port\\}"):
        launch_argv("vllm serve {model}", "m", 9, 4)
    kwargs = launch_argv("""serve {model} --port {port} --kw '{"a": 1}'""", "m", 9, 4)
    assert kwargs[-1] == '{"a": 1}'  # other braces stay as written
    with pytest.raises(UserError, match="cannot be filled"):
        launch_argv("serve {gpu} --port {port}", "m", 9, 4)
    assert engine_of_command(["vllm", "serve"]) == "vllm"
    assert engine_of_command(["/x/bin/llama-server"]) == "llama.cpp"
    assert server_root("http://h:1/v1/") == "http://h:1"


def test_a_server_process_names_its_engine_by_its_command_line(tmp_path):
    from importlib.metadata import version

    script = tmp_path / "transformers"  # a console script as a process lists it
    script.write_text("import time\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, str(script), "serve", "m", "--port", "9"])
    try:
        # Until the child has exec'd, its command line is still the parent's.
        deadline = time.monotonic() + 30
        while str(script) not in psutil.Process(proc.pid).cmdline():
            assert time.monotonic() < deadline, "the child never showed its command line"
            time.sleep(0.05)
        assert engine_of_process(proc.pid) == f"transformers {version('transformers')}"
    finally:
        proc.kill()
        proc.wait()
    assert engine_of_process(proc.pid) is None and engine_of_process(None) is None
    elsewhere = ["/opt/other-env/bin/python3", "/opt/other-env/bin/vllm", "serve", "m"]
    assert engine_of_command(elsewhere, with_version=False) == "vllm"
    assert engine_of_command(["python3", "-m", "sglang.launch_server"]) == "sglang"
    assert engine_of_command(["python3", "app.py"]) is None


def test_prometheus_metrics_are_read_for_running_waiting_and_cache():
    text = (
        "# HELP vllm:num_requests_running x\n"
        'vllm:num_requests_running{model_name="m"} 12.0\n'
        'vllm:num_requests_waiting{model_name="m"} 3.0\n'
        'vllm:kv_cache_usage_perc{model_name="m"} 0.5\n'
        "other_metric 7\n"
    )
    assert scrape_metrics(text) == {"running": 12.0, "waiting": 3.0, "kv_cache": 0.5}


def _group_alive(pgid: int) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter():
        try:
            if p.status() != psutil.STATUS_ZOMBIE and __import__("os").getpgid(p.pid) == pgid:
                out.append(p)
        except (psutil.Error, ProcessLookupError):
            continue
    return out


@pytest.mark.slow
def test_launched_group_is_stopped_whole_on_exit_and_on_error(tmp_path):
    with launched_server(FAKE, "m", 2, tmp_path / "a.log", startup_timeout_s=60) as server:
        pid = server.pid
        time.sleep(0.3)
        assert len(_group_alive(pid)) >= 2  # the server and its child
    assert _group_alive(pid) == []
    with (
        pytest.raises(RuntimeError, match="boom"),
        launched_server(FAKE, "m", 2, tmp_path / "b.log", startup_timeout_s=60) as server,
    ):
        pid = server.pid
        raise RuntimeError("boom")
    assert _group_alive(pid) == []


@pytest.mark.slow
def test_a_server_that_exits_or_never_answers_is_one_user_error(tmp_path):
    with (
        pytest.raises(UserError, match=r"exited with status 3.*no such model"),
        launched_server(
            f"{sys.executable} -c \"import sys; print('no such model'); sys.exit(3)\" {{port}}",
            "m",
            2,
            tmp_path / "c.log",
            startup_timeout_s=60,
        ),
    ):
        pass
    t0 = time.monotonic()
    late = launched_server("sleep 300 {port}", "m", 2, tmp_path / "d.log", startup_timeout_s=1)
    with pytest.raises(UserError, match="did not answer within 1 s"), late:
        pass
    assert time.monotonic() - t0 < 30
    missing = launched_server("/no/such/engine {port}", "m", 2, tmp_path / "e.log")
    with pytest.raises(UserError, match="could not start"), missing:
        pass


def test_sighup_and_sigterm_interrupt_as_ctrl_c_and_ignored_signals_stay_ignored():
    before = signal.getsignal(signal.SIGTERM)  # another library (Ray) may have set its own
    hup = signal.signal(signal.SIGHUP, signal.SIG_DFL)  # the suite itself may run under nohup
    try:
        for signum, status in ((signal.SIGHUP, 129), (signal.SIGTERM, 143)):
            with pytest.raises(KeyboardInterrupt), signals_as_interrupt() as caught:
                signal.raise_signal(signum)
                time.sleep(5)  # not reached: the handler interrupts at once
            assert caught.signum == signum
            error = interrupted("1 finished level(s) stored", caught)
            assert error.exit_code == status
            assert error.summary.startswith(signal.Signals(signum).name)
    finally:
        signal.signal(signal.SIGHUP, hup)
    assert interrupted("kept", Caught()).exit_code == 130
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        with signals_as_interrupt() as caught:
            signal.raise_signal(signal.SIGHUP)  # ignored: nothing happens
        assert caught.signum is None
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert signal.getsignal(signal.SIGTERM) == before  # restored


def test_the_watchdog_stops_the_group_when_its_owner_goes_without_a_word(tmp_path):
    with launched_server(FAKE, "m", 2, tmp_path / "w.log", startup_timeout_s=60) as server:
        pid = server.pid
        watchdog = Watchdog(pid, grace_s=2.0)
        assert len(_group_alive(pid)) >= 2
        watchdog.release(stopped=False)  # as if mlenergy had died: the pipe closes unwritten
        deadline = time.monotonic() + 20
        while _group_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _group_alive(pid) == []
        assert not server.alive()
