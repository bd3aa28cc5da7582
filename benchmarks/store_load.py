"""Store speed at leaderboard scale (not a test): append, load and fetch 100,000 runs.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/store_load.py [N]``. Records are copies of
50 synthetic runs (:mod:`mlenergy.testing.synthetic`) with fresh ids (content differs, so none
is a duplicate). Prints the best of three timings of each read.
"""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from pathlib import Path

from mlenergy.store import RunStore
from mlenergy.testing.synthetic import synthetic_runs


def _best(fn, repeats: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main(n: int = 100_000, batches: int = 10) -> None:
    """Append ``n`` runs in ``batches`` appends, then time the reads."""
    base = synthetic_runs(50)
    records = [base[i % 50].model_copy(update={"run_id": uuid.uuid4().hex}) for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        store = RunStore(data)
        step = max(1, n // batches)
        t0 = time.perf_counter()
        for i in range(0, n, step):
            store.append(records[i : i + step])
        t_append = time.perf_counter() - t0
        print(
            f"append {n} runs in {batches} appends: {t_append:.2f} s "
            f"({t_append / n * 1e6:.0f} us/run)"
        )
        extra = base[0].model_copy(update={"run_id": uuid.uuid4().hex})
        t, _ = _best(lambda: RunStore(data).append([extra]), 1)
        print(f"append 1 run, fresh process-like store: {t:.3f} s")
        t, frame = _best(lambda: RunStore(data).runs_frame())
        print(f"runs_frame {frame.shape} over {batches + 1} segments: {t:.3f} s")
        t, _ = _best(lambda: RunStore(data).compact(), 1)
        print(f"compact: {t:.2f} s")
        t, frame = _best(lambda: RunStore(data).runs_frame())
        print(f"runs_frame {frame.shape} over 1 segment: {t:.3f} s")
        t, _ = _best(lambda: RunStore(data).get(records[n // 2].run_id))
        print(f"get(run_id): {t:.3f} s")
        size = sum(p.stat().st_size for p in (data / "results").iterdir())
        print(f"on disk: {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
