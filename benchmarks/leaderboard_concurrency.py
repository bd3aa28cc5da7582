"""The leaderboard under load: N concurrent clients for D seconds against a served app.

Usage::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/leaderboard_concurrency.py
        [--clients 50] [--duration 60] [--max-requests 20000] [--reference DIR]

Serves an empty temporary store (the app shows ML.ENERGY's reference measurements beside it)
with ``mlenergy leaderboard`` on 127.0.0.1 (loopback only) and
runs the clients in ``--procs`` processes of threads. Each client loops, picking at random: a
page load (``GET /`` and ``GET /theme.css`` on a new connection: what a returning visitor's
browser fetches, its static assets being cached), ``/leaderboard_table`` with random filters
and sort, ``/estimate``, ``/plot``, ``/model_detail``, ``/provenance`` and, rarely,
``/reload``, all through ``gradio_client``, with no pause between calls. With ``--workers N``
it serves N processes and spreads the clients over them, as a sticky load balancer would. It
stops after ``--duration`` seconds or ``--max-requests`` calls, whichever comes first, and
prints throughput, p50/p95/p99 latency per call kind, the errors, and the CPU time of the
server and of the load generator. Goal: no error and every p95 under 1 s. The load generator
runs on the same machine as the server and shares its cores.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import tempfile
import threading
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from mlenergy.testing.server import serve_leaderboard

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("page", "table", "estimate", "plot", "detail", "provenance", "reload")
WEIGHTS = (0.20, 0.40, 0.14, 0.12, 0.07, 0.06, 0.01)
GOAL_P95_S = 1.0
PAGE_PATHS = ("", "theme.css")
"""What a returning visitor's browser asks the app for (its ~90 static assets are cached)."""


