"""Single and batch estimates agree to the last bit on random rows over the shipped catalogs.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/estimator_agreement.py [--rows 5000]``.
Draws rows over every shipped model config (dense, MoE, Mamba hybrids), catalog GPU and
precision, serving and offline jobs (``mlenergy.testing.estimate_requests``), estimates them as one
batch and one at a time, and prints how many agree (every key of every estimate, and every
error) and how many do not (the target is none).

Then as many training rows (``mode`` ``training``): a training step is estimated by the single
training path alone, so it prints how many the single training path estimated, how many the
batch contract estimated (and whether those match the single figures to the bit) and whether
every row the batch refused got the single API's error.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from mlenergy.errors import UserError
from mlenergy.estimate import estimate, estimate_frame
from mlenergy.estimate.batch import row_estimates
from mlenergy.testing.estimate_requests import (
    TRAINING_COLUMNS,
    random_requests,
    random_training_requests,
    single_training,
)

TRAINING_KEYS = ("energy_per_token_j", "throughput_tokens_per_s", "avg_power_w")


def _single_error(row: dict[str, str]) -> str:
    """The single API's error on a row ("" when it estimates it)."""
    try:
        estimate(**row)
    except UserError as exc:
        return exc.message.rstrip(".")
    return ""


def training_agreement(rows: int, seed: int) -> str:
    """One line on ``rows`` random training rows through the batch and the single paths."""
    df = random_training_requests(rows, seed=seed)
    frame = estimate_frame(df)
    single = batch = same = refused_alike = differ = 0
    for i, row in enumerate(df.to_dict("records")):
        training = single_training(row)
        single += not isinstance(training, str)
        error = frame.loc[i, "error"].rstrip(".")
        if error:
            api = _single_error({k: v for k, v in row.items() if k not in TRAINING_COLUMNS})
            refused_alike += api == error
            differ += api != error
            continue
        batch += 1
        ok = not isinstance(training, str)
        ok = ok and all(frame.loc[i, k] == getattr(training, k) for k in TRAINING_KEYS)
        same += ok
        differ += not ok
    return (
        f"{rows:,} random training rows: the single training path estimated {single:,}; the "
        f"batch contract estimated {batch:,} ({same:,} to the bit) and refused "
        f"{rows - batch:,} ({refused_alike:,} with the single API's error); {differ} differ"
    )


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
    print(training_agreement(args.rows, args.seed))


if __name__ == "__main__":
    main()
