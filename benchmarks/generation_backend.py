r"""Generation backend: eager against compiled static-cache decode, step time and compile time.

For a model (default ``preset:tiny-dense``) at each batch size, this builds the project's two
generators (:mod:`mlenergy.workloads.generation`): ``eager`` (transformers' forward, dynamic KV
cache) and ``compiled-static-cache`` (static KV cache, ``torch.compile``'d decode forward; CUDA
graphs on a GPU), plus the same static-cache loop uncompiled, to separate the cache from the
compiler. It times the compiled generator's preparation (compilation and capture), checks that
all three generate the same tokens, then times decode steps with the three interleaved round by
round (A B C A B C ...), so a drift of a shared machine falls on all alike. It prints the median
step time of each and its ratio to eager: the evidence behind
``mlenergy.workloads.backends.DEVICE_DEFAULTS``.

Run::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/generation_backend.py
    .venv/bin/python benchmarks/generation_backend.py --device cuda --dtype bfloat16 \
        --model preset:tiny-moe --batch-sizes 1,32

Compilation on a CPU takes minutes on a loaded machine; timings move with the load, so compare
the ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="preset:tiny-dense")
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument("--input-tokens", type=int, default=64)
    parser.add_argument("--steps", type=int, default=16, help="decode steps timed per round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)

    import torch

    from mlenergy.errors import UserError
    from mlenergy.models import load_model
    from mlenergy.workloads.generation import (
        EagerGenerator,
        StaticCacheGenerator,
        synchronize,
    )
    from mlenergy.workloads.inference import parse_batch_sizes

    torch.set_num_threads(args.threads)
    try:
        batches = parse_batch_sizes(args.batch_sizes)
        loaded = load_model(args.model, args.dtype, args.device, seed=0)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    tokens = args.steps + 1
    print(
        f"{args.model} on {args.device} ({args.dtype}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s)); prompt {args.input_tokens} tokens; median decode "
        f"step of {args.rounds} rounds x {args.steps} steps"
    )
    print(
        f"{'batch':>5} {'eager ms':>9} {'static ms':>10} {'compiled ms':>12} "
        f"{'compiled/eager':>15} {'compile s':>10}  same tokens"
    )
    rows = []
    for batch in batches:
        ids = torch.randint(0, loaded.vocab_size, (batch, args.input_tokens), device=args.device)
        max_tokens = args.input_tokens + tokens
        gens = {
            "eager": EagerGenerator(loaded.model, args.device),
            "static": StaticCacheGenerator(loaded.model, args.device, max_tokens, compile=False),
            "compiled": StaticCacheGenerator(loaded.model, args.device, max_tokens),
        }
        t0 = time.perf_counter()
        gens["compiled"].warm(ids, tokens)
        synchronize(args.device)
        compile_s = time.perf_counter() - t0
        outputs = {name: g.generate(ids, tokens) for name, g in gens.items()}
        same = all(torch.equal(o, outputs["eager"]) for o in outputs.values())
        times: dict[str, list[float]] = {name: [] for name in gens}
        for _ in range(args.rounds):
            for name, g in gens.items():
                state = g.prefill(ids)
                times[name] += g.decode(state, args.steps)
        med = {name: statistics.median(t) for name, t in times.items()}
        print(
            f"{batch:>5} {med['eager'] * 1e3:>9.2f} {med['static'] * 1e3:>10.2f} "
            f"{med['compiled'] * 1e3:>12.2f} {med['compiled'] / med['eager']:>15.2f} "
            f"{compile_s:>10.1f}  {'yes' if same else 'NO'}"
        )
        rows.append({"batch": batch, "step_s": med, "compile_s": compile_s, "same": same})
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
