"""Estimates as a table (:class:`EstimateTable`) and as one row (:class:`Estimate`).

:func:`~mlenergy.estimate.table.estimate_table` fills the table; a single estimate is its
row 0. Nothing here computes a figure: it only reads the table's columns.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

import numpy as np

from mlenergy.errors import UserError
from mlenergy.estimate.engines import CURRENT_ENGINE
from mlenergy.estimate.requests import EstimateRequests

if TYPE_CHECKING:
    from mlenergy.estimate.prediction import Prediction
    from mlenergy.estimate.table_keys import ModelOnGpu

BREAKDOWN_KEYS = {
    "prefill": "energy_prefill_j",
    "decode": "energy_decode_j",
    "compute": "energy_compute_j",
    "memory": "energy_memory_j",
    "static_idle": "energy_static_j",
    "overhead": "energy_overhead_j",
}
"""``Estimate.breakdown_j_per_token`` keys and the :class:`Prediction` field each reads (J per
token)."""


@functools.cache
def estimator_version() -> str:
    """Version of the installed ``mlenergy-lab`` distribution (``0+unknown`` if not installed).

    Read once per process: the package metadata lookup costs more than an estimate.
    """
    try:
        return version("mlenergy-lab")
    except PackageNotFoundError:
        return "0+unknown"


def energy_source() -> str:
    """The ``energy_source`` label of estimates: ``estimated:mlenergy-<version>``."""
    return f"estimated:mlenergy-{estimator_version()}"


@dataclass(frozen=True)
class Estimate:
    """An estimate of steady-state serving or of an offline job (units in names).

    Energy figures are GPU energy summed over all GPUs of the configuration.
    """

    model: str
    gpu: str
    precision: str
    num_gpus: int
    tensor_parallel: int
    expert_parallel: int
    data_parallel: int
    pipeline_parallel: int
    batch_size: float
    input_tokens: float
    output_tokens: float
    task: str | None
    sm_clock_mhz: float
    power_limit_w: float | None
    energy_per_token_j: float
    energy_per_token_j_lo: float
    energy_per_token_j_hi: float
    energy_per_request_j: float
    throughput_tokens_per_s: float
    avg_power_w: float
    itl_s: float
    request_duration_s: float  # output_tokens x itl (prefill chunks interleaved)
    prefill_duration_s: float  # part of request_duration_s spent prefilling
    breakdown_j_per_token: dict[str, float]
    memory_gb_per_gpu: dict[str, float]
    total_params: int
    active_params: int
    architecture: str
    is_moe: bool
    energy_source: str
    extra: dict[str, Any] = field(default_factory=dict)
    warning: str = ""  # caveats ("; "-joined), as the batch CSV's ``warning`` column
    engine: str = CURRENT_ENGINE  # serving engine (see mlenergy.estimate.engines)
    mode: str = "serving"  # or "offline": a fixed set of requests (see estimate.offline)
    max_output_tokens: float | None = None  # generation cap of an offline job (tokens)
    max_num_seqs: float | None = None  # the engine's concurrency cap (all replicas)

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-compatible)."""
        return asdict(self)


def _given(v: float) -> float | None:
    return None if np.isnan(v) else float(v)


