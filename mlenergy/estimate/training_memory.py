"""Memory of a training job per GPU: one optimizer-state rule and one usable-memory rule.

**Optimizer state.** Mixed-precision Adam holds 16 bytes per parameter: a bf16 weight and a
bf16 gradient (4 bytes) and an fp32 master weight with two fp32 moments (12 bytes). How they
spread over the data-parallel ranks depends on the parallel layout, and the estimator models
the usual one of each:

* a training step without pipeline stages is fully sharded data parallelism (PyTorch FSDP,
  ZeRO-3): all 16 bytes are split over the data-parallel ranks (``fully_sharded=True``);
* a pipeline-parallel job is Megatron-style 1F1B with the distributed optimizer (ZeRO-1), the
  setup of the Perseus profiles: each replica holds its stage's bf16 weights and gradients
  whole, and only the 12 bytes of fp32 state are split (``fully_sharded=False``).

**Usable memory** is that of the serving rule (:func:`~mlenergy.estimate.memory.usable_bytes`:
0.9 of the datasheet's binary GB), the headroom for the CUDA context, communication buffers and
the allocator being alike.
"""

from __future__ import annotations

from mlenergy.estimate.memory import usable_bytes

WEIGHT_GRAD_BYTES_PER_PARAM = 4.0
"""bf16 weight and bf16 gradient per parameter."""
ADAM_STATE_BYTES_PER_PARAM = 12.0
"""fp32 master weight and two fp32 moments per parameter."""
OPTIMIZER_BYTES_PER_PARAM = WEIGHT_GRAD_BYTES_PER_PARAM + ADAM_STATE_BYTES_PER_PARAM
"""All of mixed-precision Adam's bytes per parameter (16)."""
ACTIVATION_BYTES_PER_TOKEN_LAYER_HIDDEN = 34.0
"""Stored activations per token, layer and hidden unit without recomputation (bytes)."""


def state_bytes(params_gpu: float, data_parallel: float, fully_sharded: bool) -> float:
    """Bytes of weights, gradients and Adam state per GPU.

    Args:
        params_gpu: Parameters this GPU computes with (after tensor parallelism and stages).
        data_parallel: Data-parallel ranks.
        fully_sharded: FSDP / ZeRO-3 (everything split over the ranks), else the distributed
            optimizer (only the fp32 state split; see the module docstring).
    """
    if fully_sharded:
        return params_gpu * OPTIMIZER_BYTES_PER_PARAM / data_parallel
    return params_gpu * (WEIGHT_GRAD_BYTES_PER_PARAM + ADAM_STATE_BYTES_PER_PARAM / data_parallel)


def usable_gb(memory_gb: float) -> float:
    """Memory a job may use per GPU, in GB (1e9 bytes), on a GPU of ``memory_gb``."""
    return float(usable_bytes(memory_gb)) / 1e9
