"""GPU pace: is decode paced by the GPU or by Python? Eager against compiled, dense against MoE.

Run as ``benchmarks/gpu_check.py --pace`` (or this file directly). On one NVIDIA GPU, in each
of ``--processes`` fresh processes (the spread between processes is part of the answer; every
process runs every configuration below, building each model once, on the GPU), it benches:

* the gpu_check's random-weight ~1.1 B Llama (bfloat16) with ``--generation eager`` and with
  ``compiled-static-cache``, at batch 1 and 32;
* a random-weight Mixtral-shaped MoE of the same active size (8 experts of half the dense FFN,
  top-2: the same active FFN width) with the compiled backend, under each experts backend.

Every process first measures the GPU's memory bandwidth (a device-to-device copy). The parent
prints, per configuration and batch: each process's median decode step, their mean and spread
((max - min) / mean), the memory bound (weight bytes one step reads / measured bandwidth; for the
MoE the experts a batch is expected to touch under uniform routing), step / bound, and the decode
energy per token with its spread; then the MoE/dense energy-per-token ratio per experts backend.
"Bytes one step reads" counts the weights it uses and the KV cache (:func:`bytes_read`).
Goals: the compiled batch-1 dense step within 3x of the memory bound; the spread under 5%.

It only reads the GPU: it never changes clocks or power limits. ``--budget-s`` (default 450 s)
stops launching processes that would not finish in time and says which were skipped; the
whole run is meant to fit 8 minutes with the defaults (2 repeats of each point).

``--dry-run`` runs the same plumbing on the CPU with tiny shapes and the CPU power model
(``modelled:cpu-tdp``, not a GPU figure): to test the script without a GPU. Compiling on a CPU
takes minutes; ``--generations eager --moe-generation eager`` keeps a dry run short.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

HERE = Path(__file__).resolve().parent

MOE_FROM_DENSE = {
    "architectures": ["MixtralForCausalLM"],
    "model_type": "mixtral",
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
}
"""The MoE: the dense shape with 8 experts of half its FFN width, top 2 (same active FFN)."""

DRY_SHAPE = {
    "vocab_size": 2048, "hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
}  # fmt: skip
"""Tiny shape of a dry run (the CPU)."""

MARK = "PACE "
"""Prefix of the one stdout line a child process reports on."""


def dense_config(dry_run: bool) -> dict:
    """The dense model's config: gpu_check's ~1.1 B Llama, or a tiny one for a dry run."""
    sys.path.insert(0, str(HERE))
    from gpu_check import MODEL_CONFIG

    return {**MODEL_CONFIG, **DRY_SHAPE} if dry_run else dict(MODEL_CONFIG)


def moe_config(dense: dict) -> dict:
    """The Mixtral-shaped MoE of the same active size as ``dense``."""
    return {**dense, **MOE_FROM_DENSE, "intermediate_size": dense["intermediate_size"] // 2}


def experts_touched(num_experts: int, top_k: int, tokens: int) -> float:
    """Expected fraction of a layer's experts that ``tokens`` tokens route to (uniform routing)."""
    return 1.0 - (1.0 - top_k / num_experts) ** tokens


def bytes_read(info: dict, config: dict, batch: int, context: float, bytes_per: int) -> float:
    """Bytes one decode step must read from memory: the weights it uses and the KV cache.

    Weights: all of a dense model's but the input embedding table (one row per token is
    read); for an MoE the shared weights plus the experts ``batch`` tokens are expected to
    touch (:func:`experts_touched`). KV cache: keys and values of ``context`` tokens (the mean
    over the decode) of every sequence and layer.
    """
    total, active = info["total_params"], info["active_params"]
    used = float(total)
    if info.get("num_experts"):
        experts = (total - active) / (1 - info["experts_per_token"] / info["num_experts"])
        touched = experts_touched(info["num_experts"], info["experts_per_token"], batch)
        used = total - experts + experts * touched
    if not config.get("tie_word_embeddings", True):
        used -= config["vocab_size"] * config["hidden_size"]
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    kv = 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim
    return (used + kv * context * batch) * bytes_per


def spread(values: list[float]) -> float | None:
    """(max - min) / mean of per-process figures; ``None`` with fewer than two."""
    if len(values) < 2:
        return None
    return (max(values) - min(values)) / statistics.mean(values)


class Arm(NamedTuple):
    """One configuration: which model, how it decodes, which experts backend."""

    label: str
    model: str
    generation: str
    experts_backend: str = "auto"


def arms(generations: list[str], moe_generation: str, moe_backends: list[str]) -> list[Arm]:
    """Dense under each generation backend, then the MoE under each experts backend."""
    out = [Arm(f"dense {g}", "dense", g) for g in generations]
    out += [Arm(f"moe {moe_generation} {b}", "moe", moe_generation, b) for b in moe_backends]
    return out


