"""Single and batch estimates agree to the last bit on random rows over the shipped catalogs.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/estimator_agreement.py [--rows 5000]``.
Draws rows over every shipped model config (dense, MoE, Mamba hybrids), catalog GPU and
precision, serving and offline jobs (``mlenergy.estimate.sampling``), estimates them as one
batch and one at a time, and prints how many agree (every key of every estimate, and every
error) and how many do not (the target is none).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from mlenergy.errors import UserError
from mlenergy.estimate import estimate, estimate_frame
from mlenergy.estimate.batch import row_estimates
from mlenergy.estimate.sampling import random_requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    df = random_requests(args.rows, seed=args.seed)
    t0 = time.perf_counter()
    frame = estimate_frame(df)
    saved = iter(row_estimates(frame))
    t1 = time.perf_counter()
    same_estimate = same_error = differ = 0
    for i, row in enumerate(df.to_dict("records")):
        try:
            single = estimate(**row).to_dict()
        except UserError as exc:
            ok = frame.loc[i, "error"].rstrip(".") == exc.message.rstrip(".")
            same_error += ok
            differ += not ok
            continue
        ok = frame.loc[i, "error"] == "" and next(saved).to_dict() == single
        ok = ok and frame.loc[i, "energy_per_token_j"] == single["energy_per_token_j"]
        same_estimate += ok
        differ += not ok
    t2 = time.perf_counter()
    print(
        f"{args.rows:,} random rows: {same_estimate:,} estimates and {same_error:,} errors agree "
        f"between the batch and the single path; {differ} differ (target 0)"
    )
    print(f"batch {t1 - t0:.2f} s, one at a time {t2 - t1:.2f} s")


if __name__ == "__main__":
    main()
