r"""Serving harness overhead: the client's CPU per token against a bare loop, and its ceiling.

Two fake OpenAI-compatible servers run in child processes on 127.0.0.1:

* **paced** (Starlette on uvicorn): each request streams ``--tokens`` chunks ``--itl-ms`` apart,
  as a GPU server would, so ``--concurrency`` requests are in flight;
* **fast** (a bare asyncio protocol): each request's whole stream of ``--fast-tokens`` chunks is
  written at once, so the client, not the server, sets the pace.

Against each, the same requests are read twice in one run: by a **bare aiohttp SSE loop** (lines
of ``response.content``, each ``data:`` parsed with the same JSON parser, one timestamp per text
chunk, nothing checked: the least a client that times tokens must do) and by the **load
generator** of ``mlenergy bench --endpoint`` (schema checks, bounds, deadlines, the steady-state
tracker). The script prints the CPU per streamed token of each (its own processes only: the
servers run elsewhere) and their ratio, the target being at most 1.5. Against the fast server it
also prints the sustained tokens per second of the load generator in one process, in
``--procs`` worker processes, and with ``--client-procs auto``.

Run::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/serving_harness_overhead.py \
        --concurrency 256 --requests 1024 --tokens 32 --itl-ms 100

On a machine shared with other work the wall-clock lines (throughput, latency) suffer from CPU
contention that is neither the client's nor the server's; the CPU-time lines do not. The fast
server and the client share the machine's cores: the tokens/s lines are a floor of what the
client sustains against a real server on another machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import resource
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _serve_paced(port: int, tokens: int, itl_s: float) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    async def models(_request):
        return JSONResponse({"object": "list", "data": [{"id": "fake", "owned_by": "bench"}]})

    async def chat(request):
        body = await request.json()
        n = min(tokens, int(body.get("max_tokens") or tokens))

        async def stream():
            for i in range(n):
                await asyncio.sleep(itl_s)
                chunk = {"choices": [{"index": 0, "delta": {"content": f" t{i}"}}]}
                yield f"data: {json.dumps(chunk)}\n\n"
            done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
            yield f"data: {json.dumps(done)}\n\n"
            usage = {"choices": [], "usage": {"completion_tokens": n, "prompt_tokens": 8}}
            yield f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    app = Starlette(
        routes=[Route("/v1/models", models), Route("/v1/chat/completions", chat, methods=["POST"])]
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)


def _sse_body(n: int) -> bytes:
    chunks = [
        b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,'
        b'"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
    ]
    for i in range(n):
        chunks.append(
            b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,'
            b'"delta":{"content":" t%d"},"finish_reason":null}]}\n\n' % i
        )
    chunks.append(
        b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,'
        b'"delta":{},"finish_reason":"length"}]}\n\n'
    )
    chunks.append(
        b'data: {"id":"x","object":"chat.completion.chunk","choices":[],'
        b'"usage":{"prompt_tokens":8,"completion_tokens":%d}}\n\ndata: [DONE]\n\n' % n
    )
    return b"".join(chunks)


def _serve_fast(port: int) -> None:
    """HTTP/1.1 keep-alive, each answer written whole: as fast as one process can stream."""
    models = json.dumps({"object": "list", "data": [{"id": "fake"}]}).encode()
    cache: dict[int, bytes] = {}

    def answer(body: bytes, status: bytes = b"200 OK", kind: bytes = b"text/event-stream"):
        return (
            b"HTTP/1.1 " + status + b"\r\nContent-Type: " + kind + b"\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\nConnection: keep-alive\r\n\r\n" + body
        )  # fmt: skip

    class Protocol(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport, self.buf = transport, b""

        def data_received(self, data):
            self.buf += data
            while True:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                head = self.buf[:end].lower()
                length = 0
                at = head.find(b"content-length:")
                if at >= 0:
                    length = int(head[at + 15 :].split(b"\r\n", 1)[0])
                if len(self.buf) < end + 4 + length:
                    return
                body, self.buf = self.buf[end + 4 : end + 4 + length], self.buf[end + 4 + length :]
                if head.startswith(b"get"):
                    self.transport.write(answer(models, kind=b"application/json"))
                    continue
                n = int(json.loads(body).get("max_tokens") or 16)
                if n not in cache:
                    cache[n] = answer(_sse_body(n))
                self.transport.write(cache[n])

    async def main():
        server = await asyncio.get_running_loop().create_server(
            Protocol, "127.0.0.1", port, backlog=4096
        )
        await server.serve_forever()

    asyncio.run(main())


def _start(target, *args) -> tuple[mp.Process, str]:
    import httpx

    from mlenergy.workloads.serving.engine import free_port

    port = free_port()
    process = mp.get_context("spawn").Process(target=target, args=(port, *args), daemon=True)
    process.start()
    endpoint = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{endpoint}/models", timeout=1).status_code == 200:
                return process, endpoint
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("a fake server did not start")
        time.sleep(0.2)


def _cpu_s() -> float:
    """CPU seconds of this process and of its reaped children (the client's workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


async def _bare(endpoint: str, requests: int, level: int, tokens: int) -> int:
    """The bare loop: aiohttp lines, JSON parsed, one timestamp per text chunk."""
    import aiohttp

    from mlenergy.workloads.serving.chunks import _loads

    body = json.dumps({
        "model": "fake", "stream": True, "max_tokens": tokens,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "energy per token"}],
    }).encode()  # fmt: skip
    headers = {"Content-Type": "application/json"}
    slots = asyncio.Semaphore(level)
    connector = aiohttp.TCPConnector(limit=level + 4)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one() -> int:
            times: list[float] = []
            async with (
                slots,
                session.post(f"{endpoint}/chat/completions", data=body, headers=headers) as r,
            ):
                async for line in r.content:
                    if line.startswith(b"data:"):
                        data = line[5:].strip()
                        if data == b"[DONE]":
                            break
                        choices = _loads(data).get("choices")
                        if choices and (choices[0].get("delta") or {}).get("content"):
                            times.append(time.time())
            return len(times)

        counts = await asyncio.gather(*(one() for _ in range(requests)))
    return sum(counts)


