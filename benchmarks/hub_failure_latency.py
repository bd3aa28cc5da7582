"""How long a model source that cannot be loaded takes to fail: an unknown hub id, offline.

A hub id that cannot be resolved must fail within seconds, not after the long retries of a
download client. Two cases, each timed over a few rounds: ``HF_HUB_OFFLINE=1`` (the local cache
only) and a closed endpoint without the offline flag (found closed by a quick TCP probe).

Run::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/hub_failure_latency.py --rounds 3

Target: each case under 10 s (prints the median and the worst round, in seconds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

TARGET_S = 10.0
_UNKNOWN_ID = "no-such-org/no-such-model-xyz"


def _time_failure(env: dict[str, str | None]) -> float:
    from mlenergy.errors import UserError
    from mlenergy.models import load_model

    saved = {key: os.environ.get(key) for key in env}
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    try:
        start = time.perf_counter()
        try:
            load_model(_UNKNOWN_ID)
        except UserError:
            return time.perf_counter() - start
        raise SystemExit(f"{_UNKNOWN_ID} unexpectedly loaded")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="Timed rounds per case.")
    args = parser.parse_args()
    cases = {
        "HF_HUB_OFFLINE=1": {"HF_HUB_OFFLINE": "1"},
        "closed endpoint": {
            "HF_HUB_OFFLINE": None,
            "TRANSFORMERS_OFFLINE": None,
            "HF_ENDPOINT": "http://127.0.0.1:9",
        },
    }
    for name, env in cases.items():
        times = [_time_failure(env) for _ in range(args.rounds)]
        worst = max(times)
        verdict = "ok" if worst < TARGET_S else "over target"
        print(
            f"{name:18s} median {statistics.median(times):6.2f} s  worst {worst:6.2f} s  "
            f"(target < {TARGET_S:.0f} s: {verdict})"
        )


if __name__ == "__main__":
    main()
