"""What a calibration learned about its data besides the coefficients: the calibration report.

The fitted coefficients of the physical model (:mod:`~mlenergy.estimate.coefficients`,
``coefficients.json``) say how time and power follow from a configuration. The report
(``coefficients.report.json`` beside them) holds the facts of the data they were fitted and
cross-validated on: the prediction-interval quantiles, the configurations whose runs were
host-bound (:class:`HostBoundRule`), the prompt lengths fitted per task, the GPUs present and
the fit's size. The estimator reads both; they are kept in two files so that the physics is
not mixed with what one campaign's measurements showed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class HostBoundRule:
    """Configurations whose calibration runs were host-bound: a fact of the calibration data.

    In the v3 reference data, single-GPU B200 runs of the long-output and multimodal tasks
    often sat at 25-45 ms per step with the GPU near idle, whatever the batch (see
    :mod:`~mlenergy.estimate.host_bound`). The rule names such configurations by their inputs
    only, so it ships in the calibration report of the coefficients fitted on that data.

    Attributes:
        gpu: Catalog GPU name (e.g. ``B200``).
        num_gpus: GPUs of the configuration.
        tasks: Canonical task labels.
    """

    gpu: str
    num_gpus: int
    tasks: tuple[str, ...]

    def describe(self) -> str:
        """The configurations in words, e.g. ``one B200 with gpqa, image-chat or video-chat``."""
        count = "one" if self.num_gpus == 1 else str(self.num_gpus)
        tasks = list(self.tasks)
        listed = ", ".join(tasks[:-1]) + f" or {tasks[-1]}" if len(tasks) > 1 else "".join(tasks)
        return f"{count} {self.gpu} with {listed}"


@dataclass(frozen=True)
class CalibrationReport:
    """The calibration data's facts that estimates use beside the coefficients.

    Attributes:
        log_q05: 5th percentile of log(measured/predicted) energy per token (cross-validated).
        log_q95: 95th percentile of the same.
        log_q05_host: 5th percentile of the same over configurations whose reference runs
            were host-bound (:mod:`~mlenergy.estimate.host_bound`); ``None``: use ``log_q05``.
        log_q95_host: 95th percentile of the same; ``None``: use ``log_q95``.
        unseen_gpu_widen: Interval widening factor for GPUs absent from calibration.
        calibrated_gpus: GPUs present in the calibration data.
        task_input_tokens: Mean prompt length per task label (tokens), fitted as workload
            descriptors because the reference data does not publish prompt lengths.
        host_bound_rule: Configurations whose calibration runs were host-bound (``None``: no
            such configurations known).
        interval_by_class: (5th, 95th) percentile log errors per ``<gpu>/<family>`` class
            (e.g. ``B200/moe``) with enough cross-validated rows, outside the host-bound
            rule: the interval is wider where the data say so (and narrower), else the
            common ``log_q05``/``log_q95``.
        fit_info: Free-form description of the fit (rows, models).
    """

    log_q05: float = -0.25
    log_q95: float = 0.25
    log_q05_host: float | None = None
    log_q95_host: float | None = None
    unseen_gpu_widen: float = 1.5
    calibrated_gpus: tuple[str, ...] = ()
    task_input_tokens: dict[str, float] = field(default_factory=dict)
    host_bound_rule: HostBoundRule | None = None
    interval_by_class: dict[str, tuple[float, float]] = field(default_factory=dict)
    fit_info: dict[str, object] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        data = asdict(self)
        data["calibrated_gpus"] = list(self.calibrated_gpus)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CalibrationReport:
        """A report from JSON data (keys it does not know are ignored)."""
        kw = {k: v for k, v in data.items() if k in REPORT_FIELDS}
        kw["calibrated_gpus"] = tuple(kw.get("calibrated_gpus") or ())
        kw["interval_by_class"] = {
            str(k): (float(v[0]), float(v[1]))
            for k, v in (kw.get("interval_by_class") or {}).items()
        }
        rule = kw.get("host_bound_rule")
        if rule is not None and not isinstance(rule, HostBoundRule):
            kw["host_bound_rule"] = HostBoundRule(
                gpu=str(rule["gpu"]), num_gpus=int(rule["num_gpus"]), tasks=tuple(rule["tasks"])
            )
        return cls(**kw)


REPORT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(CalibrationReport))
"""The names of the report's entries."""