def _client(endpoint: str, requests: int, level: int, tokens: int, procs: int | None):
    from mlenergy.workloads.serving.client import RequestOptions
    from mlenergy.workloads.serving.loadgen import generate_load
    from mlenergy.workloads.serving.runner import run_async
    from mlenergy.workloads.serving.steady_state import SteadyStateTracker

    options = RequestOptions(endpoint, "fake", "chat", tokens)
    tracker = SteadyStateTracker(level)
    load = run_async(
        lambda: generate_load(
            options, ["energy per token"] * requests, [0.0] * requests, level, tracker,
            client_procs=procs,
        )
    )  # fmt: skip
    return load, tracker


def _timed(fn):
    cpu0, wall0 = _cpu_s(), time.monotonic()
    out = fn()
    return out, _cpu_s() - cpu0, time.monotonic() - wall0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--requests", type=int, default=1024)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--itl-ms", type=float, default=100.0)
    parser.add_argument("--fast-concurrency", type=int, default=64)
    parser.add_argument("--fast-requests", type=int, default=1024)
    parser.add_argument("--fast-tokens", type=int, default=256)
    parser.add_argument("--procs", type=int, default=2, help="worker processes to try")
    args = parser.parse_args()

    import aiohttp  # noqa: F401  (imported before any CPU is counted)
    import psutil

    import mlenergy.workloads.serving.runner  # noqa: F401
    from mlenergy.workloads.serving.steady_state import mean_in_flight, tokens_in_window

    # ---------------------------------------------------------------- paced server
    itl = args.itl_ms / 1000.0
    server, endpoint = _start(_serve_paced, args.tokens, itl)
    try:
        _client(endpoint, args.concurrency, args.concurrency, 2, 1)  # warm-up
        asyncio.run(_bare(endpoint, args.concurrency, args.concurrency, 2))
        server_proc = psutil.Process(server.pid)
        server0 = sum(server_proc.cpu_times()[:2])
        (load, tracker), cpu_s, wall_s = _timed(
            lambda: _client(endpoint, args.requests, args.concurrency, args.tokens, 1)
        )
        server_cpu_s = sum(server_proc.cpu_times()[:2]) - server0
        bare_tokens, bare_cpu_s, _ = _timed(
            lambda: asyncio.run(_bare(endpoint, args.requests, args.concurrency, args.tokens))
        )
    finally:
        server.terminate()
        server.join(10)
    window = tracker.window
    tokens = sum(t.output_tokens for t in load.timings)
    ideal_tps = args.concurrency / itl
    steady_tps = tokens_in_window(load.timings, window) / window.duration_s
    e2e = statistics.median(t.end_s - t.sent_s for t in load.timings)
    client_us, bare_us = 1e6 * cpu_s / tokens, 1e6 * bare_cpu_s / bare_tokens
    print(f"paced server: {args.requests} requests at concurrency {args.concurrency}, "
          f"{args.tokens} tokens {args.itl_ms:g} ms apart")  # fmt: skip
    print(f"client CPU per request      {1e3 * cpu_s / args.requests:8.3f} ms")
    print(f"client CPU per token        {client_us:8.1f} us")
    print(f"bare aiohttp loop per token {bare_us:8.1f} us")
    print(f"client / bare loop          {client_us / bare_us:8.2f} x (target <= 1.5)")
    ceiling = f"{tokens / cpu_s:8.0f} tok/s ({args.requests / cpu_s:.0f} req/s)"
    print(f"client ceiling, one core    {ceiling}")
    print(f"client CPU utilisation      {100 * cpu_s / wall_s:8.1f} % of one core")
    print(f"fake server CPU utilisation {100 * server_cpu_s / wall_s:8.1f} % of one core")
    print(f"achieved concurrency        {mean_in_flight(load.timings, window):8.1f} "
          f"(level {args.concurrency})")  # fmt: skip
    print(f"steady throughput           {steady_tps:8.0f} tok/s "
          f"({100 * steady_tps / ideal_tps:.1f} % of the ideal {ideal_tps:.0f})")  # fmt: skip
    print(f"e2e latency p50             {e2e:8.3f} s (server alone: {args.tokens * itl:.3f} s)")

    # ---------------------------------------------------------------- fast server
    n, level, k = args.fast_requests, args.fast_concurrency, args.fast_tokens
    server, endpoint = _start(_serve_fast)
    rows = []
    try:
        _client(endpoint, level, level, k, 1)  # warm-up: the server's cache, the client's
        asyncio.run(_bare(endpoint, level, level, k))
        bare = _timed(lambda: asyncio.run(_bare(endpoint, n, level, k)))
        bare_tokens, bare_cpu_s, bare_wall = bare
        rows.append(("bare aiohttp loop", 1, bare_tokens, bare_cpu_s, bare_wall, float("nan")))
        for label, procs in (("client", 1), ("client", args.procs), ("client auto", None)):
            run = _timed(lambda procs=procs: _client(endpoint, n, level, k, procs))
            (load, tracker), cpu, wall = run
            got = sum(t.output_tokens for t in load.timings)
            w = tracker.window
            steady = tokens_in_window(load.timings, w) / w.duration_s if w else float("nan")
            rows.append((label, load.client_procs, got, cpu, wall, steady))
    finally:
        server.terminate()
        server.join(10)
    print()
    print(f"fast server: {n} requests at concurrency {level}, {k} tokens each, written at once")
    print("(CPU and tok/s over the whole load, worker start-up included; steady: inside the "
          "steady-state window)")  # fmt: skip
    head = f"{'reader':18s} {'procs':>5s} {'CPU us/token':>12s} {'x bare CPU':>10s}"
    print(f"{head} {'tok/s':>9s} {'steady tok/s':>12s}")
    base_us = 1e6 * bare_cpu_s / bare_tokens
    for label, procs, got, cpu, wall, steady in rows:
        us = 1e6 * cpu / got
        print(f"{label:18s} {procs:5d} {us:12.2f} {us / base_us:10.2f} {got / wall:9.0f} "
              f"{steady:12.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
