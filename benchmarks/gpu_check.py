"""GPU check: counter period, a ~1B-parameter bench on cuda, and counter vs power-sample energy.

On one NVIDIA GPU, with PyTorch and this project's wheels only, in a few minutes:

1. measure the update period of the GPU's energy counter (polling it through Zeus);
2. bench a random-weight ~1.1B-parameter Llama (TinyLlama's shape, bfloat16) on ``cuda`` with
   the project's runner: the GPU the model occupies is measured, windows span at least ten
   counter periods, decode times steps with CUDA events;
3. while it runs, sample the GPU's instant power in a thread and compare each measured
   window's counter energy with the integral of the samples over the window (target: within
   5%);
4. print every figure.

It only reads the GPU: it never changes clocks, power limits or persistence mode. Without a
visible NVIDIA GPU it prints one ``error:`` line and exits 2. Run::

    .venv/bin/python benchmarks/gpu_check.py            # add --json out.json to keep figures
    .venv/bin/python benchmarks/gpu_check.py --pace     # decode pace: benchmarks/gpu_pace.py
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 32000,
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_hidden_layers": 22,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}
"""TinyLlama-1.1B's shape (random weights: no download)."""


def no_gpu_reason() -> str | None:
    """Why this check cannot run here (``None`` when a CUDA GPU and Zeus's NVML are there)."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU is visible (torch.cuda.is_available() is False)"
    from mlenergy.measure.devices import discover_gpus

    gpus = discover_gpus()
    if gpus is None or len(gpus) == 0:
        return "Zeus finds no NVIDIA GPU through NVML"
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--pace" in argv:  # eager against compiled decode, dense against MoE: gpu_pace.py
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from gpu_pace import main as pace

        return pace([a for a in argv if a != "--pace"])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", type=int, default=0, help="CUDA index of the GPU to check")
    parser.add_argument("--batch-sizes", default="1,16,64")
    parser.add_argument("--input-tokens", type=int, default=512)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="also write the figures to this JSON file")
    parser.add_argument(
        "--pace",
        action="store_true",
        help="instead: eager against compiled decode, dense against MoE, in fresh processes "
        "(benchmarks/gpu_pace.py; --pace --help for its options)",
    )
    parser.add_argument(
        "--device", help="torch device to bench on (default: cuda:<--gpu>; for dry runs only)"
    )
    args = parser.parse_args(argv)

    reason = no_gpu_reason()
    if reason is not None:
        print(f"error: gpu_check needs an NVIDIA GPU: {reason}", file=sys.stderr)
        return 2

    import torch

    from mlenergy.measure import EnergyMeter
    from mlenergy.measure.counter_check import PowerSampler, agreement
    from mlenergy.measure.counter_period import estimate_update_period
    from mlenergy.measure.devices import discover_gpus
    from mlenergy.models import load_model
    from mlenergy.workloads.inference import InferenceSpec, parse_batch_sizes, run_inference_sweep

    started = time.perf_counter()
    gpus = discover_gpus()
    index = args.gpu
    device = args.device or f"cuda:{index}"
    out: dict = {"gpu": str(gpus.get_name(index)), "torch": torch.__version__}
    print(f"GPU {index}: {out['gpu']}, torch {torch.__version__}")

    period = estimate_update_period(
        lambda: float(gpus.get_total_energy_consumption(index)), budget_s=2.0
    )
    out["counter_period_s"] = period
    print(f"energy counter update period: {period * 1e3:.1f} ms" if period else "no period found")

    class LoggingMeter(EnergyMeter):
        """The project's meter, keeping every raw window result."""

        def __init__(self, **kwargs: object) -> None:
            super().__init__(**kwargs)  # type: ignore[arg-type]
            self.log: list = []

        def end(self, name: str):  # type: ignore[override]
            result = super().end(name)
            self.log.append(result)
            return result

    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.json"
        config.write_text(json.dumps(MODEL_CONFIG))
        loaded = load_model(str(config), "bfloat16", device, seed=0)
        params = sum(p.numel() for p in loaded.model.parameters())
        print(f"model: random-weight Llama, {params / 1e9:.2f} B parameters, bfloat16")
        spec = InferenceSpec(
            batch_sizes=parse_batch_sizes(args.batch_sizes),
            input_tokens=args.input_tokens,
            output_tokens=args.output_tokens,
            repeats=args.repeats,
            warmup=1,
            device=device,
            dtype="bfloat16",
            idle_s=1.0,
        )
        meter = LoggingMeter(gpu_indices=[index], cpu_indices=[])
        print(
            f"meter: {meter.energy_source}, scope {meter.scope.description}; counter period "
            f"{meter.counter_period_s * 1e3:.1f} ms, windows >= {meter.min_window_s:.2f} s"
        )
        with PowerSampler(gpus, index, period_s=0.002) as sampler:
            records = run_inference_sweep(loaded, spec, meter, progress=False)
        meter.close()

    out["records"] = []
    print("\nbench (per pass; energy per token in mJ):")
    for r in records:
        print(f"  batch {r.workload.batch_size}: {r.status}")
        for p in r.phases:
            ci = p.energy_per_token_j_ci95
            interval = f" [95% {ci.low * 1e3:.4g}-{ci.high * 1e3:.4g}]" if ci else ""
            print(
                f"    {p.phase.value:8s} {p.duration_s * 1e3:9.2f} ms  "
                f"{(p.energy_j or float('nan')):9.3f} J  "
                f"{(p.energy_per_token_j or float('nan')) * 1e3:9.4g} mJ/tok{interval}  "
                f"{(p.avg_power_w or float('nan')):7.1f} W  passes {p.passes_per_window}"
            )
        out["records"].append(r.model_dump(mode="json"))

    samples = sampler.samples
    print(f"\nwindows: counter energy vs integral of {len(samples)} power samples")
    checks = []
    for w in meter.log:
        counter_j = w.energy_by_device_j.get(f"gpu:{index}")
        if counter_j is None or w.start_time_s is None:
            continue
        c = agreement(w.name, w.start_time_s, w.duration_s, counter_j, samples)
        checks.append(c)
        diff = f"{c.relative_difference:+.1%}" if c.relative_difference is not None else "n/a"
        flag = "" if c.agrees else "  <-- beyond 5%"
        integral = f"{c.integral_j:10.3f}" if c.integral_j is not None else "       n/a"
        print(
            f"  {w.name:8s} {w.duration_s:7.3f} s  counter {counter_j:10.3f} J  "
            f"samples {integral} J  {diff}{' resolvable' if w.resolvable else ' SHORT'}{flag}"
        )
    agreed = sum(c.agrees for c in checks)
    out["windows"] = [c.__dict__ for c in checks]
    out["windows_within_5pct"] = f"{agreed} of {len(checks)}"
    out["elapsed_s"] = time.perf_counter() - started
    print(f"\n{agreed} of {len(checks)} windows within 5%; took {out['elapsed_s']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
