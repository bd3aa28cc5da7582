"""How a model is spread over GPUs: the parallel layout of a request, an estimate or a run.

The four parallel degrees are named here once (:data:`DEGREES`); an estimate request
(:class:`mlenergy.estimate.request_types.EstimateRequest`), the batch CSV's columns and the
``mlenergy estimate`` options take their names from :class:`ParallelLayout`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, kw_only=True)
class ParallelLayout:
    """The GPUs a model occupies and how it is split over them.

    Dense layers span ``tensor_parallel x pipeline_parallel x data_parallel`` GPUs; experts
    span ``expert_parallel`` GPUs. Whether a layout fits a model (heads divisible by the
    tensor-parallel degree, experts by the expert-parallel one) is the estimator's check
    (:mod:`mlenergy.estimate.checks`).
    """

    num_gpus: int | None = None
    """GPUs used: max(tp x pp x dp, ep), derived from the degrees when not given."""
    tensor_parallel: int = 1
    """Tensor-parallel degree."""
    expert_parallel: int = 1
    """Expert-parallel degree (above 1: the experts sharded over all GPUs)."""
    data_parallel: int = 1
    """Data-parallel replicas."""
    pipeline_parallel: int = 1
    """Pipeline stages."""


DEGREES = tuple(f.name for f in fields(ParallelLayout) if f.name != "num_gpus")
"""The parallel degrees' names, in their order (each 1 when not given)."""
