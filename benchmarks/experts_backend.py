"""Experts backend: decode step time of each MoE experts backend for the study's MoE models.

transformers runs the routed experts of an MoE layer through ``eager`` (a Python loop over the
experts hit), ``grouped_mm`` (one grouped GEMM over tokens sorted by expert) or ``batched_mm``
(each token's expert weights gathered, one batched GEMM). For every MoE variant of a study size
(random weights, the study's shapes: no training) and each of the study's inference batch
sizes, this prefills the study's prompt length once per backend and times decode steps with the
project's generator, backends interleaved round by round (A B C A B C ...) so a drift of a
shared machine falls on all of them alike. It prints the median step time per backend and which
is fastest (each cell: milliseconds, then the ratio to the fastest of its row): the evidence
behind ``mlenergy.models.experts.DEVICE_DEFAULTS``.

Run::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/experts_backend.py            # size tiny, CPU
    .venv/bin/python benchmarks/experts_backend.py --presets --device cuda --dtype bfloat16

``--presets`` adds the project's MoE presets (``preset:tiny-moe``, ``tiny-moe-fine``,
``tiny-moe-deepseek``). Timings on a shared machine move with its load; compare backends within
one run (each row's ratios), not figures across runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

PRESETS = ("tiny-moe", "tiny-moe-fine", "tiny-moe-deepseek")


def _models(size_name: str, presets: bool) -> list[tuple[str, object]]:
    """``(label, transformers config)`` of every MoE model to time."""
    from mlenergy.models.presets import preset_config
    from mlenergy.studies.families import get_size

    size = get_size(size_name)
    out = [
        (f"study:{size.name}/{v.name}", size.build_config(v))
        for v in size.variants
        if v.role == "moe"
    ]
    if presets:
        out += [(f"preset:{name}", preset_config(name)) for name in PRESETS]
    return out


def time_backends(
    loaded, batch: int, input_tokens: int, steps: int, rounds: int, generation: str
) -> dict[str, float]:
    """Median decode step time (s) of every experts backend at one batch size."""
    import torch

    from mlenergy.models.experts import set_experts_backend
    from mlenergy.records.generation import EXPERTS_BACKENDS
    from mlenergy.workloads.backends import resolve_generation
    from mlenergy.workloads.generation import make_generator

    torch.manual_seed(0)
    ids = torch.randint(0, loaded.vocab_size, (batch, input_tokens), device=loaded.device)
    backend = resolve_generation(generation, loaded.model, loaded.device)
    gen = make_generator(backend, loaded.model, loaded.device, input_tokens + steps + 1)
    times: dict[str, list[float]] = {b: [] for b in EXPERTS_BACKENDS}
    for b in EXPERTS_BACKENDS:  # compile and capture every backend before timing any
        set_experts_backend(loaded.model, b)
        gen.warm(ids, steps + 1)
        gen.generate(ids, 3)
    for _ in range(rounds):
        for b in EXPERTS_BACKENDS:
            set_experts_backend(loaded.model, b)
            state = gen.prefill(ids)
            times[b] += gen.decode(state, steps)
    return {b: statistics.median(t) for b, t in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="tiny", help="study size whose MoE variants to time")
    parser.add_argument("--presets", action="store_true", help="add the MoE presets")
    parser.add_argument("--batch-sizes", default=None, help="default: the size's inference ones")
    parser.add_argument("--steps", type=int, default=8, help="decode steps timed per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--generation", default="eager", help="eager or compiled-static-cache")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)

    import torch

    from mlenergy.errors import UserError
    from mlenergy.models import load_model
    from mlenergy.studies.families import get_size
    from mlenergy.workloads.inference import parse_batch_sizes

    torch.set_num_threads(args.threads)
    try:
        size = get_size(args.size)
        batches = (
            parse_batch_sizes(args.batch_sizes) if args.batch_sizes else size.infer_batch_sizes
        )
        models = _models(args.size, args.presets)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    input_tokens = size.infer_input_tokens
    print(
        f"decode step time per experts backend, ms (median of {args.rounds} rounds x "
        f"{args.steps} steps; prompt {input_tokens} tokens; {args.device}, {args.dtype}, "
        f"generation {args.generation}, torch threads {torch.get_num_threads()})"
    )
    print(f"{'model':36} {'batch':>5} {'eager':>15} {'grouped_mm':>15} {'batched_mm':>15}  fastest")
    rows = []
    for label, config in models:
        loaded = load_model(config, args.dtype, args.device, seed=0, model_id=label)
        for batch in batches:
            t = time_backends(loaded, batch, input_tokens, args.steps, args.rounds, args.generation)
            best = min(t, key=t.get)
            cells = " ".join(f"{f'{t[b] * 1e3:.2f} x{t[b] / t[best]:.2f}':>15}" for b in t)
            print(f"{label:36} {batch:>5} {cells}  {best}")
            rows.append({"model": label, "batch": batch, "step_s": t, "fastest": best})
        del loaded
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