def measure_bandwidth(device: str, mib: int = 1024, repeats: int = 10) -> float:
    """Device memory bandwidth in bytes/s: a copy reads and writes ``mib`` MiB (median)."""
    import torch

    from mlenergy.workloads.generation import step_timer, synchronize

    n = mib * 2**20
    src = torch.empty(n, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    timer = step_timer(device)
    for _ in range(repeats):
        timer.start()
        dst.copy_(src)
        timer.stop()
    synchronize(device)
    return 2 * n / statistics.median(timer.times_s())


def _bench_arm(loaded, spec: dict, arm: dict, meter) -> list[dict]:
    """One arm's sweep in this process: per batch size, the figures the report reads."""
    import torch

    from mlenergy.workloads.inference import InferenceSpec, run_inference_sweep

    run = InferenceSpec(
        batch_sizes=tuple(spec["batch_sizes"]),
        input_tokens=spec["input_tokens"],
        output_tokens=spec["output_tokens"],
        repeats=spec["repeats"],
        warmup=1,
        dtype=spec["dtype"],
        device=spec["device"],
        idle_s=spec["idle_s"],
        generation=arm["generation"],
        experts_backend=arm["experts_backend"],
    )
    records = run_inference_sweep(loaded, run, meter, progress=False, reuse_idle=True)
    info = loaded.info.model_dump()
    bytes_per = torch.empty((), dtype=getattr(torch, spec["dtype"])).element_size()
    context = spec["input_tokens"] + spec["output_tokens"] / 2
    points = []
    for r in records:
        dec = r.phase("decode")
        batch = r.workload.batch_size
        config = spec["configs"][arm["model"]]
        points.append(
            {
                "batch": batch,
                "status": r.status,
                "step_s": dec.itl_p50_s if dec else None,
                "decode_j_per_token": dec.energy_per_token_j if dec else None,
                "bytes_read": bytes_read(info, config, batch, context, bytes_per),
                "generation": r.generation.label() if r.generation else None,
                "warmup_s": r.generation.warmup_s if r.generation else None,
                "idle_w": r.idle.avg_power_w if r.idle else None,
                "power_w": dec.avg_power_w if dec else None,
            }
        )
    return points


def child(spec: dict) -> dict:
    """One fresh process: the bandwidth, then every arm (each model built once, on the device).

    Returns:
        ``bandwidth_bps``, ``energy_source`` and, per arm label, its points or its error.
    """
    import torch
    from transformers import AutoConfig

    from mlenergy.measure import EnergyMeter
    from mlenergy.models import load_model

    device, dtype = spec["device"], spec["dtype"]
    bandwidth = measure_bandwidth(device, mib=spec["bandwidth_mib"])
    if spec["dry_run"]:
        meter = EnergyMeter(cpu_tdp_w=65.0)
    else:
        meter = EnergyMeter(gpu_indices=[torch.device(device).index or 0], cpu_indices=[])
    out: dict = {"bandwidth_bps": bandwidth, "energy_source": meter.energy_source, "arms": {}}
    loaded, name = None, None
    try:
        for arm in spec["arms"]:
            if arm["model"] != name:
                loaded = None  # free the previous model first
                raw = dict(spec["configs"][arm["model"]])
                config = AutoConfig.for_model(raw.pop("model_type"), **raw)
                with torch.device(device):  # random weights made where they run
                    loaded = load_model(config, dtype, device, seed=0, model_id=arm["model"])
                name = arm["model"]
            try:
                out["arms"][arm["label"]] = {"points": _bench_arm(loaded, spec, arm, meter)}
            except Exception as exc:  # one arm failing (e.g. a backend that cannot compile)
                out["arms"][arm["label"]] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        meter.close()
    return out


def _run_child(spec: dict, timeout_s: float) -> dict:
    """Run :func:`child` in a fresh interpreter; its dict, or ``{"error": ...}``."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:.0f} s"}
    for line in done.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :])
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"exit {done.returncode}: {tail[:300]}"}


def _fmt(v: float | None, scale: float = 1.0, digits: int = 4) -> str:
    return "-" if v is None else f"{v * scale:.{digits}g}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def report(results: dict[str, list[dict]], goals: bool) -> list[str]:
    """The printed table: per arm and batch, steps per process, bound, energy, spreads."""
    lines = [
        f"{'configuration':38} {'batch':>5} {'step ms per process':>26} {'spread':>7} "
        f"{'bound ms':>9} {'x bound':>8} {'mJ/tok':>9} {'spread':>7}"
    ]
    table: dict[tuple[str, int], dict] = {}
    for label, procs in results.items():
        ok = [p for p in procs if "error" not in p]
        for p in procs:
            if "error" in p:
                lines.append(f"{label:38} process failed: {p['error']}")
        batches = sorted({pt["batch"] for p in ok for pt in p["points"]})
        for b in batches:
            pts = [pt for p in ok for pt in p["points"] if pt["batch"] == b and pt["step_s"]]
            if not pts:
                continue
            steps = [pt["step_s"] for pt in pts]
            energy = [pt["decode_j_per_token"] for pt in pts if pt["decode_j_per_token"]]
            bw = statistics.mean(p["bandwidth_bps"] for p in ok)
            bound = pts[0]["bytes_read"] / bw
            row = {
                "step_s": statistics.mean(steps),
                "bound_s": bound,
                "j_per_token": statistics.mean(energy) if energy else None,
                "step_spread": spread(steps),
                "energy_spread": spread(energy),
            }
            table[(label, b)] = row
            each = " ".join(f"{s * 1e3:.3g}" for s in steps)
            lines.append(
                f"{label:38} {b:>5} {each:>26} {_pct(row['step_spread']):>7} "
                f"{bound * 1e3:>9.3g} {row['step_s'] / bound:>8.2f} "
                f"{_fmt(row['j_per_token'], 1e3):>9} {_pct(row['energy_spread']):>7}"
            )
    dense = next((k[0] for k in table if k[0].startswith("dense compiled")), None)
    dense = dense or next((k[0] for k in table if k[0].startswith("dense")), None)
    ratios = []
    for (label, b), row in table.items():
        base = table.get((dense, b)) if dense else None
        if label.startswith("moe") and base and row["j_per_token"] and base["j_per_token"]:
            ratios.append(
                f"  {label} / {dense}, batch {b}: {row['j_per_token'] / base['j_per_token']:.3g}"
            )
    if ratios:
        lines += ["", "MoE/dense decode energy per token:", *ratios]
    if goals:
        lines += ["", *_goals(table)]
    return lines


def _goals(table: dict[tuple[str, int], dict]) -> list[str]:
    """The pace goals, each met or not, with its figure."""
    out = []
    row = next((r for (label, b), r in table.items() if label.startswith("dense compiled")
                and b == 1), None)  # fmt: skip
    if row is not None:
        x = row["step_s"] / row["bound_s"]
        out.append(f"goal: compiled batch-1 step within 3x of the memory bound: {x:.2f}x "
                   f"({'met' if x <= 3 else 'not met'})")  # fmt: skip
    worst = [r["step_spread"] for r in table.values() if r["step_spread"] is not None]
    if worst:
        w = max(worst)
        out.append(f"goal: step spread between processes under 5%: worst {w:.1%} "
                   f"({'met' if w < 0.05 else 'not met'})")  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--gpu", type=int, default=0, help="CUDA index of the GPU")
    parser.add_argument("--processes", type=int, default=3, help="fresh processes per config")
    parser.add_argument("--batch-sizes", default="1,32")
    parser.add_argument("--input-tokens", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--generations", default="eager,compiled-static-cache")
    parser.add_argument("--moe-generation", default="compiled-static-cache")
    parser.add_argument("--moe-backends", default="eager,grouped_mm,batched_mm")
    parser.add_argument("--budget-s", type=float, default=450.0, help="stop launching after")
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny shapes, modelled")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)

    if args.child is not None:
        print(MARK + json.dumps(child(json.loads(args.child))), flush=True)
        return 0
    if not args.dry_run:
        sys.path.insert(0, str(HERE))
        from gpu_check import no_gpu_reason

        reason = no_gpu_reason()
        if reason is not None:
            print(f"error: --pace needs an NVIDIA GPU (or --dry-run): {reason}", file=sys.stderr)
            return 2
    dense = dense_config(args.dry_run)
    configs = {"dense": dense, "moe": moe_config(dense)}
    base = {
        "device": "cpu" if args.dry_run else f"cuda:{args.gpu}",
        "dtype": "float32" if args.dry_run else "bfloat16",
        "dry_run": args.dry_run,
        "batch_sizes": [int(b) for b in args.batch_sizes.split(",")],
        "input_tokens": args.input_tokens,
        "output_tokens": args.output_tokens,
        "repeats": args.repeats,
        "idle_s": 0.2 if args.dry_run else 1.0,
        "bandwidth_mib": 64 if args.dry_run else 1024,
    }
    plan = arms(args.generations.split(","), args.moe_generation, args.moe_backends.split(","))
    base["configs"] = configs
    base["arms"] = [a._asdict() for a in plan]
    started = time.perf_counter()
    results: dict[str, list[dict]] = {a.label: [] for a in plan}
    processes: list[dict] = []
    longest = 0.0
    for i in range(args.processes):
        left = args.budget_s - (time.perf_counter() - started)
        if left < longest:
            print(f"skipped process {i + 1}: {left:.0f} s of budget left, "
                  f"a process took {longest:.0f} s")  # fmt: skip
            continue
        t0 = time.perf_counter()
        done = _run_child(base, max(left, 1.0))
        longest = max(longest, time.perf_counter() - t0)
        print(f"  process {i + 1}: {time.perf_counter() - t0:.0f} s", flush=True)
        processes.append(done)
        for label in results:
            arm = done.get("arms", {}).get(label, {"error": done.get("error", "not run")})
            results[label].append({**arm, "bandwidth_bps": done.get("bandwidth_bps")})
    first = next((p for p in processes if "error" not in p), None)
    if first is not None:
        print(f"\nenergy source: {first['energy_source']}"
              + (" (dry run on the CPU: not a GPU figure)" if args.dry_run else ""))  # fmt: skip
        print(f"memory bandwidth (copy): {first['bandwidth_bps'] / 1e9:.3g} GB/s")
    print("\n".join(report(results, goals=not args.dry_run)))
    print(f"\ntook {time.perf_counter() - started:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(processes, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
