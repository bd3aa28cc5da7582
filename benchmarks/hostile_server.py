r"""Hostile server: every way a server can lie to ``mlenergy bench --endpoint``, and what holds.

Runs the fake server of :mod:`mlenergy.testing.hostile_openai` (one thread, 127.0.0.1, every mode
under its own prefix) and, for each mode:

* the real command, ``mlenergy bench --endpoint .../<mode>/v1`` (its ``main``, in this process)
  with a fresh data folder: its exit status, its error line, whether anything was stored, and its
  time;
* the serving client alone (the same calls the command makes to the server: the model list, the
  engine's pages, the test request, the load, one ``/metrics`` scrape) in a subprocess of its own
  that imports no torch: its peak memory (``ru_maxrss``) and its time.

A mode **holds** when the command refuses it in one line (exit 2, nothing stored) or, for the
modes a client may accept once cleaned (metrics out of range, an absurd ``/version``), stores a
record whose engine name is short and clean and whose metrics hold no dropped value; and when the
client's peak memory stays under ``--max-rss-mb`` (200). The option modes check that bad numbers
are refused before any server is contacted. Every mode is bounded in time (``--request-timeout 2``).

Run::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/hostile_server.py [--modes drip,long-line]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

TIMEOUT_S = "2"
ARGS = [
    "--model", "m", "--model-config", "preset:tiny-dense", "--concurrency", "2",
    "--num-requests", "8", "--max-output-tokens", "64", "--idle-s", "0",
    "--request-timeout", TIMEOUT_S,
]  # fmt: skip
ACCEPTED = {"ok", "slow", "metrics-inf", "metrics-negative", "version-long", "version-dict"}
"""Modes a client may run once it has cleaned what the server said."""
OPTIONS = {
    "request-timeout nan": ["--request-timeout", "nan"],
    "request-timeout 0": ["--request-timeout", "0"],
    "request-timeout -5": ["--request-timeout", "-5"],
    "startup-timeout nan": ["--startup-timeout", "nan"],
}
"""Bad numeric options, refused before any server is contacted."""


def _client_only(endpoint: str) -> int:
    """The client's side of a benchmark, nothing else: exit 2 when it refuses the server."""
    import httpx

    from mlenergy.errors import UserError
    from mlenergy.workloads.serving.client import RequestOptions
    from mlenergy.workloads.serving.loadgen import LoadFailed, generate_load
    from mlenergy.workloads.serving.runner import negotiate_ignore_eos
    from mlenergy.workloads.serving.server_info import (
        check_model_served,
        detect_engine,
        read_metrics,
        server_root,
    )
    from mlenergy.workloads.serving.steady_state import SteadyStateTracker

    try:
        models = check_model_served(endpoint, "m")
        engine = detect_engine(endpoint, models)
        options = RequestOptions(endpoint, "m", "chat", 64, request_timeout_s=float(TIMEOUT_S))
        negotiate_ignore_eos(options, False, engine.name)
        dropped: list[str] = []
        with httpx.Client(timeout=5.0) as client:
            read_metrics(client, f"{server_root(endpoint)}/metrics", dropped)
        asyncio.run(generate_load(options, ["hi"] * 8, [0.0] * 8, 2, SteadyStateTracker(2)))
    except (UserError, LoadFailed) as err:
        print(f"refused: {str(err)[:200]}")
        return 2
    finally:
        print(f"peak_kb {_peak_kb()}")  # this process's own high-water mark (since exec)
    return 0


def _peak_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _client_run(endpoint: str, timeout_s: float = 300.0) -> tuple[int, float, float]:
    """The client alone in a fresh process: (exit status, seconds, peak RSS in MB)."""
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--client-only", endpoint],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return -1, time.monotonic() - start, float("nan")
    peak = [x for x in done.stdout.splitlines() if x.startswith("peak_kb ")]
    mb = int(peak[-1].split()[1]) / 1024 if peak else float("nan")
    return done.returncode, time.monotonic() - start, mb


