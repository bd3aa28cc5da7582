"""The serving engine as a component: where it is, starting and stopping it.

What a server says about itself (its models, engine and metrics) is read by
:mod:`~.server_info`, whose functions this module also offers. Launch mode (``--launch "CMD"``)
substitutes ``{model}``, ``{port}`` and ``{max_num_seqs}``, starts the command in a process group
of its own with its output in a log file, waits until ``/v1/models`` answers, and stops exactly
that process group afterwards (also on Ctrl-C, SIGTERM, SIGHUP or failure): SIGTERM, then SIGKILL
after a grace period. A :class:`Watchdog` process stops the group too if mlenergy itself is
killed (SIGKILL) before it could.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import psutil

from mlenergy.errors import UserError
from mlenergy.workloads.serving.server_info import (
    LIST_BYTES,
    EngineInfo,
    check_model_served,
    detect_engine,
    http_client,
    model_root,
    read_capped,
    read_metrics,
    scrape_metrics,
    served_models,
    server_root,
)

__all__ = [
    "EngineInfo",
    "LaunchedServer",
    "Watchdog",
    "check_endpoint",
    "check_model_served",
    "check_startup_timeout",
    "detect_engine",
    "engine_of_command",
    "engine_of_process",
    "free_port",
    "launch_argv",
    "launched_server",
    "model_root",
    "read_metrics",
    "scrape_metrics",
    "served_models",
    "server_root",
    "stop_process_group",
]


def check_endpoint(endpoint: str) -> str:
    """Validate ``--endpoint``; return it without a trailing slash.

    Raises:
        UserError: Not an http(s) URL.
    """
    if not re.match(r"^https?://[^/\s]+", endpoint or ""):
        raise UserError(
            f"--endpoint {endpoint!r} is not an http(s) URL",
            "Pass the OpenAI base URL, e.g. --endpoint http://127.0.0.1:8000/v1",
        )
    return endpoint.rstrip("/")


# ----------------------------------------------------------------------- launch


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_PLACEHOLDERS = ("model", "port", "max_num_seqs")


def launch_argv(template: str, model: str, port: int, max_num_seqs: int) -> list[str]:
    """The argument list of ``--launch`` with its placeholders filled.

    Raises:
        UserError: An empty command, an unknown placeholder, or no ``{port}``.
    """
    if "{port}" not in template:
        raise UserError(
            f"--launch {template!r} has no {{port}} placeholder",
            'Put the port where the server takes it, e.g. --launch "vllm serve {model} '
            '--port {port} --max-num-seqs {max_num_seqs}"',
        )
    unknown = sorted(set(re.findall(r"\{(\w+)\}", template)) - set(_PLACEHOLDERS))
    if unknown:
        raise UserError(
            f"--launch {template!r} cannot be filled in (unknown placeholder {{{unknown[0]}}})",
            "Use only the placeholders {model}, {port} and {max_num_seqs}",
        )
    values = {"model": model, "port": str(port), "max_num_seqs": str(max_num_seqs)}
    argv = []
    for part in shlex.split(template):  # literal replacement: other braces (JSON) stay as given
        for name in _PLACEHOLDERS:
            part = part.replace(f"{{{name}}}", values[name])
        argv.append(part)
    if not argv:
        raise UserError("--launch is empty", "Pass the command that starts the server")
    return argv


def engine_of_command(argv: list[str], with_version: bool = True) -> str | None:
    """The engine a command starts, with its version when that package is installed here.

    Reads ``vllm serve ...``, ``python -m sglang.launch_server ...``, a console script run by
    its interpreter (``python .../bin/transformers serve ...``, as a process lists it),
    ``llama-server`` and ``text-generation-launcher``.

    Args:
        argv: The command's arguments.
        with_version: Add the version of the package installed in this environment (for a
            command this process starts, or a server running from this same environment).
    """
    if not argv:
        return None
    exe = Path(argv[0]).name
    known = {"vllm": "vllm", "transformers": "transformers", "sglang": "sglang"}
    name = known.get(exe)
    if name is None and exe.startswith("python") and len(argv) > 1:
        if "-m" in argv:
            module = argv[argv.index("-m") + 1] if argv.index("-m") + 1 < len(argv) else ""
            name = known.get(module.split(".")[0])
        elif not argv[1].startswith("-"):
            return engine_of_command(argv[1:], with_version)
    if name is None:
        return {"llama-server": "llama.cpp", "text-generation-launcher": "tgi"}.get(exe)
    if not with_version:
        return name
    try:
        return f"{name} {metadata.version(name)}"
    except metadata.PackageNotFoundError:
        return name


def engine_of_process(pid: int | None) -> str | None:
    """The engine a running server process is, read from its command line (attached mode).

    The version is added only when the process runs from this Python environment (its
    interpreter or script lies under ``sys.prefix``), where the installed package is its own.

    Returns:
        ``"transformers 5.25.0"``, ``"vllm"``..., or ``None`` (no process, unreadable, unknown).
    """
    if pid is None:
        return None
    try:
        argv = psutil.Process(pid).cmdline()
    except psutil.Error:
        return None
    prefix = Path(sys.prefix).resolve()  # a venv's python links outside it: resolve folders
    here = any(
        Path(part).is_absolute() and Path(part).parent.resolve().is_relative_to(prefix)
        for part in argv[:2]
    )
    return engine_of_command(argv, with_version=here)


@dataclass
class LaunchedServer:
    """A server started by :func:`launched_server`.

    Attributes:
        endpoint: Its OpenAI base URL (``http://127.0.0.1:PORT/v1``).
        pid: Process id of the command (leader of its process group).
        log_path: File holding its stdout and stderr.
        argv: The command run.
    """

    endpoint: str
    pid: int
    log_path: Path
    argv: list[str]
    process: subprocess.Popen[bytes]

    def alive(self) -> bool:
        """Whether the command is still running."""
        return self.process.poll() is None


def _log_tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])[-600:]


def stop_process_group(process: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    """Stop the process group led by ``process``: SIGTERM, then SIGKILL after ``grace_s``."""
    if process.poll() is not None:
        with suppress(ProcessLookupError, PermissionError):  # its group may hold children
            os.killpg(process.pid, signal.SIGKILL)
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with suppress(subprocess.TimeoutExpired):
        process.wait(timeout=grace_s)
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


_WATCHDOG = """
import os, signal, sys, time
pgid, grace = int(sys.argv[1]), float(sys.argv[2])
for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
    signal.signal(s, signal.SIG_IGN)
if sys.stdin.buffer.read(1) != b"x":  # mlenergy is gone without stopping the group
    try:
        os.killpg(pgid, signal.SIGTERM)
        end = time.monotonic() + grace
        while time.monotonic() < end:
            time.sleep(0.2)
            os.killpg(pgid, 0)
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
"""
"""The watchdog's program: stop the server's process group unless told all is well."""


class Watchdog:
    """A tiny process that stops a server's process group if mlenergy dies without doing so.

    It waits on a pipe from this process. :meth:`release` (the group is stopped) writes one
    byte and it exits; if this process dies first, even by SIGKILL, the pipe closes unwritten
    and it sends the group SIGTERM, then SIGKILL after ``grace_s``. It runs in a session of its
    own and ignores SIGINT, SIGHUP and SIGTERM, so what ends mlenergy does not end it.
    """

    def __init__(self, pgid: int, grace_s: float = 15.0) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(pgid), str(grace_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def release(self, stopped: bool) -> None:
        """Let the watchdog go: ``stopped`` says the group is gone (else it stops it now)."""
        stdin = self.process.stdin
        if stdin is not None:
            with suppress(OSError):
                if stopped:
                    stdin.write(b"x")
                stdin.close()
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=1.0 if stopped else 0.0)


def check_startup_timeout(seconds: float) -> float:
    """Validate ``--startup-timeout``: a positive, finite number of seconds.

    Raises:
        UserError: NaN, infinite, zero or negative.
    """
    if not (math.isfinite(seconds) and seconds > 0):
        raise UserError(
            f"--startup-timeout {seconds} is not a positive number of seconds",
            "Pass e.g. --startup-timeout 600",
        )
    return seconds


@contextmanager
def launched_server(
    template: str,
    model: str,
    max_num_seqs: int,
    log_path: Path,
    *,
    startup_timeout_s: float = 600.0,
    poll_s: float = 0.5,
    env: dict[str, str] | None = None,
) -> Iterator[LaunchedServer]:
    """Start a server from ``--launch``, wait until it serves, stop its process group on exit.

    Args:
        template: The command with ``{model}``, ``{port}``, ``{max_num_seqs}``.
        model: Substituted for ``{model}``.
        max_num_seqs: Substituted for ``{max_num_seqs}`` (the level).
        log_path: The server's stdout and stderr go here (kept).
        startup_timeout_s: Seconds to wait until ``/v1/models`` answers.
        poll_s: Seconds between attempts.
        env: Variables set for the command on top of this process's environment (e.g.
            ``CUDA_VISIBLE_DEVICES``).

    Raises:
        UserError: The command cannot start, exits, or does not answer in time (the message
            ends with the last lines of its log).
    """
    check_startup_timeout(startup_timeout_s)
    port = free_port()
    argv = launch_argv(template, model, port, max_num_seqs)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        try:
            process = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **env} if env else None,
                start_new_session=True,  # its own process group: we stop exactly that group
            )
        except OSError as err:
            raise UserError(
                f"--launch could not start {argv[0]!r}: {err}",
                "Check the command (is the engine installed and on PATH?)",
            ) from err
    watchdog = Watchdog(process.pid)
    server = LaunchedServer(
        endpoint=f"http://127.0.0.1:{port}/v1",
        pid=process.pid,
        log_path=log_path,
        argv=argv,
        process=process,
    )
    try:
        deadline = time.monotonic() + startup_timeout_s
        with http_client(2.0) as client:
            while read_capped(client, f"{server.endpoint}/models", LIST_BYTES) is None:
                if process.poll() is not None:
                    raise UserError(
                        f"the launched server exited with status {process.returncode} before "
                        f"serving: {_log_tail(log_path)}",
                        f"See its log {log_path}",
                    )
                if time.monotonic() > deadline:
                    raise UserError(
                        f"the launched server did not answer within {startup_timeout_s:.0f} s: "
                        f"{_log_tail(log_path)}",
                        f"See its log {log_path}; raise --startup-timeout for large models",
                    )
                time.sleep(poll_s)
        yield server
    finally:
        stopped = False
        try:
            stop_process_group(process)
            stopped = True
        finally:
            watchdog.release(stopped)
