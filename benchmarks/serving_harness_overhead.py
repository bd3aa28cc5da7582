r"""Serving harness overhead: client CPU per request, and whether the client limits a server.

Starts a fake OpenAI-compatible streaming server in a child process (Starlette on uvicorn,
127.0.0.1): each request streams ``--tokens`` chunks ``--itl-ms`` apart, so a client that keeps
up sees every request take ``tokens x itl`` seconds and ``concurrency`` of them in flight. The
load generator of ``mlenergy bench --endpoint`` then sends ``--requests`` requests at
``--concurrency`` (all at once, capped), and the script prints:

* the client's CPU time per request and per streamed token (its own process only: the server
  runs in another process);
* the client's ceiling: the tokens (and requests) per second one core could stream at that cost,
  which is what a server must exceed before the harness limits it;
* the client's CPU utilisation over the run (one core = 100 %);
* achieved concurrency in the steady-state window, and output throughput against what a
  client that never lags would see (``concurrency / itl`` tokens per second);
* end-to-end latency p50 against the server's own ``tokens x itl``.

Run::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/serving_harness_overhead.py \
        --concurrency 256 --requests 1024 --tokens 32 --itl-ms 100

Target: at 256 concurrent streams the client stays well under one core, holds the level
(achieved concurrency near 256) and delivers >= 95 % of the ideal throughput, so the harness does
not limit the server it measures. The fake server is one Python process: when its own CPU line
nears 100 % it, not the client, is the limit; lengthen ``--itl-ms`` until it is not. On a machine
shared with other work the wall-clock lines (throughput, latency) suffer from CPU contention that
is neither the client's nor the server's; the CPU-time lines do not.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _serve(port: int, tokens: int, itl_s: float) -> None:
    import asyncio

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--requests", type=int, default=1024)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--itl-ms", type=float, default=100.0)
    args = parser.parse_args()

    import httpx
    import psutil

    from mlenergy.workloads.serving.client import RequestOptions
    from mlenergy.workloads.serving.engine import free_port
    from mlenergy.workloads.serving.loadgen import generate_load
    from mlenergy.workloads.serving.runner import run_async
    from mlenergy.workloads.serving.steady_state import (
        SteadyStateTracker,
        mean_in_flight,
        tokens_in_window,
    )

    port = free_port()
    itl = args.itl_ms / 1000.0
    server = mp.get_context("spawn").Process(
        target=_serve, args=(port, args.tokens, itl), daemon=True
    )
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{endpoint}/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the fake server did not start")
            time.sleep(0.2)
        options = RequestOptions(endpoint, "fake", "chat", args.tokens)
        prompts = ["energy per token"] * args.requests
        tracker = SteadyStateTracker(args.concurrency)
        server_proc = psutil.Process(server.pid)
        server0 = sum(server_proc.cpu_times()[:2])
        cpu0, wall0 = time.process_time(), time.monotonic()
        load = run_async(
            lambda: generate_load(
                options, prompts, [0.0] * args.requests, args.concurrency, tracker
            )
        )
        cpu_s, wall_s = time.process_time() - cpu0, time.monotonic() - wall0
        server_cpu_s = sum(server_proc.cpu_times()[:2]) - server0
    finally:
        server.terminate()
        server.join(10)
    window = tracker.window
    tokens = sum(t.output_tokens for t in load.timings)
    ideal_tps = args.concurrency / itl
    steady_tps = tokens_in_window(load.timings, window) / window.duration_s
    e2e = statistics.median(t.end_s - t.sent_s for t in load.timings)
    print(f"requests {args.requests} at concurrency {args.concurrency}, "
          f"{args.tokens} tokens {args.itl_ms:g} ms apart")  # fmt: skip
    print(f"client CPU per request      {1e3 * cpu_s / args.requests:8.3f} ms")
    print(f"client CPU per token        {1e6 * cpu_s / tokens:8.1f} us")
    ceiling = f"{tokens / cpu_s:8.0f} tok/s ({args.requests / cpu_s:.0f} req/s)"
    print(f"client ceiling, one core    {ceiling}")
    print(f"client CPU utilisation      {100 * cpu_s / wall_s:8.1f} % of one core")
    print(f"fake server CPU utilisation {100 * server_cpu_s / wall_s:8.1f} % of one core")
    print(f"achieved concurrency        {mean_in_flight(load.timings, window):8.1f} "
          f"(level {args.concurrency})")  # fmt: skip
    print(f"steady throughput           {steady_tps:8.0f} tok/s "
          f"({100 * steady_tps / ideal_tps:.1f} % of the ideal {ideal_tps:.0f})")  # fmt: skip
    print(f"e2e latency p50             {e2e:8.3f} s (server alone: {args.tokens * itl:.3f} s)")


if __name__ == "__main__":
    main()
