"""Run ``mlenergy leaderboard`` in a subprocess on a free local port (browser tests, benchmarks).

Not a command (no ``register``): :func:`serve_leaderboard` starts the real CLI, waits until the
page answers and stops it afterwards; :data:`CHROMIUM_ARGS` are the flags the headless Chromium
that drives it is launched with. Standard library only, so the CLI's start-up stays light.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium (CI installs it); Playwright only drives it (never ``playwright install``)."""

CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
)
"""Flags for launching :data:`CHROMIUM` headless, offline and without first-run prompts."""

STATUS_JS = (
    "() => (document.querySelector('#lb-status')?.innerText"
    ".match(/\\d+ rows · page \\d+ of \\d+/) || [''])[0]"
)
"""JavaScript returning the table's status line, e.g. ``25 rows · page 1 of 1`` (or '')."""

_ROOT = Path(__file__).resolve().parents[2]


class LeaderboardStartError(RuntimeError):
    """The leaderboard process exited or did not answer before the start timeout."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that is free now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    """Whether ``url`` answers HTTP 200 within 2 s."""
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


@contextmanager
def serve_leaderboard(
    data_dir: Path,
    *,
    log_path: Path | None = None,
    start_timeout_s: float = 120.0,
    poll_s: float = 0.5,
    stop_timeout_s: float = 20.0,
    on_start: Callable[[int], None] | None = None,
    extra_args: Sequence[str] = (),
) -> Iterator[str]:
    """Serve ``data_dir`` with ``mlenergy leaderboard`` on 127.0.0.1; yield its base URL.

    The server runs with ``OMP_NUM_THREADS=1`` and Gradio analytics off. On exit it is
    terminated (killed if it has not stopped after ``stop_timeout_s``).

    Args:
        data_dir: The store to serve.
        log_path: File for the server's stdout and stderr (kept afterwards); None discards them.
        start_timeout_s: Seconds to wait for the first HTTP 200 answer.
        poll_s: Seconds between attempts while waiting.
        stop_timeout_s: Seconds to wait for the server to stop after it is terminated.
        on_start: Called with the server's process id once it answers (e.g. to read its CPU
            time in a benchmark).
        extra_args: More options of ``mlenergy leaderboard`` (e.g. ``--published-quality F``).

    Raises:
        LeaderboardStartError: The server exited or did not answer within ``start_timeout_s``
            (the message names ``log_path`` when there is one).
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
    command = [sys.executable, "-m", "mlenergy.cli", "leaderboard", "--data-dir", str(data_dir)]
    with ExitStack() as stack:
        out = subprocess.DEVNULL if log_path is None else stack.enter_context(log_path.open("w"))
        proc = subprocess.Popen(
            [*command, "--port", str(port), *extra_args],
            cwd=_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + start_timeout_s
            while not _answers(url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    where = f": see {log_path}" if log_path is not None else ""
                    raise LeaderboardStartError(f"the leaderboard did not start{where}")
                time.sleep(poll_s)
            if on_start is not None:
                on_start(proc.pid)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=stop_timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