def _command(argv: list[str]) -> tuple[int, float, str]:
    """``mlenergy ARGV`` in this process: (exit status, seconds, what it wrote to stderr)."""
    from mlenergy.cli import main as cli

    start = time.monotonic()
    err = io.StringIO()
    with (
        contextlib.redirect_stderr(err),
        contextlib.redirect_stdout(io.StringIO()),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("always")
        rc = cli(argv)
    return rc, time.monotonic() - start, err.getvalue()


def _stored(data: Path) -> list[dict]:
    from mlenergy.store import RunStore

    if not data.exists():
        return []
    return [json.loads(r.model_dump_json()) for r in RunStore(data).runs()]


def _lines(text: str) -> list[str]:
    skip = ("torch_dtype", "warnings.warn(", "RuntimeWarning")
    return [x for x in text.splitlines() if x.strip() and not any(s in x for s in skip)]


def _judge(mode: str, rc: int, err: str, records: list[dict]) -> tuple[bool, str]:
    lines = _lines(err)
    if "Traceback" in err:
        return False, "traceback"
    if mode in ACCEPTED:
        if rc != 0 or len(records) != 1:
            return False, f"exit {rc}, {len(records)} record(s)"
        serving = records[0]["serving"]
        engine = serving.get("engine") or ""
        if len(engine) > 80 or any(ord(c) < 32 for c in engine):
            return False, f"engine stored as {engine[:40]!r}..."
        metrics = serving.get("engine_metrics") or {}
        if mode.startswith("metrics") and metrics.get("kv_cache_usage_mean") is not None:
            return False, "an out-of-range metric was kept"
        return True, f"stored; engine {engine[:30]!r}" + (
            "; one warning" if "not finite or out of range" in err else ""
        )
    if rc != 2 or records:
        return False, f"exit {rc}, {len(records)} record(s)"
    errors = [x for x in lines if x.startswith("error:")]
    if len(errors) != 1:
        return False, f"{len(errors)} error lines"
    shown = errors[0].removeprefix("error: ").split(" for model 'm': ", 1)[-1]
    return True, shown[:90]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="", help="comma-separated modes (default: all)")
    parser.add_argument("--max-rss-mb", type=float, default=200.0)
    parser.add_argument("--client-only", nargs=1, metavar="ENDPOINT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client_only:
        sys.exit(_client_only(args.client_only[0]))

    from mlenergy.testing.hostile_openai import MODES, running_server

    chosen = [m for m in args.modes.split(",") if m] or [*MODES, *OPTIONS]
    cli = ["bench"]
    rows = []
    with running_server() as base, tempfile.TemporaryDirectory() as tmp:
        for mode in chosen:
            data = Path(tmp) / mode.replace(" ", "_")
            if mode in OPTIONS:
                endpoint = "http://127.0.0.1:9/v1"  # nothing listens: a late check would say so
                argv = [
                    *cli,
                    "--endpoint",
                    endpoint,
                    *ARGS,
                    *OPTIONS[mode],
                    "--data-dir",
                    str(data),
                ]
                rc, secs, err = _command(argv)
                held, note = _judge(mode, rc, err, _stored(data))
                held = held and "cannot reach" not in note
                rows.append((mode, rc, secs, None, None, held, note))
                continue
            if mode == "alias":
                continue  # needs a model folder: see tests/workloads/serving
            endpoint = f"{base}/{mode}/v1"
            rc, secs, err = _command([*cli, "--endpoint", endpoint, *ARGS, "--data-dir", str(data)])
            held, note = _judge(mode, rc, err, _stored(data))
            crc, csecs, rss = _client_run(endpoint)
            expected = 0 if mode in ACCEPTED else 2
            held = held and rss < args.max_rss_mb and crc == expected
            rows.append((mode, rc, secs, rss, csecs, held, note))
    print(f"{'mode':20s} {'exit':>4s} {'cmd s':>6s} {'client MB':>9s} {'client s':>8s} held  note")
    for mode, rc, secs, rss, csecs, held, note in rows:
        mb = f"{rss:9.0f}" if rss is not None else f"{'-':>9s}"
        cs = f"{csecs:8.1f}" if csecs is not None else f"{'-':>8s}"
        print(f"{mode:20s} {rc:4d} {secs:6.1f} {mb} {cs} {'yes' if held else 'NO ':4s}  {note}")
    worst = max((r[3] for r in rows if r[3] is not None), default=0.0)
    print(f"{sum(r[5] for r in rows)} of {len(rows)} modes held; client peak {worst:.0f} MB "
          f"(limit {args.max_rss_mb:.0f} MB)")  # fmt: skip
    if not all(r[5] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
