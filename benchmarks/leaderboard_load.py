"""Leaderboard load benchmark: 100,000 runs in a store; time filters, sorts and first page load.

Usage::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/leaderboard_load.py [--runs 100000] [--no-browser]

Targets: a filter or sort answered server-side in under 300 ms; first page load
under 3 s. The runs are synthetic (``energy_source="emulated:synthetic"``) and are written to
a temporary store that is deleted afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from mlenergy.leaderboard import query as lb
from mlenergy.leaderboard.context import AppContext
from mlenergy.leaderboard.data import LeaderboardData, store_runs_frame
from mlenergy.leaderboard.html import render_table
from mlenergy.leaderboard.reference_layer import reference_layer
from mlenergy.store import RunStore
from mlenergy.testing.server import (
    CHROMIUM,
    CHROMIUM_ARGS,
    STATUS_JS,
    serve_leaderboard,
)
from mlenergy.testing.synthetic import synthetic_runs

TARGET_QUERY_S = 0.300
TARGET_PAGE_S = 3.0


def _timed(fn, repeats: int = 5) -> tuple[float, object]:
    """Median wall time of ``fn()`` over ``repeats`` calls, and its last result."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def _answer(frame, query):
    """What the app does per request: query, then render the page as HTML."""
    res = lb.query_table(frame, query)
    render_table(res.page_rows)
    return res


def _browser_figures(data_dir: Path) -> dict[str, float]:
    """Start ``mlenergy leaderboard``; time server start, page load and a filter round trip."""
    from playwright.sync_api import sync_playwright

    started = time.perf_counter()
    with serve_leaderboard(data_dir, start_timeout_s=300, poll_s=0.1, stop_timeout_s=30) as url:
        server_ready = time.perf_counter() - started
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            t0 = time.perf_counter()
            page.goto(url)
            page.wait_for_selector("#lb-table tbody tr", timeout=60_000)
            page_load = time.perf_counter() - t0
            before = page.evaluate(STATUS_JS)
            t1 = time.perf_counter()
            page.locator("#f-hardware label", has_text="B200").first.click()
            page.wait_for_function(
                f"b => {{ const s = ({STATUS_JS})(); return s && s !== b; }}", arg=before
            )
            filter_round_trip = time.perf_counter() - t1
            browser.close()
    return {
        "server start to ready (s)": server_ready,
        "first page load in Chromium (s)": page_load,
        "filter round trip in Chromium (s)": filter_round_trip,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium timings")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="mlenergy-lb-bench-") as tmp:
        data_dir = Path(tmp)
        t = time.perf_counter()
        records = synthetic_runs(args.runs, validate=False)
        gen_s = time.perf_counter() - t
        t = time.perf_counter()
        RunStore(data_dir).append(records)
        append_s = time.perf_counter() - t
        del records
        print(f"generated {args.runs} runs in {gen_s:.1f} s; stored in {append_s:.1f} s")

        ref_s, _ = _timed(reference_layer, repeats=1)
        print(
            f"reference layer read ({len(reference_layer().records)} runs): {ref_s * 1000:.0f} ms"
        )
        store = RunStore(data_dir)
        flat_s, _ = _timed(store.runs_frame, repeats=3)
        method_s, _ = _timed(lambda: store_runs_frame(store), repeats=3)
        print(
            f"store flat read: {flat_s * 1000:.0f} ms; with each record's method: "
            f"{method_s * 1000:.0f} ms"
        )
        load_s, data = _timed(lambda: LeaderboardData.load(data_dir), repeats=1)
        frame = data.frame(None)
        print(
            f"store + reference read + prepare ({len(frame)} rows): {load_s * 1000:.0f} ms "
            "(once per start; the reference is read once per process)"
        )
        ctx_s, ctx = _timed(lambda: AppContext.load(data_dir), repeats=1)
        view_s, _ = _timed(lambda: ctx._view(("measured-gpu", "emulated")), repeats=1)
        print(
            f"app state with the default view's choices: {ctx_s * 1000:.0f} ms; the choices of "
            f"another energy-source view: {view_s * 1000:.0f} ms (then memoised)"
        )

        queries = {
            "default view (best config per model x hardware, task)": lb.TableQuery(
                task="lm-arena-chat"
            ),
            "filter: hardware=B200, MoE, fp8": lb.TableQuery(
                hardware=("B200",), arch="MoE", precisions=("fp8",)
            ),
            "filter: latency deadline 30 ms + budget": lb.TableQuery(
                max_itl_ms=30.0, max_energy_per_token_j=1.0
            ),
            "search 'model-01'": lb.TableQuery(search="model-01"),
            "sort all configs by tokens/J desc": lb.TableQuery(
                best_only=False, sort_by="tokens_per_j", descending=True
            ),
            "sort all configs by model, page 1000": lb.TableQuery(
                best_only=False, sort_by="model_id", page=1000
            ),
        }
        worst = 0.0
        target_ms = TARGET_QUERY_S * 1000
        print(
            f"\nserver-side (median of 5, query + 50-row HTML page; target < {target_ms:.0f} ms):"
        )
        for name, query in queries.items():
            secs, res = _timed(lambda q=query: _answer(frame, q))
            worst = max(worst, secs)
            print(f"  {secs * 1000:7.1f} ms  {name}  ({res.total} rows)")
        ok = worst < TARGET_QUERY_S

        if args.no_browser or not CHROMIUM.exists():
            print("\n(browser timings skipped: --no-browser or /usr/bin/chromium missing)")
        else:
            print(f"\nbrowser (target: first page load < {TARGET_PAGE_S:.0f} s):")
            figures = _browser_figures(data_dir)
            for name, secs in figures.items():
                print(f"  {secs:7.2f} s  {name}")
            ok = ok and figures["first page load in Chromium (s)"] < TARGET_PAGE_S
        print("\nall targets met" if ok else "\nSOME TARGETS MISSED")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
