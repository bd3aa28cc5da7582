"""The scheduler limits an offline vLLM job runs under when its user sets none.

vLLM's ``LLM`` class (offline inference, usage context ``LLM_CLASS``) chooses its scheduler
limits from the GPU it runs on (``EngineArgs.get_batch_defaults``, vLLM 0.9 to 0.11): on a
GPU of at least 70 GiB that is not an A100, 16,384 batched tokens per step and 1,024
sequences at a time; on every other GPU, A100s included (a larger budget lowered their
throughput: vLLM pull request 17885), 8,192 tokens and 256 sequences. Each data-parallel
replica is an engine of its own with these limits. Its scheduler always chunks prompts and
puts the chunks into the same steps as the sequences already decoding (chunked prefill).

The 2024 engine (vLLM 0.5.4, ``leaderboard-v2-server``) ran 256 sequences at a time and, with
chunked prefill off (its default), prefilled whole prompts in steps of their own while the
decoding sequences waited. Its prefill steps held up to ``max_model_len`` tokens, which the
estimator does not know; they are modelled at the same token budget as the current engine's
(a prefill step is bound by its FLOPs, so the step size changes only its per-step host cost).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from mlenergy.reference.gpus import GpuSpec

LARGE_GPU_GIB = 70.0
"""Device memory (GiB) from which vLLM takes its larger offline defaults (A100s excepted)."""


@dataclass(frozen=True)
class OfflineScheduler:
    """Scheduler limits of one engine (one data-parallel replica) of an offline job.

    Attributes:
        max_num_batched_tokens: Tokens one step may carry (prompt chunks plus decode rows).
        max_num_seqs: Sequences decoding together.
        chunked_prefill: Whether prompt chunks share steps with the decoding sequences
            (False: prefill steps of their own, decoding paused).
    """

    max_num_batched_tokens: float
    max_num_seqs: float
    chunked_prefill: bool


LARGE_GPU_DEFAULTS = OfflineScheduler(16384.0, 1024.0, chunked_prefill=True)
"""vLLM's offline defaults on a GPU of at least :data:`LARGE_GPU_GIB` that is not an A100."""
SMALL_GPU_DEFAULTS = OfflineScheduler(8192.0, 256.0, chunked_prefill=True)
"""vLLM's offline defaults on every other GPU."""


def offline_scheduler(gpu: GpuSpec, legacy: bool = False) -> OfflineScheduler:
    """The limits vLLM's offline ``LLM`` class picks on ``gpu`` when none are set.

    Args:
        gpu: The GPU the job runs on (its memory in GiB and its name decide).
        legacy: The 2024 engine profile (vLLM 0.5.4): 256 sequences, no chunked prefill.
    """
    large = gpu.memory_gb >= LARGE_GPU_GIB and "a100" not in gpu.name.lower()
    limits = LARGE_GPU_DEFAULTS if large else SMALL_GPU_DEFAULTS
    if legacy:
        return replace(limits, max_num_seqs=256.0, chunked_prefill=False)
    return limits


def default_cap_note(requests: float, cap: float, gpu_name: str, replicas: int) -> str:
    """Warning for an offline job whose requests exceed vLLM's default ``max_num_seqs``.

    Args:
        requests: Requests of the job.
        cap: Sequences decoding together over all replicas (the default times ``replicas``).
        gpu_name: The GPU's name.
        replicas: Data-parallel replicas.
    """
    per = f"{cap / replicas:.0f} per replica x {replicas}" if replicas > 1 else f"{cap:.0f}"
    return (
        f"max_num_seqs not given: vLLM's offline default on {gpu_name} is {per} sequences at "
        f"a time, so {requests:.0f} requests run {cap:.0f} at a time and the rest queue "
        "(give max_num_seqs to set it)"
    )


def row_schedulers(
    gpus: list[GpuSpec | None], codes: np.ndarray, legacy: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row scheduler limits of a batch of estimates, each distinct one worked out once.

    Args:
        gpus: GPU of each distinct key (``None``: unresolved; the row is an error anyway and
            gets the small-GPU limits).
        codes: Each row's index into ``gpus``.
        legacy: Per row, whether the 2024 engine profile applies.

    Returns:
        ``(max_num_batched_tokens, max_num_seqs, chunked_prefill)`` arrays, per replica.
    """
    pair = np.asarray(codes, dtype=np.int64) * 2 + np.asarray(legacy, dtype=bool)
    if len(pair) == 1:
        uniq, inv = pair, np.zeros(1, dtype=np.int64)
    else:
        uniq, inv = np.unique(pair, return_inverse=True)
    found = [
        SMALL_GPU_DEFAULTS if gpus[u // 2] is None else offline_scheduler(gpus[u // 2], bool(u % 2))
        for u in uniq
    ]
    budget = np.array([s.max_num_batched_tokens for s in found], dtype=float)[inv]
    seqs = np.array([s.max_num_seqs for s in found], dtype=float)[inv]
    chunked = np.array([s.chunked_prefill for s in found], dtype=bool)[inv]
    return budget, seqs, chunked
