"""The host-bound rule for measured runs: the GPUs sat near idle through most of the time.

A GPU that waits for the host (transformers' eager Python decode loop, a client or server
front end that cannot keep up) draws little more than its idle power, and the energy per token
then measures idle power times the host's pace. On the H200 of docs/gpu-check.md, eager decode
of a 1.1 B model drew 134-174 W against a 120 W idle at batch 1 to 64, with steps 35-50x
longer than the memory allows. The rule, from the record's own figures:

* a window is **near idle** when its mean power is within :data:`IDLE_MARGIN` of the measured
  idle power, or, when the GPUs' power limit is known, when it used less than
  :data:`RANGE_SHARE` of the range between idle and that limit (the H200's eager decode: 2-9%
  of 120-700 W; the first clause alone would miss it, 12-45% above idle);
* the judged windows are those measured: a static batch's prefill and decode windows, a
  serving run's steady-state window;
* the run is **host-bound** when near-idle windows hold more than :data:`TIME_SHARE` of the
  judged time.

Idle is measured by the same meter over the same GPUs before the work (with the model loaded
and its CUDA context open, or the server up). The rule needs GPUs in scope and an idle
baseline: CPU-only runs (CPU-modelled, ``modelled:cpu-tdp``, or RAPL) are not judged, since
their device *is* the host and the CPU model charges the process's CPU time, idle or not;
nor are runs measured with ``--idle-s 0``. NVML's utilisation counter is not used: it is the
share of time any kernel runs, which a loop of tiny kernels keeps high while the GPU waits.

Reference rows are marked by the estimator's configuration rule instead
(:mod:`mlenergy.analysis.stalls`), since they carry no idle baseline; both marks are called
``host-bound`` (:data:`mlenergy.records.HOST_BOUND_MARK`).
"""

from __future__ import annotations

from mlenergy.records import HostBound, Phase, RunRecord

IDLE_MARGIN = 0.05
"""A window within 5% of the measured idle power is near idle."""
RANGE_SHARE = 0.10
"""... as is one that used less than 10% of the range from idle up to the power limit."""
TIME_SHARE = 0.5
"""A run is host-bound when near-idle windows hold more than half of the judged time."""
RULE = (
    f"a window is near idle when its mean power is within {IDLE_MARGIN:.0%} of the measured "
    f"idle power, or below idle + {RANGE_SHARE:.0%} of (power limit - idle); host-bound when "
    f"near-idle windows hold more than {TIME_SHARE:.0%} of the measured time"
)
"""The rule in words, kept on every verdict."""

_LEAVES = (Phase.PREFILL, Phase.DECODE)
"""Windows judged on a static batch (the request phase is their sum)."""


def near_idle(avg_power_w: float, idle_power_w: float, power_limit_w: float | None) -> bool:
    """Whether a window's mean power is near idle (see the module's rule).

    Args:
        avg_power_w: Mean power of the measured GPUs in the window, watts.
        idle_power_w: Their idle power, watts.
        power_limit_w: Their power limits summed, watts (``None``: unknown).
    """
    if avg_power_w <= idle_power_w * (1.0 + IDLE_MARGIN):
        return True
    if power_limit_w is None or power_limit_w <= idle_power_w:
        return False
    return avg_power_w - idle_power_w < RANGE_SHARE * (power_limit_w - idle_power_w)


def judge(run: RunRecord) -> HostBound | None:
    """The rule's verdict on one run, from its own figures.

    Returns:
        ``None`` where the rule does not apply: a failed or training run, no GPU in scope
        (CPU-modelled or RAPL-only runs), no idle baseline, or no window with a power figure.
    """
    if run.status != "ok" or run.workload.kind != "inference" or not run.scope.gpu_indices:
        return None
    idle = run.idle.avg_power_w if run.idle is not None else None
    if idle is None or idle <= 0:
        return None
    per_gpu = run.hardware.accelerator_tdp_w
    count = run.hardware.accelerator_count or len(run.scope.gpu_indices)
    limit = per_gpu * count if per_gpu is not None else None
    windows = [p for p in run.phases if p.phase in _LEAVES] or [
        p for p in run.phases if p.phase == Phase.REQUEST
    ]
    windows = [p for p in windows if p.avg_power_w is not None and p.duration_s > 0]
    if not windows:
        return None
    total = sum(p.duration_s for p in windows)
    idle_windows = [p for p in windows if near_idle(p.avg_power_w or 0.0, idle, limit)]
    share = sum(p.duration_s for p in idle_windows) / total
    return HostBound(
        marked=share > TIME_SHARE,
        near_idle_share=min(1.0, share),
        window_power_w={p.phase.value: float(p.avg_power_w or 0.0) for p in windows},
        near_idle=tuple(p.phase.value for p in idle_windows),
        idle_power_w=idle,
        power_limit_w=limit,
        rule=RULE,
        time_share_threshold=TIME_SHARE,
    )


def with_host_bound(run: RunRecord) -> RunRecord:
    """``run`` with the rule's verdict in ``host_bound`` (unchanged where it does not apply)."""
    verdict = judge(run)
    if verdict == run.host_bound:
        return run
    return run.model_copy(update={"host_bound": verdict})
