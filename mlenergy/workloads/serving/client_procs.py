"""Streaming from several processes: a worker process, and this process's handle on it.

One Python process streams at most so many tokens per second (its CPU per token, see
``benchmarks/serving_harness_overhead.py``). When a server streams faster, the load generator
hands requests to worker processes: each runs its own event loop and HTTP session and streams
the requests it is given with the same :func:`~.client.stream_request`. The load generator keeps
the schedule, the level and the steady-state tracker; a worker reports each request's first token
(``("first", index, unix time)``) as it arrives and its whole timing when it ends
(``("done", index, RequestTiming)``), over a socket pair.

A worker runs ``python -m mlenergy.workloads.serving.client_procs FD`` and imports only the client
(no torch). It exits when told to, and when the process that started it goes away (its socket
closes), so it never outlives the benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import psutil

from mlenergy.workloads.serving.client import RequestOptions, http_session, stream_request
from mlenergy.workloads.serving.timing import RequestTiming

READY_TIMEOUT_S = 60.0
"""Seconds a worker may take to start (import, open its session)."""


class WorkerLane:
    """A worker process seen from the load generator: hand it requests, await their timings.

    Args:
        options: What every request carries.
        connections: HTTP connections the worker may open (the level).
        on_first_token: Called with ``(index, unix time)`` when a request's first text arrives.
    """

    def __init__(
        self,
        options: RequestOptions,
        connections: int,
        on_first_token: Callable[[int, float], None] | None,
    ) -> None:
        self.inflight = 0
        self.ready = asyncio.get_running_loop().create_future()
        self._on_first = on_first_token
        self._pending: dict[int, asyncio.Future[RequestTiming]] = {}
        ours, theirs = socket.socketpair()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "mlenergy.workloads.serving.client_procs", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self._sock = ours
        self._conn = Connection(os.dup(ours.fileno()))
        self._ps = psutil.Process(self.process.pid)
        asyncio.get_running_loop().add_reader(self._conn.fileno(), self._readable)
        self._conn.send(("options", options, connections))

    def cpu_s(self) -> float:
        """CPU seconds the worker has used (user + system); 0 once it is gone."""
        try:
            times = self._ps.cpu_times()
        except psutil.Error:
            return 0.0
        return times.user + times.system

    def _readable(self) -> None:
        try:
            while self._conn.poll(0):
                kind, *rest = self._conn.recv()
                if kind == "first" and self._on_first is not None:
                    self._on_first(rest[0], rest[1])
                elif kind == "done":
                    future = self._pending.pop(rest[0], None)
                    if future is not None and not future.done():
                        future.set_result(rest[1])
                elif kind == "ready" and not self.ready.done():
                    self.ready.set_result(True)
        except (EOFError, OSError):
            self._gone()

    def _gone(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(self._conn.fileno())
        if not self.ready.done():
            self.ready.set_exception(RuntimeError("a client worker process exited at start"))
        for future in self._pending.values():
            if not future.done():
                future.set_exception(RuntimeError("a client worker process exited"))
        self._pending.clear()

    async def run(self, index: int, prompt: str, timing: RequestTiming) -> RequestTiming:
        """Stream one request in the worker; return its timing (``timing`` if it fails)."""
        future: asyncio.Future[RequestTiming] = asyncio.get_running_loop().create_future()
        self._pending[index] = future
        self.inflight += 1
        try:
            self._conn.send(("go", index, prompt))
            return await future
        except asyncio.CancelledError:
            with contextlib.suppress(OSError):
                self._conn.send(("cancel", index))
            raise
        except (RuntimeError, OSError) as err:
            timing.error = str(err)
            timing.end_s = time.time()
            return timing
        finally:
            self.inflight -= 1
            self._pending.pop(index, None)

    def close(self, grace_s: float = 5.0) -> None:
        """Tell the worker to stop; kill it if it has not within ``grace_s``."""
        if self.ready.done():
            self.ready.exception()  # looked at: a failed start is not reported twice
        else:
            self.ready.cancel()
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(self._conn.fileno())
        with contextlib.suppress(OSError):
            self._conn.send(("stop",))
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._conn.close()
        self._sock.close()


# ------------------------------------------------------------------------- the worker itself


async def _serve(conn: Connection) -> None:
    loop = asyncio.get_running_loop()
    kind, options, connections = conn.recv()
    assert kind == "options"
    tasks: dict[int, asyncio.Task[Any]] = {}
    stopped = loop.create_future()

    def send(message: tuple[Any, ...]) -> None:
        try:
            conn.send(message)
        except OSError:  # the load generator is gone
            if not stopped.done():
                stopped.set_result(None)

    def first(index: int, t: float) -> None:
        send(("first", index, t))

    async with http_session(connections + 4) as session:

        async def one(index: int, prompt: str) -> None:
            timing = RequestTiming(index=index, sent_s=0.0)
            try:
                await stream_request(session, options, prompt, timing, first)
            except asyncio.CancelledError:
                return
            finally:
                tasks.pop(index, None)
            send(("done", index, timing))

        def readable() -> None:
            try:
                while conn.poll(0):
                    message = conn.recv()
                    if message[0] == "go":
                        tasks[message[1]] = loop.create_task(one(message[1], message[2]))
                    elif message[0] == "cancel":
                        task = tasks.get(message[1])
                        if task is not None:
                            task.cancel()
                    elif message[0] == "stop" and not stopped.done():
                        stopped.set_result(None)
            except (EOFError, OSError):  # the load generator is gone
                if not stopped.done():
                    stopped.set_result(None)

        loop.add_reader(conn.fileno(), readable)
        send(("ready",))
        await stopped
        loop.remove_reader(conn.fileno())
        for task in list(tasks.values()):
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point of a worker: ``python -m mlenergy.workloads.serving.client_procs FD``."""
    args = sys.argv[1:] if argv is None else argv
    for signum in (signal.SIGINT, signal.SIGHUP):  # the load generator says when to stop
        signal.signal(signum, signal.SIG_IGN)
    conn = Connection(int(args[0]))
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError, EOFError):
        asyncio.run(_serve(conn))
    return 0


if __name__ == "__main__":
    sys.exit(main())
