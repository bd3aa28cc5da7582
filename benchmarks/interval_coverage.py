"""Interval coverage: does a run's stated interval cover what the next fresh process measures?

Runs one tiny bench point in five fresh processes (``mlenergy bench --processes`` does the
same per run, :func:`mlenergy.workloads.bench_processes.run_in_fresh_process`) and compares:

* **between-runs**: for each choice of three runs (10 of them), the interval that
  ``--processes 3`` would store (the records combined by
  :func:`mlenergy.workloads.run_spread.combine_static`, the Student-t interval of the mean over
  the three runs): how often it covers each of the two runs left out (20 checks);
* **within-run**: each run's own interval from its repeats (what a plain ``bench`` stores):
  how often it covers each of the four other runs' figures (20 checks).

An interval of the *mean* is not meant to cover 95% of single new runs (a prediction interval
of one more run is wider by about sqrt(n + 1)); the script prints that one too, from the same
three runs, so the three rows can be read side by side. Figures are the request phase's energy
per output token. On this project's CPU machines the energy is the CPU power model's
(``modelled:cpu-tdp``) and moves with the machine's load; on a GPU pass ``--device cuda``.

Run::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/interval_coverage.py
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _covers(low: float, high: float, value: float) -> bool:
    return low <= value <= high


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="preset:tiny-dense")
    parser.add_argument("--runs", type=int, default=5, help="fresh processes (at least 4)")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--input-tokens", type=int, default=32)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3, help="measured repeats per run")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.runs < 4:
        parser.error("--runs must be at least 4 (three to combine, one to cover)")

    from scipy import stats

    from mlenergy.workloads.bench import BenchOptions
    from mlenergy.workloads.bench_processes import run_in_fresh_process
    from mlenergy.workloads.inference import InferenceSpec
    from mlenergy.workloads.run_spread import combine_static

    spec = InferenceSpec(
        batch_sizes=(args.batch_size,),
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        repeats=args.repeats,
        idle_s=0.2,
        device=args.device,
        dtype=args.dtype,
    )
    options = BenchOptions(progress=False)
    started = time.time()
    runs = []
    for i in range(args.runs):
        (record,) = run_in_fresh_process(args.model, spec, options, label=f"run {i + 1}")
        runs.append(record)
        print(f"run {i + 1} of {args.runs}: done", flush=True)
    wall_s = time.time() - started
    request = [r.phase("request") for r in runs]
    values = [p.energy_per_token_j for p in request]
    print(
        f"\n{args.model}, batch {args.batch_size}, {args.input_tokens}+{args.output_tokens} "
        f"tokens, {args.repeats} repeats per run, {args.runs} fresh processes "
        f"({runs[0].energy_source}); {wall_s:.0f} s, load average "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}"
    )
    print("\nrun   mJ/token   within-run 95% interval (mJ/token)")
    for i, p in enumerate(request):
        low, high = p.energy_per_token_j_ci95.low * 1e3, p.energy_per_token_j_ci95.high * 1e3
        print(f"{i + 1:>3}  {p.energy_per_token_j * 1e3:9.4g}   [{low:.4g}, {high:.4g}]")

    within = [
        _covers(request[i].energy_per_token_j_ci95.low, request[i].energy_per_token_j_ci95.high,
                values[j])
        for i in range(len(runs)) for j in range(len(runs)) if i != j
    ]  # fmt: skip
    between, prediction = [], []
    widths = []
    for trio in itertools.combinations(range(len(runs)), 3):
        combined = combine_static([runs[i] for i in trio]).phase("request")
        ci = combined.energy_per_token_j_ci95
        widths.append((ci.high - ci.low) / 2 / combined.energy_per_token_j)
        three = [values[i] for i in trio]
        half = stats.t.ppf(0.975, 2) * stats.tstd(three) * math.sqrt(1 + 1 / 3)
        mean = sum(three) / 3
        for j in set(range(len(runs))) - set(trio):
            between.append(_covers(ci.low, ci.high, values[j]))
            prediction.append(_covers(mean - half, mean + half, values[j]))
    spread = (max(values) - min(values)) / min(values)
    within_halves = [
        (p.energy_per_token_j_ci95.high - p.energy_per_token_j_ci95.low) / 2 / p.energy_per_token_j
        for p in request
    ]
    figures = {
        "model": args.model,
        "energy_source": runs[0].energy_source,
        "runs": args.runs,
        "repeats": args.repeats,
        "values_j_per_token": values,
        "spread_between_runs": spread,
        "within_run_coverage": sum(within) / len(within),
        "within_run_checks": len(within),
        "within_run_half_width_median": sorted(within_halves)[len(within_halves) // 2],
        "between_runs_coverage": sum(between) / len(between),
        "between_runs_checks": len(between),
        "between_runs_half_width_median": sorted(widths)[len(widths) // 2],
        "prediction_coverage": sum(prediction) / len(prediction),
        "wall_s": wall_s,
    }
    print(f"\nspread between the {args.runs} runs (max/min - 1): {spread:.1%}")
    rows = [
        (f"within-run (one run's {args.repeats} repeats)", within, within_halves),
        ("between-runs (3 fresh processes, as stored)", between, widths),
        ("one more run, predicted from the same 3", prediction, None),
    ]
    print(f"{'interval':<46}{'covers other runs':>20}{'median half-width':>20}")
    for name, checks, halves in rows:
        covered = f"{sum(checks)} of {len(checks)} ({sum(checks) / len(checks):.0%})"
        half = f"±{sorted(halves)[len(halves) // 2]:.1%}" if halves else "-"
        print(f"{name:<46}{covered:>20}{half:>20}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(figures, fh, indent=2)
    return figures


if __name__ == "__main__":
    main()