def seed_store(reference: Path | None, data_dir: Path) -> None:
    """An empty store: the app shows the reference layer beside it (no import step).

    ``reference`` (a folder laid out like the shipped one) is passed to the server as
    ``$MLENERGY_REFERENCE_DIR``; ``None`` keeps the reference shipped with mlenergy.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    if reference is not None:
        os.environ["MLENERGY_REFERENCE_DIR"] = str(reference)


class Caller:
    """One simulated visitor: a gradio_client Client and the choices it draws from."""

    def __init__(self, url: str, choices: dict, runs: list[str], rng: random.Random) -> None:
        from gradio_client import Client

        self.url, self.choices, self.runs, self.rng = url, choices, runs, rng
        self.client = Client(url, verbose=False, ssl_verify=False)  # loopback HTTP: no CA load

    def call(self, kind: str) -> None:
        """Make one call of ``kind``; raise on any failure."""
        getattr(self, f"_{kind}")()

    def _page(self) -> None:
        import httpx

        with httpx.Client(timeout=60, verify=False) as http:  # a new visitor: a new connection
            for path in PAGE_PATHS:
                http.get(self.url + path).raise_for_status()

    def _table(self) -> None:
        ch, r = self.choices, self.rng
        kwargs = {"task": r.choice([None, "all", *ch["task"]]), "sort_by": r.choice(ch["sort_by"])}
        if r.random() < 0.5:
            kwargs["hardware"] = r.sample(ch["hardware"], k=1)
        if r.random() < 0.3:
            kwargs["best"] = False
            kwargs["page"] = r.randint(1, 3)
        if r.random() < 0.3:
            kwargs["search"] = r.choice(["llama", "qwen", "deepseek", "gpt", "mistral"])
        kwargs["descending"] = r.random() < 0.5
        if ch["quality"] and r.random() < 0.3:  # a published benchmark or a stored figure
            kwargs["quality"] = r.choice(ch["quality"])
        self.client.predict(**kwargs, api_name="/leaderboard_table")

    def _estimate(self) -> None:
        r = self.rng
        self.client.predict(
            model="meta-llama/Llama-3.1-8B-Instruct",
            gpu=r.choice(["H100-SXM5-80GB", "B200"]),
            batch_size=r.choice([1, 8, 32, 64, 128]),  # all fit in one GPU's memory
            input_tokens=r.choice([128, 512, 1024]),
            output_tokens=r.choice([128, 512, 1024]),
            api_name="/estimate",
        )

    def _plot(self) -> None:
        r = self.rng
        hardware = r.sample(self.choices["hardware"], k=1) if r.random() < 0.5 else None
        kind = r.choice(["latency", "hardware", "quality"])
        quality = r.choice(self.choices["quality"]) if self.choices["quality"] else None
        quality = quality if kind == "quality" and r.random() < 0.5 else None
        self.client.predict(kind=kind, hardware=hardware, quality=quality, api_name="/plot")

    def _detail(self) -> None:
        model = self.rng.choice(self.choices["model_id"])
        self.client.predict(model_id=model, api_name="/model_detail")

    def _provenance(self) -> None:
        self.client.predict(run_id=self.rng.choice(self.runs), api_name="/provenance")

    def _reload(self) -> None:
        self.client.predict(api_name="/reload")


def client_loop(caller: Caller, stop_at: float, budget: list, out: list, lock) -> None:
    """Call until ``stop_at`` (monotonic seconds) or until the shared budget is spent."""
    while time.monotonic() < stop_at:
        with lock:
            if budget[0] <= 0:
                return
            budget[0] -= 1
        kind = caller.rng.choices(KINDS, WEIGHTS)[0]
        start = time.perf_counter()
        try:
            caller.call(kind)
            out.append((kind, time.perf_counter() - start, ""))
        except Exception as exc:  # every failure is counted and shown, never hidden
            line = traceback.format_exception_only(exc)[-1].strip()[:200]
            out.append((kind, time.perf_counter() - start, line))


def run_process(
    urls: list[str], clients: int, duration_s: float, max_requests: int, seed: int, first: int
) -> list:
    """One load process: ``clients`` threads; returns ``(kind, seconds, error)`` per call.

    Client ``first + i`` talks to ``urls[(first + i) % len(urls)]`` (as a sticky balancer would).
    """
    from gradio_client import Client

    setup = Client(urls[0], verbose=False)
    choices = setup.predict(api_name="/filter_choices")
    table = setup.predict(task="all", best=False, page_size=1000, api_name="/leaderboard_table")
    runs = [r["run_id"] for r in table["rows"]]
    callers = [
        Caller(urls[(first + i) % len(urls)], choices, runs, random.Random(seed * 1000 + i))
        for i in range(clients)
    ]
    out: list = []
    budget, lock = [max_requests], threading.Lock()
    stop_at = time.monotonic() + duration_s
    threads = [
        threading.Thread(target=client_loop, args=(c, stop_at, budget, out, lock), daemon=True)
        for c in callers
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=duration_s + 120)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return [(kind, seconds, error) for kind, seconds, error in out] + [
        ("_cpu", usage.ru_utime + usage.ru_stime, "")
    ]


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``values`` by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def report(results: list, elapsed_s: float, clients: int) -> bool:
    """Print throughput, latency percentiles and errors; return whether the goal was met."""
    print(f"\n{len(results)} calls from {clients} clients in {elapsed_s:.1f} s: "
          f"{len(results) / elapsed_s:.1f} calls/s")  # fmt: skip
    print(f"{'kind':<9} {'calls':>6} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    ok, errors = True, {}
    for kind in KINDS:
        rows = [r for r in results if r[0] == kind]
        if not rows:
            continue
        times = [r[1] for r in rows]
        bad = [r[2] for r in rows if r[2]]
        for e in bad:
            errors[e] = errors.get(e, 0) + 1
        p50, p95, p99 = (percentile(times, q) * 1000 for q in (0.5, 0.95, 0.99))
        ok &= not bad and p95 < GOAL_P95_S * 1000
        print(f"{kind:<9} {len(rows):>6} {len(bad):>6} {p50:>8.0f} {p95:>8.0f} {p99:>8.0f}")
    for line, n in sorted(errors.items(), key=lambda kv: -kv[1]):
        print(f"  error x{n}: {line}")
    print(f"goal (no error, p95 < {GOAL_P95_S:g} s): {'met' if ok else 'NOT met'}")
    return ok


def main() -> None:
    """Parse options, seed and serve the store, run the clients, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    parser.add_argument("--max-requests", type=int, default=20_000, help="calls in all")
    parser.add_argument("--procs", type=int, default=2, help="load-generating processes")
    parser.add_argument(
        "--workers", type=int, default=1, help="server processes (client i uses worker i mod N)"
    )
    parser.add_argument(
        "--reference", type=Path, default=None, help="another reference folder (default: shipped)"
    )
    args = parser.parse_args()
    if args.reference is not None and not (args.reference / "mlenergy-leaderboard").is_dir():
        sys.exit(f"error: no mlenergy-leaderboard/ in {args.reference}. Pass --reference DIR")
    with tempfile.TemporaryDirectory(prefix="mlenergy-load-") as tmp:
        data_dir = Path(tmp) / "data"
        seed_store(args.reference, data_dir)
        pids: list[int] = []
        with ExitStack() as stack:
            urls = [
                stack.enter_context(
                    serve_leaderboard(
                        data_dir, log_path=Path(tmp) / f"server-{i}.log", on_start=pids.append
                    )
                )
                for i in range(max(1, args.workers))
            ]
            results, elapsed, server_cpu = load(urls, pids, args)
    load_cpu = sum(r[1] for r in results if r[0] == "_cpu")
    results = [r for r in results if r[0] != "_cpu"]
    report(results, min(elapsed, args.duration) if results else elapsed, args.clients)
    print(
        f"CPU: server {server_cpu:.1f} s ({server_cpu / max(1, len(results)) * 1000:.1f} ms per "
        f"call, {len(urls)} worker(s)), load generator {load_cpu:.1f} s, over {elapsed:.0f} s "
        f"(client start-up included) on {os.cpu_count()} cores; load average now "
        f"{os.getloadavg()[0]:.1f}"
    )


def load(urls: list[str], pids: list[int], args) -> tuple[list, float, float]:
    """Run the clients against ``urls``; return the calls, the seconds and the server CPU s."""
    procs = max(1, min(args.procs, args.clients))
    print(f"serving {', '.join(urls)} (reference data); {args.clients} clients in {procs} "
          f"process(es) for {args.duration:g} s, at most {args.max_requests} calls")  # fmt: skip
    share = [args.clients // procs + (i < args.clients % procs) for i in range(procs)]
    cpu_start = sum(cpu_seconds(pid) for pid in pids)
    start = time.monotonic()
    with ProcessPoolExecutor(procs) as pool:
        futures = [
            pool.submit(
                run_process, urls, n, args.duration, args.max_requests // procs, i, sum(share[:i])
            )
            for i, n in enumerate(share)
        ]
        results = [r for f in futures for r in f.result()]
    elapsed = time.monotonic() - start
    server_cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_start
    return results, elapsed, server_cpu


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
