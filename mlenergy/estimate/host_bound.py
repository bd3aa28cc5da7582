"""Configurations whose reference measurements were host-bound.

In the v3 reference data, single-GPU B200 runs of the long-output (``gpqa``) and multimodal
(``image-chat``, ``video-chat``) tasks often sat at 25-45 ms per step with the GPU near idle
(about 300 W of 1000 W) whatever the batch. The same models on H100, or on B200 with other
tasks, follow the roofline. This is a host-side bottleneck of that measurement campaign, and
no datasheet figure predicts it.

The cause is not known. One suspect is the serving engine's front end: the campaign's public
engine settings (ML.ENERGY benchmark repository) give the stalled runs one API-server process
(vLLM's ``api-server-count``) where other runs had 3 or 8. But some runs with one did not
stall (gpt-oss-120b on one B200), and the same rule matches them. The setting is not an
input of an estimate, so the rule flags these configurations instead of modelling a stall
(``docs/estimator-tried.md`` lists the stall models tried).

The rule itself is a fact of the calibration data, so it ships in the calibration report
beside the coefficients (:class:`~mlenergy.estimate.calibration_report.HostBoundRule` in
``coefficients.report.json``); this module applies it. The estimator still predicts these
configurations at the speed the GPU allows. The rule is used in four places:

* the fit weighs the matching rows less (:mod:`~mlenergy.calibrate.calibration`);
* their prediction interval comes from the cross-validated errors of the matching rows;
* their estimates carry a warning (:func:`host_bound_note`);
* ``mlenergy estimate validate`` reports their errors apart (all-row figures still include
  them).

The rule looks only at a configuration's inputs (GPU, GPU count, task), never at
measurements.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from mlenergy.estimate.calibration_report import HostBoundRule
from mlenergy.estimate.engines import canonical_task

MIN_HOST_BOUND_ROWS = 20
"""Fewest matching cross-validated rows for their own interval (else the common one)."""


def host_bound_note(rule: HostBoundRule) -> str:
    """The warning attached to estimates of configurations the rule matches."""
    return (
        f"reference runs of this kind ({rule.describe()}) were often host-bound: up to 3-4x "
        "slower than the GPU allows at a third of its power, and so more energy per token "
        "than this estimate, which assumes a host that keeps up with the GPU; the interval "
        "is widened to the errors measured on those runs"
    )


def host_bound_label(rule: HostBoundRule | None) -> str:
    """One line describing the rule, for reports (``validate``)."""
    if rule is None:
        return "none: the coefficients name no host-bound configurations"
    return (
        f"{rule.describe()} (inputs only); reference runs of this kind were often "
        "host-bound (see mlenergy/estimate/README.md), so validate reports them apart"
    )


def host_bound_mask(
    gpu: np.ndarray | list[str],
    num_gpus: np.ndarray | list[float],
    task: np.ndarray | list[str],
    rule: HostBoundRule | None,
) -> np.ndarray:
    """Which configurations match ``rule`` (vectorised; no rule: none).

    Args:
        gpu: Catalog GPU names (resolved, e.g. ``B200``).
        num_gpus: GPUs per configuration.
        task: Workload labels (any spelling :func:`~mlenergy.estimate.engines.canonical_task`
            accepts; blank or None: no task).
        rule: The rule of the coefficients in use.
    """
    gpus = np.asarray(gpu, dtype=object).astype(str)
    if rule is None:
        return np.zeros(len(gpus), dtype=bool)
    count = np.asarray(num_gpus, dtype=float)
    if len(gpus) == 1:  # one estimate: no pandas call (it costs more than the estimate)
        only = next(iter(task))
        codes, labels = np.zeros(1, dtype=np.int64), ["" if only is None else str(only)]
    else:
        codes, uniques = pd.factorize(pd.Series(list(task), dtype=object).fillna("").astype(str))
        labels = uniques.tolist()
    matching = np.array([canonical_task(t) in rule.tasks for t in labels], dtype=bool)
    task_match = matching[codes] if len(labels) else np.zeros(len(codes), dtype=bool)
    return (gpus == rule.gpu) & (count == rule.num_gpus) & task_match


def is_host_bound(gpu: str, num_gpus: float, task: str | None, rule: HostBoundRule | None) -> bool:
    """:func:`host_bound_mask` for one configuration (no array overhead)."""
    return (
        rule is not None
        and gpu == rule.gpu
        and float(num_gpus) == rule.num_gpus
        and canonical_task(task) in rule.tasks
    )