@dataclass(frozen=True)
class EstimateTable:
    """Estimates of a table of requests: one entry per request in every column.

    Attributes:
        requests: The requests, as given.
        error: Per row, why it could not be estimated (``""``: estimated).
        warning: Per estimated row, its caveats (``"; "``-joined; ``""``: none).
        keys: The distinct (model, GPU, precision) resolved (``None``: unresolved).
        codes: Each row's index into ``keys``.
        engine: Each row's engine profile.
        offline: Which rows are offline jobs.
        input_tokens: Each row's prompt length (the task's default where none was given).
        num_gpus: Each row's GPU count (derived where none was given).
        prediction: The physical model's outputs per row (serving rows from
            :func:`~mlenergy.estimate.physics.predict`, offline jobs from
            :func:`~mlenergy.estimate.offline.predict_offline`; NaN on rows whose input was
            refused before the physics).
        interval: Multiplicative (low, high) factors of the 90% interval per row.
        memory_gb: Per-GPU memory in GB per row (``weights``, ``workspace``, ``kv_cache``,
            ``total``, ``usable``).
    """

    requests: EstimateRequests
    error: np.ndarray
    warning: np.ndarray
    keys: list[ModelOnGpu | None]
    codes: np.ndarray
    engine: np.ndarray
    offline: np.ndarray
    input_tokens: np.ndarray
    num_gpus: np.ndarray
    prediction: Prediction
    interval: tuple[np.ndarray, np.ndarray]
    memory_gb: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.error)

    def ok(self) -> np.ndarray:
        """Rows that were estimated."""
        return self.error == ""

    def columns(self) -> dict[str, np.ndarray]:
        """The batch contract's output columns (NaN on rows with an error)."""
        pred = self.prediction
        e = pred.energy_per_token_j
        lo, hi = self.interval
        good = self.ok()
        cols = {
            "energy_per_token_j": e,
            "energy_per_token_j_lo": e * lo,
            "energy_per_token_j_hi": e * hi,
            "throughput_tokens_per_s": pred.throughput_tokens_per_s,
            "avg_power_w": pred.avg_power_w,
        }
        return {k: np.where(good, v, np.nan) for k, v in cols.items()}

    def estimate(self, i: int) -> Estimate:
        """Row ``i`` as an :class:`Estimate`.

        Raises:
            UserError: The row's error (bad input, or a configuration that does not fit).
        """
        if self.error[i]:
            raise UserError(str(self.error[i]))
        r = self.requests
        key = self.keys[self.codes[i]]
        assert key is not None  # a row without error has a resolved key
        pred = self.prediction
        e, out_tok = float(pred.energy_per_token_j[i]), float(r.output_tokens[i])
        step = float(pred.step_s[i])
        offline = bool(self.offline[i])
        prof, spec = key.prof, key.spec
        return Estimate(
            model=str(r.model[i]),
            gpu=key.gpu.name,
            precision=prof.precision if not prof.is_moe else prof.expert_precision,
            num_gpus=int(self.num_gpus[i]),
            tensor_parallel=int(r.tensor_parallel[i]),
            expert_parallel=int(r.expert_parallel[i]),
            data_parallel=int(r.data_parallel[i]),
            pipeline_parallel=int(r.pipeline_parallel[i]),
            batch_size=float(r.batch_size[i]),
            input_tokens=float(self.input_tokens[i]),
            output_tokens=out_tok,
            task=str(r.task[i]) or None,
            sm_clock_mhz=float(pred.clock_mhz[i]),
            power_limit_w=_given(r.power_limit_w[i]),
            energy_per_token_j=e,
            energy_per_token_j_lo=e * float(self.interval[0][i]),
            energy_per_token_j_hi=e * float(self.interval[1][i]),
            energy_per_request_j=e * out_tok,
            throughput_tokens_per_s=float(pred.throughput_tokens_per_s[i]),
            avg_power_w=float(pred.avg_power_w[i]),
            itl_s=step,
            request_duration_s=float(pred.job_duration_s[i]) if offline else step * out_tok,
            prefill_duration_s=float(pred.prefill_duration_s[i])
            if offline
            else float(pred.t_prefill_s[i]) * out_tok,
            breakdown_j_per_token={
                k: float(getattr(pred, v)[i]) for k, v in BREAKDOWN_KEYS.items()
            },
            memory_gb_per_gpu={k: float(v[i]) for k, v in self.memory_gb.items()},
            total_params=prof.total_params,
            active_params=prof.active_params,
            architecture=spec.model_type,
            is_moe=spec.is_moe,
            energy_source=energy_source(),
            warning=str(self.warning[i]),
            engine=str(self.engine[i]),
            mode="offline" if offline else "serving",
            max_output_tokens=_given(r.max_output_tokens[i]),
            max_num_seqs=_given(r.max_num_seqs[i]),
        )

    def estimates(self) -> list[Estimate]:
        """Every estimated row as an :class:`Estimate`, in order (rows with errors left out)."""
        return [self.estimate(int(i)) for i in np.flatnonzero(self.ok())]
