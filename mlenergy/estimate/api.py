"""Public entry points: one estimate, a what-if sweep, over typed requests.

>>> from mlenergy.estimate import estimate
>>> e = estimate("meta-llama/Llama-3.1-8B-Instruct", "H100", batch_size=64,
...              input_tokens=512, output_tokens=256)            # doctest: +SKIP
>>> e.energy_per_token_j, e.throughput_tokens_per_s               # doctest: +SKIP
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mlenergy.errors import UserError
from mlenergy.estimate.coefficients import Coefficients
from mlenergy.estimate.request_types import EstimateRequest, GpuSettings, ParallelLayout
from mlenergy.estimate.requests import EstimateRequests
from mlenergy.estimate.table import estimate_table
from mlenergy.estimate.table_rows import Estimate, energy_source, estimator_version

__all__ = [
    "Estimate",
    "EstimateRequest",
    "GpuSettings",
    "ParallelLayout",
    "energy_source",
    "estimate",
    "estimator_version",
    "sweep",
]


def estimate(
    *request: Any,
    configs_dir: str | Path | None = None,
    coefficients: Coefficients | None = None,
    **fields: Any,
) -> Estimate:
    """Estimate energy, throughput and power of serving a model on a GPU (or of an offline job).

    Give the request as an :class:`~mlenergy.estimate.request_types.EstimateRequest`, or its
    fields: ``model``, ``gpu``, ``batch_size`` and ``output_tokens`` (positional or by name),
    then any other field by name, the parallel layout's and the GPU settings' among them
    (``tensor_parallel=2``, ``power_limit_w=500``). Each field is documented where the request
    declares it; a request and field keywords together replace those fields of the request.

    The memory fit follows :mod:`~mlenergy.estimate.memory`: weights and workspace that do not
    fit are an error; a KV cache that does not fit is an error when ``input_tokens`` is given
    and a warning (``Estimate.warning``) when it is the task default.

    Args:
        *request: An ``EstimateRequest``, or its fields without default in order.
        configs_dir: Folder of ``<org>__<name>.json`` configs.
        coefficients: Model coefficients (default: the shipped calibration).
        **fields: Fields of the request by name (flat).

    Raises:
        TypeError: An unknown field, or a field without default missing.
        UserError: Bad input (naming the field) or a configuration that does not fit in memory.
    """
    table = EstimateRequests.of([EstimateRequest.of(*request, **fields)])
    return estimate_table(table, configs_dir, coefficients).estimate(0)


def sweep(
    base: EstimateRequest | Mapping[str, Any],
    axes: Mapping[str, Sequence[Any]],
    *,
    configs_dir: str | Path | None = None,
    coefficients: Coefficients | None = None,
) -> list[Estimate | str]:
    """Estimate every combination of ``axes`` over the ``base`` request.

    The combinations are one table of requests (the path of every estimate), so a sweep of
    thousands of points takes about as long as one estimate.

    Args:
        base: A request, or its flat fields (a swept field may be left out).
        axes: Values per request field (flat names, e.g. ``batch_size``, ``sm_clock_mhz``).
        configs_dir: Folder of ``<org>__<name>.json`` configs.
        coefficients: Model coefficients (default: the shipped calibration).

    Returns:
        One :class:`Estimate` per combination, or the error message where it cannot be made
        (e.g. a batch that does not fit), in :func:`itertools.product` order.

    Raises:
        TypeError: An unknown field, or a field without default in neither base nor axes.
    """
    flat = base.flat() if isinstance(base, EstimateRequest) else dict(base)
    names = list(axes)
    combos = [
        EstimateRequest.of(**{**flat, **dict(zip(names, combo, strict=True))})
        for combo in itertools.product(*(axes[n] for n in names))
    ]
    if not combos:
        return []
    table = estimate_table(EstimateRequests.of(combos), configs_dir, coefficients)
    results: list[Estimate | str] = []
    for i in range(len(combos)):
        try:
            results.append(table.estimate(i))
        except UserError as exc:
            results.append(exc.message)
    return results
