"""The emulated continuous-batching server (:mod:`.serving_sim`) over HTTP, in real time.

:func:`serve_sim` starts it on 127.0.0.1 (a free port) in a thread of this process and yields a
:class:`SimServer`. It answers like vLLM's OpenAI server: ``/v1/models``, streamed
``/v1/chat/completions`` and ``/v1/completions`` (one token per chunk, then the usage),
``/version``, and a Prometheus ``/metrics`` with ``vllm:num_requests_running`` and
``vllm:num_requests_waiting``. Its engine steps in real time and sets the power of a
:class:`~mlenergy.measure.emulated.LivePower`, which an emulated GPU reads, so a benchmark
measuring that GPU sees the power the schedule drew and each request's true energy is known
(:meth:`SimServer.truth_j`). A step that ends late (the event loop woke late) lasts longer at
idle power, shared by its requests, and its tokens leave when it ends: power, tokens and truth
agree.

A prompt is as many tokens as it has words (or ``prompt_tokens`` in the request body, a
simulator-only field). Every request generates exactly ``max_tokens`` tokens, with or without
``ignore_eos``.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from mlenergy.measure.emulated import LivePower
from mlenergy.testing.serving_sim import BatchingEngine, SimPhysics, SimRequest

SIM_VERSION = "0.0.0+mlenergy-sim"
"""What ``/version`` answers: the record names the engine ``vllm 0.0.0+mlenergy-sim``."""


class SimServer:
    """The engine, its HTTP front and its GPU's power (see the module docstring).

    Args:
        physics: Costs and cap.
        power: The live power an emulated GPU reads (idle until the first step).
        model: The served model name.
    """

    def __init__(self, physics: SimPhysics, power: LivePower, model: str = "sim-model") -> None:
        self.physics = physics
        self.power = power
        self.model = model
        self.engine = BatchingEngine(physics)
        self.endpoint = ""
        self._streams: dict[int, asyncio.Queue[bool]] = {}
        self._wake: asyncio.Event | None = None
        self._next_id = 0
        self._lock = threading.Lock()

    def truth_j(self) -> dict[int, float]:
        """True energy of each request so far, joules, by request id (arrival order)."""
        with self._lock:
            return {rid: r.true_j for rid, r in self.engine.requests.items()}

    def prompt_of(self, rid: int) -> int:
        """Prompt tokens of request ``rid``."""
        return self.engine.requests[rid].prompt_tokens

    async def run_engine(self) -> None:
        """Step the engine in real time while it has work; set the GPU's power as it goes."""
        assert self._wake is not None
        idle = self.physics.idle_w
        start: float | None = None
        while True:
            if not self.engine.busy:
                start = None
                await self._wake.wait()
                self._wake.clear()
                continue
            with self._lock:
                step = self.engine.step(start if start is not None else time.time())
            if step is None:
                start = None
                await asyncio.sleep(0.001)
                continue
            self.power.set(step.start_s, step.power_w)
            self.power.set(step.end_s, idle)
            await asyncio.sleep(max(0.0, step.end_s - time.time()))
            end = time.time()  # woken late, the step lasted longer (at idle power)
            with self._lock:
                self.engine.stretch(step, max(0.0, end - step.end_s))
            for rid, finished in step.tokens:
                self._streams[rid].put_nowait(finished)
            start = end

    async def submit(self, prompt_tokens: int, max_tokens: int) -> tuple[int, asyncio.Queue]:
        """Queue a request; its stream gets ``finished`` flags, one per token."""
        rid = self._next_id
        self._next_id += 1
        queue: asyncio.Queue[bool] = asyncio.Queue()
        self._streams[rid] = queue
        with self._lock:
            self.engine.add(SimRequest(rid, prompt_tokens, max_tokens, time.time()))
        assert self._wake is not None
        self._wake.set()
        return rid, queue

    def metrics_text(self) -> str:
        """The Prometheus page."""
        label = f'{{model_name="{self.model}"}}'
        return (
            "# TYPE vllm:num_requests_running gauge\n"
            f"vllm:num_requests_running{label} {len(self.engine.running)}.0\n"
            "# TYPE vllm:num_requests_waiting gauge\n"
            f"vllm:num_requests_waiting{label} {len(self.engine.waiting)}.0\n"
        )


def _prompt_tokens(body: dict[str, Any]) -> int:
    if isinstance(body.get("prompt_tokens"), int):
        return max(1, body["prompt_tokens"])
    if "messages" in body:
        text = " ".join(str(m.get("content", "")) for m in body["messages"])
    else:
        text = str(body.get("prompt", ""))
    return max(1, len(text.split()))


def _app(sim: SimServer) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, StreamingResponse
    from starlette.routing import Route

    async def models(_: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": sim.model, "object": "model"}]})

    async def version(_: Request) -> JSONResponse:
        return JSONResponse({"version": SIM_VERSION})

    async def metrics(_: Request) -> PlainTextResponse:
        return PlainTextResponse(sim.metrics_text())

    async def generate(request: Request) -> Any:
        body = await request.json()
        if body.get("model") != sim.model:
            return JSONResponse({"error": {"message": "model not found"}}, status_code=404)
        if not body.get("stream"):
            return JSONResponse({"error": {"message": "stream only"}}, status_code=400)
        chat = request.url.path.endswith("chat/completions")
        prompt = _prompt_tokens(body)
        max_tokens = int(body.get("max_tokens") or 16)
        rid, queue = await sim.submit(prompt, max_tokens)

        async def stream() -> AsyncIterator[bytes]:
            sent = 0
            while True:
                finished = await queue.get()
                sent += 1
                part = {"delta": {"content": " tok"}} if chat else {"text": " tok"}
                choice = {"index": 0, **part, "finish_reason": "length" if finished else None}
                yield f"data: {json.dumps({'id': str(rid), 'choices': [choice]})}\n\n".encode()
                if finished:
                    break
            usage = {"prompt_tokens": prompt, "completion_tokens": sent}
            last = {"id": str(rid), "choices": [], "usage": usage}
            yield f"data: {json.dumps(last)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        sim._wake = asyncio.Event()
        engine = asyncio.get_running_loop().create_task(sim.run_engine())
        try:
            yield
        finally:
            engine.cancel()

    routes = [
        Route("/v1/models", models),
        Route("/version", version),
        Route("/metrics", metrics),
        Route("/v1/chat/completions", generate, methods=["POST"]),
        Route("/v1/completions", generate, methods=["POST"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


@contextmanager
def serve_sim(
    physics: SimPhysics, power: LivePower, model: str = "sim-model", start_timeout_s: float = 30.0
) -> Iterator[SimServer]:
    """Serve the emulated engine on 127.0.0.1 in a thread; stop it on exit.

    Args:
        physics: Costs and cap.
        power: The live power its GPU draws (give it to an emulated GPU).
        model: The served model name.
        start_timeout_s: Seconds to wait for the server to listen.

    Yields:
        The server; ``endpoint`` is its OpenAI base URL.
    """
    import uvicorn

    sim = SimServer(physics, power, model)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(_app(sim), log_level="warning", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="mlenergy-sim-server", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the emulated server did not start")
        time.sleep(0.01)
    sim.endpoint = f"http://127.0.0.1:{port}/v1"
    try:
        yield sim
    finally:
        server.should_exit = True
        thread.join(timeout=10.0)
        sock.close()
