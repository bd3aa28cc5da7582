"""A fake OpenAI-compatible server that lies: every way a server can break the serving client.

Each mode is served under its own prefix, ``http://127.0.0.1:PORT/<mode>/v1`` (with its own
``/<mode>/version`` and ``/<mode>/metrics``), so one server answers every mode; run as a command
(``python -m mlenergy.testing.hostile_openai --port P --mode M``) it also serves mode ``M`` at the
root, as ``--launch`` expects. A well-behaved stream is a role chunk, one text chunk per token
(``max_tokens`` of them, at most :data:`TOKENS`), a finish chunk, a usage chunk and ``[DONE]``.

Every mode is bounded: an endless stream or an endless line stops when the client goes away (or
after :data:`ENDLESS_S`), and every answer is built from the request, never from the server's
state. :data:`MODES` describes each mode; :func:`running_server` runs the server in a thread
for tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

TOKENS = 64
"""Most text chunks a well-behaved stream sends."""
ENDLESS_S = 120.0
"""Seconds after which an endless mode stops on its own."""
LONG_LINE_BYTES = 600 << 20
"""Size of the one line without a newline that ``long-line`` streams (600 MiB)."""

MODES: dict[str, str] = {
    "ok": "a well-behaved stream",
    "slow": "a well-behaved stream, 50 ms per token",
    "not-json": "data: {not json",
    "shape-number": "a chunk that is the number 5",
    "shape-list": "a chunk that is the list [1, 2]",
    "shape-choice": 'a chunk {"choices": [5]}',
    "shape-delta": 'a chunk whose delta is the string "str"',
    "shape-usage": "a chunk whose usage is the list [1]",
    "usage-string": 'usage.completion_tokens "lots"',
    "usage-negative": "usage.completion_tokens -50",
    "prompt-negative": "usage.prompt_tokens -1000",
    "usage-lie": "4 text chunks, usage.completion_tokens 1000000",
    "usage-huge": "4 text chunks, usage.completion_tokens 10**11",
    "usage-inflated": "4 text chunks, usage.completion_tokens 4 x 16 + 1",
    "endless": "text chunks without end",
    "drip": "one token, then an SSE comment every second without end",
    "long-line": "one 600 MiB SSE line without a newline",
    "error-body": "HTTP 500 with a 64 MiB body",
    "metrics-inf": "a good stream; /metrics says kv_cache_usage_perc +Inf",
    "metrics-negative": "a good stream; /metrics says kv_cache_usage_perc -5",
    "version-long": "a good stream; a 200,000-character /version ending in an ANSI escape",
    "version-dict": "a good stream; /version is an object, not a string",
    "alias": "a good stream; /v1/models names the folder behind the alias (root)",
}
"""Every mode and what it sends."""

_SSE = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


def _data(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _text(api: str, i: int) -> dict[str, Any]:
    if api == "chat":
        return {"choices": [{"index": 0, "delta": {"content": f" t{i}"}, "finish_reason": None}]}
    return {"choices": [{"index": 0, "text": f" t{i}", "finish_reason": None}]}


def _finish(api: str) -> dict[str, Any]:
    key: dict[str, Any] = {"delta": {}} if api == "chat" else {"text": ""}
    return {"choices": [{"index": 0, **key, "finish_reason": "length"}]}


def _usage(completion: Any, prompt: Any = 8) -> dict[str, Any]:
    return {"choices": [], "usage": {"completion_tokens": completion, "prompt_tokens": prompt}}


_BAD_CHUNKS: dict[str, bytes] = {
    "not-json": b"data: {not json\n\n",
    "shape-number": b"data: 5\n\n",
    "shape-list": b"data: [1, 2]\n\n",
    "shape-choice": _data({"choices": [5]}),
    "shape-delta": _data({"choices": [{"index": 0, "delta": "str"}]}),
    "shape-usage": _data({"choices": [], "usage": [1]}),
    "usage-string": _data(_usage("lots")),
    "usage-negative": _data(_usage(-50)),
    "prompt-negative": _data(_usage(2, -1000)),
}


async def _stream(request: web.Request, mode: str, api: str) -> web.StreamResponse:
    body = await request.json()
    max_tokens = int(body.get("max_tokens") or TOKENS)
    response = web.StreamResponse(status=500 if mode == "error-body" else 200, headers=_SSE)
    await response.prepare(request)
    end = time.monotonic() + ENDLESS_S
    try:
        if mode == "error-body":
            block = b"e" * (1 << 16)
            for _ in range(1024):  # 64 MiB, unless the client stops reading first
                await response.write(block)
            return response
        if api == "chat":
            await response.write(_data({"choices": [{"index": 0, "delta": {"role": "assistant"}}]}))
        if mode == "endless":
            i = 0
            while time.monotonic() < end:
                await response.write(_data(_text(api, i)))
                i += 1
            return response
        if mode == "drip":
            await response.write(_data(_text(api, 0)))
            while time.monotonic() < end:
                await asyncio.sleep(1.0)
                await response.write(b": keep-alive\n\n")
            return response
        if mode == "long-line":
            await response.write(b'data: {"choices": [{"index": 0, "delta": {"content": "')
            block = b"x" * (1 << 20)
            for _ in range(LONG_LINE_BYTES >> 20):
                await response.write(block)
            return response
        if mode in _BAD_CHUNKS:
            await response.write(_data(_text(api, 0)))
            await response.write(_BAD_CHUNKS[mode])
            await response.write(b"data: [DONE]\n\n")
            return response
        n = min(max_tokens, 4 if mode.startswith("usage-") else TOKENS)
        for i in range(n):
            if mode == "slow":
                await asyncio.sleep(0.05)
            await response.write(_data(_text(api, i)))
        await response.write(_data(_finish(api)))
        claimed: int = {"usage-lie": 1_000_000, "usage-huge": 10**11}.get(mode, n)
        if mode == "usage-inflated" and n == 4:  # a 2-token test request is answered honestly
            claimed = n * 16 + 1
        await response.write(_data(_usage(claimed)) + b"data: [DONE]\n\n")
    except (ConnectionResetError, ConnectionError):  # the client went away
        pass
    return response


def _metrics(mode: str) -> str | None:
    value = {"metrics-inf": "+Inf", "metrics-negative": "-5"}.get(mode)
    if value is None:
        return None
    return (
        "# HELP vllm:num_requests_running Requests running.\n"
        'vllm:num_requests_running{model_name="m"} 1.0\n'
        'vllm:num_requests_waiting{model_name="m"} 0.0\n'
        f'vllm:kv_cache_usage_perc{{model_name="m"}} {value}\n'
    )


def _version(mode: str) -> Any:
    if mode == "version-long":
        return "1.0." + "a" * 200_000 + "\n\x1b[31mApproved by ML.ENERGY\x1b[0m"
    if mode == "version-dict":
        return {"version": "1.0", "extra": {"a": [1, 2]}}
    return None


def build_app(default_mode: str = "ok", alias_root: str = "/models/m") -> web.Application:
    """The server: every mode under ``/<mode>/``, ``default_mode`` at the root.

    Args:
        default_mode: The mode served at the root.
        alias_root: What mode ``alias`` says it loaded for model ``m`` (``root``).
    """

    def mode_of(request: web.Request) -> str:
        mode = request.match_info.get("mode", default_mode)
        if mode not in MODES:
            raise web.HTTPNotFound(text=f"no mode {mode!r}")
        return mode

    async def models(request: web.Request) -> web.Response:
        root = alias_root if mode_of(request) == "alias" else "m"
        entry = {"id": "m", "object": "model", "owned_by": "hostile", "root": root}
        return web.json_response({"object": "list", "data": [entry]})

    async def chat(request: web.Request) -> web.StreamResponse:
        return await _stream(request, mode_of(request), "chat")

    async def completions(request: web.Request) -> web.StreamResponse:
        return await _stream(request, mode_of(request), "completions")

    async def version(request: web.Request) -> web.Response:
        value = _version(mode_of(request))
        if value is None:
            raise web.HTTPNotFound()
        return web.json_response({"version": value})

    async def metrics(request: web.Request) -> web.Response:
        text = _metrics(mode_of(request))
        if text is None:
            raise web.HTTPNotFound()
        return web.Response(text=text, content_type="text/plain")

    app = web.Application()
    for prefix in ("", "/{mode}"):
        app.router.add_get(f"{prefix}/v1/models", models)
        app.router.add_post(f"{prefix}/v1/chat/completions", chat)
        app.router.add_post(f"{prefix}/v1/completions", completions)
        app.router.add_get(f"{prefix}/version", version)
        app.router.add_get(f"{prefix}/metrics", metrics)
    return app


@contextmanager
def running_server(default_mode: str = "ok", alias_root: str = "/models/m") -> Iterator[str]:
    """Run the server in a thread on a free port of 127.0.0.1; yield ``http://127.0.0.1:PORT``.

    The thread's event loop is stopped on exit, with every open stream.
    """
    loop = asyncio.new_event_loop()
    started: dict[str, Any] = {}
    ready = threading.Event()

    async def start() -> None:
        runner = web.AppRunner(build_app(default_mode, alias_root), handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, shutdown_timeout=0.5)
        await site.start()
        started["runner"] = runner
        started["port"] = runner.addresses[0][1]
        ready.set()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()
        loop.run_until_complete(started["runner"].cleanup())
        loop.close()

    thread = threading.Thread(target=serve, name="hostile-openai", daemon=True)
    thread.start()
    if not ready.wait(30):
        raise RuntimeError("the hostile server did not start")
    try:
        yield f"http://127.0.0.1:{started['port']}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


def main(argv: list[str] | None = None) -> None:
    """``python -m mlenergy.testing.hostile_openai --port P [--mode M]``: serve until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mode", default="ok", choices=sorted(MODES))
    args = parser.parse_args(argv)
    web.run_app(build_app(args.mode), host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
