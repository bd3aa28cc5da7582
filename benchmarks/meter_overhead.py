"""Meter overhead: the same generate workload with and without an EnergyMeter window.

Builds a tiny Llama from a ``LlamaConfig`` (random weights, no download), runs
``model.generate(..., min_new_tokens=N, max_new_tokens=N)`` alternately bare and inside a
meter window (ABAB... so slow drift of a shared machine cancels), and prints the wall-time
overhead ratio with the absolute figures. Also times empty windows to give the meter's fixed
cost per window, a noise-free bound on its overhead.

Run::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/meter_overhead.py --rounds 20

Target: overhead under 2% of wall time. On a shared, loaded machine
single generate calls vary by tens of percent; use many rounds and read the median pair
ratio beside the CPU-time ratio and the fixed per-window cost. With ``--timeline`` the sampler
thread runs during both arms, so its cost shows in the "background CPU" line, not the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def build_model(seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=1024,
        hidden_size=128,
        intermediate_size=344,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    return LlamaForCausalLM(config).eval()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="ABAB pairs")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--timeline", action="store_true", help="meter with power_timeline=True")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)

    import torch

    from mlenergy.measure import EnergyMeter

    torch.set_num_threads(1)
    model = build_model()
    gen = torch.Generator().manual_seed(0)
    input_ids = torch.randint(3, 1024, (args.batch_size, args.prompt_tokens), generator=gen)
    n = args.new_tokens

    def work() -> None:
        with torch.inference_mode():
            out = model.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                do_sample=False,
                min_new_tokens=n,
                max_new_tokens=n,
            )
        assert out.shape[1] == args.prompt_tokens + n

    meter = EnergyMeter(power_timeline=args.timeline)
    for _ in range(2):  # warm-up: allocator, kernels, the meter's first window
        work()
        with meter.window("warmup"):
            work()

    bare, metered, bare_cpu, metered_cpu, energies = _alternate(work, meter, args.rounds)
    per_window_s, background_cpu_fraction = _fixed_costs(meter)
    meter.close()

    pair_ratios = [m / b for m, b in zip(metered, bare, strict=True)]
    med_bare, med_meter = statistics.median(bare), statistics.median(metered)
    result = {
        "energy_source": meter.energy_source,
        "timeline": args.timeline,
        "rounds": args.rounds,
        "new_tokens": n,
        "batch_size": args.batch_size,
        "median_bare_s": med_bare,
        "median_metered_s": med_meter,
        "mean_bare_s": statistics.fmean(bare),
        "mean_metered_s": statistics.fmean(metered),
        "overhead_ratio_median_of_pairs": statistics.median(pair_ratios) - 1.0,
        "overhead_ratio_total": sum(metered) / sum(bare) - 1.0,
        "cpu_overhead_ratio_median_of_pairs": statistics.median(
            m / b for m, b in zip(metered_cpu, bare_cpu, strict=True)
        )
        - 1.0,
        "per_window_cost_s": per_window_s,
        "per_window_cost_fraction": per_window_s / med_bare,
        "mean_energy_j": statistics.fmean(energies),
        "background_cpu_fraction": background_cpu_fraction,
    }
    _print_figures(result, args)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return result


def _alternate(work, meter, rounds: int) -> tuple[list[float], ...]:
    """Run ``work`` bare and metered in alternating order; wall and CPU seconds, energies."""
    bare: list[float] = []
    metered: list[float] = []
    bare_cpu: list[float] = []
    metered_cpu: list[float] = []
    energies: list[float] = []
    for r in range(rounds):
        order = ("bare", "meter") if r % 2 == 0 else ("meter", "bare")  # ABBA: cancel drift
        for kind in order:
            c0, t0 = time.process_time(), time.perf_counter()
            if kind == "bare":
                work()
                bare.append(time.perf_counter() - t0)
                bare_cpu.append(time.process_time() - c0)
            else:
                with meter.window("generate") as w:
                    work()
                metered.append(time.perf_counter() - t0)
                metered_cpu.append(time.process_time() - c0)
                energies.append(w.result.energy_j or float("nan"))
    return bare, metered, bare_cpu, metered_cpu, energies


def _fixed_costs(meter) -> tuple[float, float]:
    """Seconds per empty window (begin + end), and the meter's background CPU share at idle."""
    k = 2000
    t0 = time.perf_counter()
    for _ in range(k):
        meter.begin("empty")
        meter.end("empty")
    per_window_s = (time.perf_counter() - t0) / k
    # CPU the meter burns in the background (the timeline sampler thread, if any) while the
    # main thread sleeps: a contention-free measure of what it takes from the workload
    c0, t0 = time.process_time(), time.perf_counter()
    time.sleep(1.0)
    return per_window_s, (time.process_time() - c0) / (time.perf_counter() - t0)


def _print_figures(result: dict, args: argparse.Namespace) -> None:
    """Print the figures, one per line, and the verdict against the 2% target."""
    n = result["new_tokens"]
    med_bare, med_meter = result["median_bare_s"], result["median_metered_s"]
    per_window_s = result["per_window_cost_s"]
    background_cpu_fraction = result["background_cpu_fraction"]
    print(f"energy source         : {result['energy_source']} (timeline={args.timeline})")
    print(f"generate              : batch {args.batch_size}, {n} new tokens, {args.rounds} pairs")
    print(
        f"bare     median / mean: {med_bare * 1e3:9.2f} ms / {result['mean_bare_s'] * 1e3:.2f} ms"
    )
    print(
        f"metered  median / mean: {med_meter * 1e3:9.2f} ms / "
        f"{result['mean_metered_s'] * 1e3:.2f} ms"
    )
    print(f"overhead (median pair): {result['overhead_ratio_median_of_pairs']:+.3%}")
    print(f"overhead (total time) : {result['overhead_ratio_total']:+.3%}")
    cpu_ratio = result["cpu_overhead_ratio_median_of_pairs"]
    print(f"CPU-time overhead     : {cpu_ratio:+.3%} (median pair)")
    print(
        f"fixed cost per window : {per_window_s * 1e6:.1f} us "
        f"= {result['per_window_cost_fraction']:.4%} of one generate"
    )
    print(f"background CPU (idle) : {background_cpu_fraction:.4%} of one core")
    print(f"energy per generate   : {result['mean_energy_j']:.3f} J")
    verdict = "PASS" if result["overhead_ratio_median_of_pairs"] < 0.02 else "FAIL"
    print(f"{verdict}: overhead must stay under 2% of wall time")


if __name__ == "__main__":
    main()
