"""The study report's statement of how its inference generated: decode and experts backends.

A dense-versus-MoE ratio of energy per token compares the MoE layers' experts backend as much
as the architecture (on this project's CPU one experts backend decoded the study's MoE models
up to 5x slower than another), so the report says, from the records themselves, which decode
backend every model ran with and which experts backend the MoE variants used, and why.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

_WHY = {
    "measured": "the fastest decode step, timed at start-up",
    "device-default": "the device's documented default",
    "requested": "named with --experts-backend",
    "as-set": "as set on the model",
}


def _batches(sizes: Iterable[int]) -> str:
    ordered = sorted(set(sizes))
    return "batch " + ", ".join(str(b) for b in ordered)


def generation_note(runs: Iterable[Any]) -> str | None:
    """One paragraph: decode backend(s) and the MoE variants' experts backend(s), or ``None``.

    Args:
        runs: The study's run records (training records, without ``generation``, are skipped).

    Returns:
        The statement, or ``None`` when no inference record says how it generated.
    """
    inference = [r for r in runs if getattr(r, "generation", None) is not None]
    if not inference:
        return None
    decode: dict[str, set[str]] = defaultdict(set)
    experts: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in inference:
        g = r.generation
        decode[g.backend].add(f"torch {g.torch}, transformers {g.transformers}")
        if g.experts_backend is not None:
            experts[(g.experts_backend, g.experts_backend_source)].append(r.workload.batch_size)
    parts = [
        f"{backend} ({'; '.join(sorted(versions))})" for backend, versions in sorted(decode.items())
    ]
    text = "Generation: inference decoded with " + " and ".join(parts) + "."
    if not experts:
        return text + " No model ran MoE layers through transformers' experts interface."
    uses = [
        f"{backend} ({_WHY.get(source, source)}; {_batches(sizes)})"
        for (backend, source), sizes in sorted(experts.items())
    ]
    return text + " The MoE variants ran their experts with " + " and ".join(uses) + "."
