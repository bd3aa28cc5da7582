"""Does the modelled CPU energy follow the neighbours? The same bench, quiet and beside two hogs.

Runs the same ``run_bench`` point (``preset:tiny-dense``, batch 4, 32 input and 32 output
tokens, one torch thread, the CPU power model) in rounds that alternate *quiet* and *busy*
(``Q B Q B ...``, so a slow drift of the shared machine cancels). In a busy round this script
starts two busy-loop neighbour processes (one per core of a 2-core machine; not its children,
since the model charges a process's children to it), waits for them to spin, measures, and
stops them by their ids. It prints the request energy per token (mJ) of every round,
and the ratio busy / quiet of the medians, for

* the CPU model the meter uses (CPU time at per-core power: ``modelled:cpu-tdp``), and
* the earlier wall-time model (idle power of every usable CPU x wall time + active power x
  CPU time), recomputed from the same windows, for comparison.

Target: the meter's ratio within 0.90-1.10. Run::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/cpu_model_neighbours.py --rounds 3

On a machine other people use too, the "quiet" rounds are not quiet: say so with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

_HOG = "import time\nend = time.time() + {limit}\nx = 0\nwhile time.time() < end:\n    x += 1\n"


_LAUNCHER = (
    "import subprocess, sys\n"
    "code = sys.argv[1]\n"
    "procs = [subprocess.Popen([sys.executable, '-c', code], start_new_session=True,\n"
    "                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "         for _ in range(int(sys.argv[2]))]\n"
    "print(' '.join(str(p.pid) for p in procs))\n"
)


def start_neighbours(count: int, limit_s: float) -> list[int]:
    """Start ``count`` busy-loop processes that stop by themselves after ``limit_s`` seconds.

    They are started through a launcher that exits at once, so they are not this process's
    children: the CPU model charges a process's children to it, and neighbours are not ours.

    Returns:
        Their process ids.
    """
    code = _HOG.format(limit=limit_s)
    out = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, code, str(count)],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    time.sleep(0.5)  # let them reach their loops
    return [int(pid) for pid in out.stdout.split()]


def stop_neighbours(pids: list[int]) -> None:
    """Stop the neighbours this script started, by their process ids."""
    import contextlib
    import signal

    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # already gone (its time limit)
            os.kill(pid, signal.SIGTERM)
    time.sleep(0.2)


def measure_once(args: argparse.Namespace) -> dict[str, float]:
    """One bench point: request mJ/token by the meter's model and by the wall-time model."""
    from mlenergy.measure.emulated import install_no_devices
    from mlenergy.workloads.bench import BenchOptions, run_bench
    from mlenergy.workloads.inference import InferenceSpec

    spec = InferenceSpec(
        batch_sizes=(args.batch_size,),
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        repeats=args.repeats,
        warmup=1,
        idle_s=0,
    )
    opts = BenchOptions(cpu_tdp_w=args.cpu_tdp_w, threads=1, progress=False, gpu_indices=[])
    with install_no_devices():  # the CPU power model, as on the project's machines
        (record,) = run_bench(["preset:tiny-dense"], spec, opts)
    req = record.phase("request")
    from mlenergy.measure.cpu_model import resolve_cpu_power_model

    model = resolve_cpu_power_model(args.cpu_tdp_w)
    cpu_s = req.energy_j / model.per_cpu_w  # the CPU time the meter charged
    wall_j = model.idle_w * req.duration_s + (model.tdp_w - model.idle_w) * cpu_s / model.num_cpus
    return {
        "meter_mj_per_token": 1e3 * req.energy_per_token_j,
        "wall_model_mj_per_token": 1e3 * wall_j / req.tokens,
        "duration_s": req.duration_s,
        "cpu_s": cpu_s,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="quiet/busy pairs")
    parser.add_argument("--neighbours", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--input-tokens", type=int, default=32)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cpu-tdp-w", type=float, default=None)
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    measure_once(args)  # import and build once, unmeasured
    rows: dict[str, list[dict[str, float]]] = {"quiet": [], "busy": []}
    for i in range(args.rounds):
        rows["quiet"].append(measure_once(args))
        procs = start_neighbours(args.neighbours, limit_s=600)
        try:
            rows["busy"].append(measure_once(args))
        finally:
            stop_neighbours(procs)
        q, b = rows["quiet"][-1], rows["busy"][-1]
        print(
            f"round {i + 1}: quiet {q['meter_mj_per_token']:.4g} mJ/tok "
            f"({q['duration_s']:.3g} s), busy {b['meter_mj_per_token']:.4g} mJ/tok "
            f"({b['duration_s']:.3g} s); wall-time model quiet "
            f"{q['wall_model_mj_per_token']:.4g}, busy {b['wall_model_mj_per_token']:.4g}"
        )

    def median(arm: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[arm])

    out = {
        "rounds": rows,
        "meter_ratio_busy_over_quiet": median("busy", "meter_mj_per_token")
        / median("quiet", "meter_mj_per_token"),
        "wall_model_ratio_busy_over_quiet": median("busy", "wall_model_mj_per_token")
        / median("quiet", "wall_model_mj_per_token"),
        "duration_ratio_busy_over_quiet": median("busy", "duration_s")
        / median("quiet", "duration_s"),
        "cpu_s_ratio_busy_over_quiet": median("busy", "cpu_s") / median("quiet", "cpu_s"),
        "meter_pair_ratios": [
            b["meter_mj_per_token"] / q["meter_mj_per_token"]
            for q, b in zip(rows["quiet"], rows["busy"], strict=True)
        ],
    }
    print(
        f"medians over {args.rounds} rounds, busy / quiet ({args.neighbours} neighbours):\n"
        f"  modelled:cpu-tdp (CPU time x per-core power): "
        f"{out['meter_ratio_busy_over_quiet']:.3f}  (target 0.90-1.10)\n"
        f"  wall-time model, same windows:                 "
        f"{out['wall_model_ratio_busy_over_quiet']:.3f}\n"
        f"  wall time {out['duration_ratio_busy_over_quiet']:.3f}, "
        f"CPU time {out['cpu_s_ratio_busy_over_quiet']:.3f}\n"
        f"  per pair (busy / the quiet round before it): "
        + ", ".join(f"{r:.3f}" for r in out["meter_pair_ratios"])
        + f"; median {statistics.median(out['meter_pair_ratios']):.3f}"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2)
    return out


if __name__ == "__main__":
    main()
