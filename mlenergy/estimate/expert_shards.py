"""Expert parallelism in a serving step: the busiest shard and the fused-MoE kernel's tile.

Pieces of :mod:`~mlenergy.estimate.physics`: with expert parallelism each GPU holds a shard of
the routed experts and a MoE layer waits for the GPU that hit the most of its own
(:func:`max_shard_hits`); vLLM's untuned fused-MoE kernel switches to a larger tile once a
step's tokens exceed the experts a GPU holds (:func:`tile_switch`).
"""

from __future__ import annotations

import numpy as np

_MAX_NORMAL_LOG2N = np.arange(8.0)
_MAX_NORMAL = np.array([0.0, 0.5642, 1.0294, 1.4236, 1.7660, 2.0697, 2.3371, 2.5778])
"""Expected maximum of ``2**i`` independent standard normal draws (i = 0..7)."""


TILE_SWITCH_WIDTH = 0.1
"""Width (natural log of tokens over local experts) of the switch in :func:`tile_switch`."""


def tile_switch(tokens_per_local_expert: np.ndarray) -> np.ndarray:
    """Share of steps on the large default fused-MoE tile (0 below, 1 above one token per expert).

    vLLM's default Triton fused-MoE configuration uses 16-row tiles while the step's tokens
    ``M`` are at most the GPU's experts ``E`` and 64-row tiles beyond; the logistic switch,
    centred at ``M / E = sqrt(2)`` (between the batch sizes either side of the threshold),
    keeps the fit smooth.
    """
    x = np.log(np.maximum(tokens_per_local_expert, 1e-9)) - 0.5 * np.log(2.0)
    return 1.0 / (1.0 + np.exp(-x / TILE_SWITCH_WIDTH))


def max_shard_hits(
    hit: np.ndarray, e: np.ndarray, shards: np.ndarray, ep_on: np.ndarray
) -> np.ndarray:
    """Distinct experts hit on the busiest expert-parallel shard (mean over shards without EP).

    Each of ``shards`` GPUs holds ``E / shards`` experts, each hit with probability
    ``hit / E``; the count per GPU is binomial and the step waits for the largest of the
    ``shards`` counts (normal approximation of its expected maximum, capped at all experts
    of the shard).
    """
    m = e / shards
    pr = np.clip(hit / np.maximum(e, 1.0), 0.0, 1.0)
    mean = m * pr
    sd = np.sqrt(m * pr * (1.0 - pr))
    z = np.interp(np.log2(np.maximum(shards, 1.0)), _MAX_NORMAL_LOG2N, _MAX_NORMAL)
    top = np.minimum(mean + z * sd, m)
    return np.where(ep_on, top, hit / shards)
