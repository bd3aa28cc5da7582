"""The serving engine as a component: what it is, whether it is up, starting and stopping it.

Attach mode (``--endpoint``) asks the server what it is: vLLM's ``/version``, TGI's ``/info``,
SGLang's ``/get_server_info``, llama-server's ``/props``, the ``owned_by`` of ``/v1/models`` and
the metric prefixes of a Prometheus ``/metrics``; ``--engine NAME`` names it otherwise.
Launch mode (``--launch "CMD"``) substitutes ``{model}``, ``{port}`` and ``{max_num_seqs}``,
starts the command in a process group of its own with its output in a log file, waits until
``/v1/models`` answers, and stops exactly that process group afterwards (also on Ctrl-C or
failure): SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

from mlenergy.errors import UserError

_METRIC_ENGINES = (
    ("vllm:", "vllm"),
    ("sglang:", "sglang"),
    ("tgi_", "tgi"),
    ("llamacpp:", "llama.cpp"),
)
_OWNERS = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp", "tgi": "tgi"}
_RUNNING = ("vllm:num_requests_running", "sglang:num_running_reqs", "tgi_batch_current_size")
_WAITING = ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size")
_KV_CACHE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")


def server_root(endpoint: str) -> str:
    """The server's root URL from its OpenAI base URL (``.../v1`` dropped)."""
    root = endpoint.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


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


def _get(client: httpx.Client, url: str) -> httpx.Response | None:
    try:
        response = client.get(url)
    except httpx.HTTPError:
        return None
    return response if response.status_code == 200 else None


def served_models(endpoint: str, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """The models a server lists at ``/v1/models``.

    Raises:
        UserError: The server cannot be reached or does not answer like an OpenAI server.
    """
    url = f"{endpoint}/models"
    try:
        with httpx.Client(timeout=timeout_s, trust_env=False) as client:
            response = client.get(url)
    except httpx.HTTPError as err:
        raise UserError(
            f"cannot reach the server at {endpoint} ({type(err).__name__}: {err})",
            "Start the server first, check --endpoint (host, port, /v1), or use --launch",
        ) from err
    if response.status_code != 200:
        raise UserError(
            f"{url} answered HTTP {response.status_code}, not a list of models",
            "Point --endpoint at an OpenAI-compatible server's /v1 base URL",
        )
    try:
        data = response.json().get("data")
    except ValueError:
        data = None
    if not isinstance(data, list):
        raise UserError(
            f"{url} did not answer an OpenAI model list",
            "Point --endpoint at an OpenAI-compatible server's /v1 base URL",
        )
    return [m for m in data if isinstance(m, dict)]


def check_model_served(endpoint: str, model: str) -> list[dict[str, Any]]:
    """Check that ``model`` is among the served models; return the list.

    Raises:
        UserError: The server is unreachable or serves other models only.
    """
    models = served_models(endpoint)
    ids = [str(m.get("id")) for m in models]
    if ids and model not in ids:
        raise UserError(
            f"the server at {endpoint} does not serve model {model!r} (it serves: "
            f"{', '.join(ids[:5])})",
            "Pass --model exactly as the server lists it",
        )
    return models


@dataclass(frozen=True)
class EngineInfo:
    """What engine answered, and how we know.

    Attributes:
        name: ``"vllm 0.11.1"``, ``"tgi 3.0.1"``, ``"transformers 5.25.0"``..., or ``None``.
        source: Where it came from (``/version``, ``/info``, ``--engine``, ``--launch``...).
        has_metrics: Whether ``/metrics`` answers with an engine's Prometheus metrics.
    """

    name: str | None
    source: str | None
    has_metrics: bool = False


def detect_engine(
    endpoint: str, models: list[dict[str, Any]], given: str | None = None
) -> EngineInfo:
    """Ask the server what engine it is; fall back to ``given`` (``--engine``).

    A name given with ``--engine`` wins over what the server says only when the server says
    nothing.
    """
    root = server_root(endpoint)
    name: str | None = None
    source: str | None = None
    with httpx.Client(timeout=5.0, trust_env=False) as client:
        metrics = _get(client, f"{root}/metrics")
        kind = None
        if metrics is not None:
            for prefix, engine in _METRIC_ENGINES:
                if prefix in metrics.text:
                    kind = engine
                    break
        owner = next((str(m.get("owned_by")) for m in models if m.get("owned_by")), "")
        kind = kind or _OWNERS.get(owner.lower())
        for path, key in (
            ("/version", "version"),
            ("/info", "version"),
            ("/get_server_info", "version"),
            ("/props", "build_info"),
        ):
            response = _get(client, f"{root}{path}")
            if response is None:
                continue
            try:
                version = response.json().get(key)
            except (ValueError, AttributeError):
                continue
            if version:
                guessed = kind or {"/version": "vllm", "/info": "tgi", "/props": "llama.cpp"}.get(
                    path, "sglang"
                )
                name, source = f"{guessed} {version}", path
                break
        if name is None and kind is not None:
            name, source = kind, "/metrics" if metrics is not None else "/v1/models"
    if name is None and given:
        name, source = given, "--engine"
    return EngineInfo(
        name=name, source=source, has_metrics=metrics is not None and kind is not None
    )


def scrape_metrics(text: str) -> dict[str, float]:
    """Running and waiting requests and KV-cache use from a Prometheus text page.

    Returns:
        Keys ``running``, ``waiting``, ``kv_cache`` (fraction) for the metrics found; a metric
        with several label sets is summed (cache use: averaged).
    """
    found: dict[str, list[float]] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        try:
            value = float(line.rsplit(" ", 1)[-1])
        except ValueError:
            continue
        for key, names in (("running", _RUNNING), ("waiting", _WAITING), ("kv_cache", _KV_CACHE)):
            if name in names:
                found.setdefault(key, []).append(value)
    out = {k: sum(v) for k, v in found.items()}
    if "kv_cache" in found:
        out["kv_cache"] = sum(found["kv_cache"]) / len(found["kv_cache"])
    return out


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


def engine_of_command(argv: list[str]) -> str | None:
    """The engine a launch command starts, with its version when that package is installed."""
    exe = Path(argv[0]).name
    known = {"vllm": "vllm", "transformers": "transformers", "sglang": "sglang"}
    name = known.get(exe)
    if name is None and exe.startswith("python") and "-m" in argv:
        module = argv[argv.index("-m") + 1] if argv.index("-m") + 1 < len(argv) else ""
        name = known.get(module.split(".")[0])
    if name is None:
        return {"llama-server": "llama.cpp", "text-generation-launcher": "tgi"}.get(exe)
    try:
        return f"{name} {metadata.version(name)}"
    except metadata.PackageNotFoundError:
        return name


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
    server = LaunchedServer(
        endpoint=f"http://127.0.0.1:{port}/v1",
        pid=process.pid,
        log_path=log_path,
        argv=argv,
        process=process,
    )
    try:
        deadline = time.monotonic() + startup_timeout_s
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while _get(client, f"{server.endpoint}/models") is None:
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
        stop_process_group(process)
