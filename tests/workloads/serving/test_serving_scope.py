"""A serving run measures the server's GPUs only: NVML process lists on emulated GPUs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from mlenergy.errors import UserError
from mlenergy.measure.emulated import install_emulated_gpus, install_no_devices
from mlenergy.measure.scope import gpu_process_ids, gpus_held_by
from mlenergy.workloads.serving.engine import launched_server
from mlenergy.workloads.serving.server_gpus import (
    listening_pid,
    process_tree,
    server_gpus,
    visible_devices_for,
)


@pytest.fixture(scope="module")
def child():
    """A child process of this one (a server's worker), stopped afterwards."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc.pid
    proc.kill()
    proc.wait()


def test_emulated_gpus_list_their_processes():
    with install_emulated_gpus(count=3, processes=[[11], [], None]) as gpus:
        assert gpu_process_ids(gpus, 0) == {11}
        assert gpu_process_ids(gpus, 1) == set()
        assert gpu_process_ids(gpus, 2) is None  # unreadable, as without NVML permission
        assert gpu_process_ids(gpus, 7) is None
        assert gpus_held_by({11, 12}, gpus) == ([0], False)
        gpus.gpus[2].processes = [12]
        assert gpus_held_by({11, 12}, gpus) == ([0, 2], True)


def test_the_server_tree_decides_the_gpus(child):
    me = os.getpid()
    assert {me, child} <= process_tree(me)
    # the server's worker (a child of the server) holds GPU 2; the others hold other work
    with install_emulated_gpus(count=4, processes=[[1], [], [child], []]):
        chosen = server_gpus(None, me, "launched server")
        assert chosen.gpu_indices == [2]
        assert f"launched server process tree (pid {me}" in chosen.how
        assert server_gpus([1, 3], me, "launched server").gpu_indices == [1, 3]
        with pytest.raises(UserError, match="is not running"):
            server_gpus(None, 1 << 22, "--server-pid")
    with install_emulated_gpus(count=2, processes=[[1], []]), pytest.raises(UserError) as info:
        server_gpus(None, me, "--server-pid")
    assert "NVML lists none of the --server-pid's processes" in info.value.problem
    assert "--gpu-indices" in info.value.fix


def test_several_gpus_and_nothing_says_which_stops_with_one_line():
    with install_emulated_gpus(count=2), pytest.raises(UserError) as info:
        server_gpus(None, None, "listening server")
    assert "2 GPUs are visible and nothing says which" in info.value.problem
    assert "--gpu-indices" in info.value.fix
    with install_emulated_gpus(count=2), pytest.raises(UserError, match="cannot be read"):
        server_gpus(None, os.getpid(), "--server-pid")
    with install_emulated_gpus(count=1):
        assert server_gpus(None, None, "listening server").gpu_indices == [0]
    with install_no_devices():
        assert server_gpus(None, os.getpid(), "--server-pid").gpu_indices is None


def test_the_process_listening_on_the_port_is_found():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert listening_pid(f"http://127.0.0.1:{port}/v1") == os.getpid()
        assert listening_pid(f"http://localhost:{port}/v1") == os.getpid()
    assert listening_pid("http://192.0.2.1:8000/v1") is None  # not this machine


def test_a_launched_server_is_given_exactly_its_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    assert visible_devices_for([1, 3]) == "5,7"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert visible_devices_for([1, 3]) == "1,3"
    server = (
        f'{sys.executable} -c "import http.server,json,os,sys;'
        "print('CVD=' + os.environ.get('CUDA_VISIBLE_DEVICES', '-'), flush=True);"
        "H=type('H',(http.server.BaseHTTPRequestHandler,),{'do_GET':lambda s:(s.send_response(200),"
        "s.end_headers(),s.wfile.write(json.dumps({'data':[{'id':'m'}]}).encode())),"
        "'log_message':lambda *a:None});"
        "http.server.HTTPServer(('127.0.0.1',int(sys.argv[1])),H).serve_forever()\" {port}"
    )
    log = tmp_path / "server.log"
    env = {"CUDA_VISIBLE_DEVICES": "1,3"}
    with launched_server(server, "m", 2, log, startup_timeout_s=60, poll_s=0.1, env=env):
        deadline = time.monotonic() + 10
        while "CVD=" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert "CVD=1,3" in log.read_text()
