"""The leaderboard under load: light clients against the JSON API, then the Gradio call API.

Usage::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/leaderboard_concurrency.py
        [--clients 50] [--duration 60] [--procs 4] [--apis json,gradio] [--workers 1]

Serves an empty temporary store (the app shows ML.ENERGY's 830 reference runs beside it) with
``mlenergy leaderboard`` on 127.0.0.1 and runs ``--clients`` clients (threads spread over
``--procs`` processes), each on one kept-alive HTTP connection, calling back to back with no
pause for ``--duration`` seconds: first against the JSON API (``GET /api/v1/...``), then,
separately, against Gradio's documented call API (``POST /gradio_api/call/<name>`` then its
event stream ``GET /gradio_api/call/<name>/<event_id>``). Each client draws, per call:

- ``leaderboard``: the table with its defaults (the page's opening view), 40%;
- ``leaderboard+filters``: a hardware filter, sort and direction drawn from the store's
  choices (48 distinct queries), 20%;
- ``estimate``: the estimator with its defaults, 20%;
- ``run``: one run's provenance and power timeline, drawn from 50 run ids, 15%;
- ``models``: every model on the board, 5%.

So after a first call each answer is memoised, as for a board read by many. It prints per
API and endpoint: calls/s, p50/p95/p99 latency, errors, and the server's and the clients' CPU
time per call, with the load average of the machine (server and clients share its cores).
Goal on the JSON API: p95 under 1 s and no error.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import resource
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlencode, urlsplit

os.environ.setdefault("OMP_NUM_THREADS", "1")

from mlenergy.testing.server import serve_leaderboard

ENDPOINTS = ("leaderboard", "leaderboard+filters", "estimate", "run", "models")
WEIGHTS = (0.40, 0.20, 0.20, 0.15, 0.05)
GOAL_P95_S = 1.0
SORTS = ("energy_per_token_j", "itl_ms", "tokens_per_j", "model_id")


class Conn:
    """One kept-alive HTTP/1.1 connection to the server (reopened if the server closes it)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)

    def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """Send one request; return the status and the whole body."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        for attempt in (0, 1):
            try:
                self.conn.request(method, path, body=body, headers=headers)
                resp = self.conn.getresponse()
                return resp.status, resp.read()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
                if attempt:
                    raise
        raise AssertionError("unreachable")


class Client:
    """One simulated program: a connection, the API it uses and the choices it draws from."""

    def __init__(self, url: str, api: str, setup: dict, seed: int) -> None:
        self.conn, self.api = Conn(url), api
        self.choices, self.runs, self.params = setup["choices"], setup["runs"], setup["params"]
        self.rng = random.Random(seed)

    def args(self, endpoint: str) -> tuple[str, dict]:
        """The function and the named arguments of one call to ``endpoint``."""
        r = self.rng
        if endpoint == "leaderboard":
            return "leaderboard_table", {}
        if endpoint == "leaderboard+filters":
            return "leaderboard_table", {
                "hardware": [r.choice(self.choices["hardware"])],
                "sort_by": r.choice(SORTS),
                "descending": r.random() < 0.5,
            }
        if endpoint == "estimate":
            return "estimate", {}
        if endpoint == "run":
            return "provenance", {"run_id": r.choice(self.runs)}
        return "models", {}

    def call(self, endpoint: str) -> None:
        """Make one call; raise on any failure (a status other than 200, an error event)."""
        name, args = self.args(endpoint)
        if self.api == "json":
            status, body = self.conn.request("GET", json_path(name, args))
            if status != 200:
                raise RuntimeError(f"HTTP {status}: {body[:120]!r}")
            return
        gradio_call(self.conn, name, args, self.params)


def json_path(name: str, args: dict) -> str:
    """The JSON API path of one call."""
    if name == "provenance":
        return f"/api/v1/runs/{args['run_id']}"
    route = {"leaderboard_table": "leaderboard", "estimate": "estimate", "models": "models"}[name]
    query = {k: ",".join(v) if isinstance(v, list) else str(v).lower() for k, v in args.items()}
    return f"/api/v1/{route}" + (f"?{urlencode(query)}" if query else "")


def gradio_call(conn: Conn, name: str, args: dict, params: dict[str, list]) -> dict:
    """One call through Gradio's call API; return the answer.

    Args:
        conn: The connection.
        name: The endpoint.
        args: Named arguments; the others take their defaults.
        params: Each endpoint's ``(name, default)`` pairs in order (see :func:`gradio_params`).
    """
    data = [args.get(p, default) for p, default in params[name]]
    status, body = conn.request(
        "POST", f"/gradio_api/call/{name}", json.dumps({"data": data}).encode("utf-8")
    )
    if status != 200:
        raise RuntimeError(f"HTTP {status} on the call: {body[:120]!r}")
    event_id = json.loads(body)["event_id"]
    status, body = conn.request("GET", f"/gradio_api/call/{name}/{event_id}")
    text = body.decode("utf-8")
    if status != 200 or "event: complete" not in text:
        raise RuntimeError(f"HTTP {status}, no complete event: {text[-160:]!r}")
    data = text.split("event: complete", 1)[1].split("data:", 1)[1].strip()
    return json.loads(data)[0]


def client_loop(client: Client, stop_at: float, out: list) -> None:
    """Call until ``stop_at`` (monotonic seconds); record ``(endpoint, seconds, error)``."""
    while time.monotonic() < stop_at:
        endpoint = client.rng.choices(ENDPOINTS, WEIGHTS)[0]
        start = time.perf_counter()
        try:
            client.call(endpoint)
            out.append((endpoint, time.perf_counter() - start, ""))
        except Exception as exc:  # every failure is counted and shown, never hidden
            out.append((endpoint, time.perf_counter() - start, f"{type(exc).__name__}: {exc}"))


def run_process(
    urls: list[str], api: str, clients: int, duration_s: float, first: int, setup: dict
) -> tuple[list, float]:
    """One load process: ``clients`` threads; return the calls and the process's CPU seconds.

    Client ``first + i`` talks to ``urls[(first + i) % len(urls)]`` (as a sticky balancer would).
    """
    cpu0 = _own_cpu()
    group = [Client(urls[(first + i) % len(urls)], api, setup, first + i) for i in range(clients)]
    out: list = []
    stop_at = time.monotonic() + duration_s
    threads = [threading.Thread(target=client_loop, args=(c, stop_at, out)) for c in group]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out, _own_cpu() - cpu0


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``values`` by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def report(api: str, results: list, elapsed_s: float, server_cpu: float, client_cpu: float) -> bool:
    """Print one API's figures; return whether it met the goal (no error, every p95 < 1 s)."""
    n = len(results)
    title = "JSON API (GET /api/v1/...)" if api == "json" else "Gradio call API (POST + stream)"
    print(f"\n{title}: {n} calls in {elapsed_s:.1f} s, {n / elapsed_s:.1f} calls/s")
    print("| endpoint | calls/s | p50 (ms) | p95 (ms) | p99 (ms) | errors |")
    print("|---|---|---|---|---|---|")
    ok, errors = n > 0, {}
    for endpoint in ENDPOINTS:
        rows = [r for r in results if r[0] == endpoint]
        if not rows:
            continue
        times = [r[1] for r in rows]
        bad = [r[2] for r in rows if r[2]]
        for e in bad:
            errors[e[:160]] = errors.get(e[:160], 0) + 1
        p50, p95, p99 = (percentile(times, q) * 1000 for q in (0.5, 0.95, 0.99))
        ok &= not bad and p95 < GOAL_P95_S * 1000
        print(
            f"| `{endpoint}` | {len(rows) / elapsed_s:.1f} | {p50:.0f} | {p95:.0f} | {p99:.0f} "
            f"| {len(bad)} |"
        )
    for line, count in sorted(errors.items(), key=lambda kv: -kv[1]):
        print(f"  error x{count}: {line}")
    per = 1000 / max(1, n)
    print(
        f"server CPU {server_cpu * per:.1f} ms per call ({server_cpu:.1f} s), clients' CPU "
        f"{client_cpu * per:.1f} ms per call ({client_cpu:.1f} s); load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(f"goal (no error, every p95 < {GOAL_P95_S:g} s): {'met' if ok else 'NOT met'}")
    return ok


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def setup_choices(url: str) -> dict:
    """What the clients draw from: filter values, 50 run ids, the Gradio endpoints' parameters."""
    conn = Conn(url)
    status, body = conn.request("GET", "/api/v1/filters")
    if status != 200:
        raise RuntimeError(f"/api/v1/filters answered HTTP {status}")
    choices = json.loads(body)
    status, body = conn.request("GET", "/api/v1/leaderboard?sources=all&task=all&best=false")
    runs = [r["run_id"] for r in json.loads(body)["rows"]]
    status, body = conn.request("GET", "/gradio_api/info")
    endpoints = json.loads(body)["named_endpoints"]
    params = {
        name.lstrip("/"): [(p["parameter_name"], p["parameter_default"]) for p in e["parameters"]]
        for name, e in endpoints.items()
    }
    return {
        "choices": choices,
        "runs": random.Random(0).sample(runs, min(50, len(runs))),
        "params": params,
    }


def load(urls: list[str], pids: list[int], api: str, args, setup: dict) -> bool:
    """Run the clients of one API against ``urls``; print and return whether the goal was met."""
    procs = max(1, min(args.procs, args.clients))
    share = [args.clients // procs + (i < args.clients % procs) for i in range(procs)]
    for url in urls:  # warm: every distinct answer once, so the run measures the memoised path
        warm = Client(url, api, setup, 0)
        for endpoint in ENDPOINTS:
            for _ in range(3):
                warm.call(endpoint)
    server0 = sum(cpu_seconds(pid) for pid in pids)
    start = time.monotonic()
    with ProcessPoolExecutor(procs) as pool:
        futures = [
            pool.submit(run_process, urls, api, n, args.duration, sum(share[:i]), setup)
            for i, n in enumerate(share)
        ]
        parts = [f.result() for f in futures]
    elapsed = time.monotonic() - start
    server_cpu = sum(cpu_seconds(pid) for pid in pids) - server0
    results = [r for out, _ in parts for r in out]
    return report(api, results, elapsed, server_cpu, sum(cpu for _, cpu in parts))


def main() -> int:
    """Parse options, serve the reference, load each API in turn, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load per API")
    parser.add_argument("--procs", type=int, default=4, help="load-generating processes")
    parser.add_argument("--apis", default="json,gradio", help="json, gradio or both, in order")
    parser.add_argument(
        "--workers", type=int, default=1, help="server processes (client i uses worker i mod N)"
    )
    args = parser.parse_args()
    apis = [a.strip() for a in args.apis.split(",") if a.strip()]
    if not apis or any(a not in ("json", "gradio") for a in apis):
        print("error: --apis takes json, gradio or json,gradio", file=sys.stderr)
        return 2
    if args.clients < 1 or args.duration <= 0 or args.workers < 1:
        print("error: --clients, --duration and --workers must be positive", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="mlenergy-load-") as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        pids: list[int] = []
        with ExitStack() as stack:
            urls = [
                stack.enter_context(
                    serve_leaderboard(
                        data_dir, log_path=Path(tmp) / f"server-{i}.log", on_start=pids.append
                    )
                )
                for i in range(args.workers)
            ]
            print(
                f"serving the reference (830 runs) on {', '.join(urls)}; {args.clients} clients "
                f"in {min(args.procs, args.clients)} processes, {args.duration:g} s per API; "
                f"load average {os.getloadavg()[0]:.1f} before"
            )
            setup = setup_choices(urls[0])
            met = [load(urls, pids, api, args, setup) for api in apis]
    return 0 if met[0] or apis[0] != "json" else 1


if __name__ == "__main__":
    sys.exit(main())
