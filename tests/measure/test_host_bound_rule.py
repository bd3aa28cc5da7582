"""The host-bound rule: a run whose GPUs sat near their measured idle most of the time."""

from __future__ import annotations

import pytest

from mlenergy.measure.host_bound import RANGE_SHARE, judge, near_idle, with_host_bound
from mlenergy.records import (
    Hardware,
    IdleBaseline,
    MeasuredScope,
    Phase,
    PhaseResult,
    RunRecord,
    Software,
    Workload,
)
from mlenergy.testing.synthetic import synthetic_model

SOURCE = "measured:zeus-nvml"


def run_of(
    windows: dict[str, tuple[float, float]],
    idle_w: float | None = 120.0,
    tdp_w: float | None = 700.0,
    gpus: tuple[int, ...] = (0,),
    energy_source: str = SOURCE,
) -> RunRecord:
    """A record whose windows are ``{phase: (seconds, mean watts)}`` (request: their sum)."""
    phases = [
        PhaseResult.from_totals(Phase(name), d, d * w, 100) for name, (d, w) in windows.items()
    ]
    if "request" not in windows:
        d = sum(p.duration_s for p in phases)
        phases.append(
            PhaseResult.from_totals(Phase.REQUEST, d, sum(p.energy_j for p in phases), 100)
        )
    hardware = (
        Hardware(
            accelerator_model="NVIDIA H200", accelerator_count=len(gpus), accelerator_tdp_w=tdp_w
        )
        if gpus
        else Hardware()
    )
    idle = (
        None
        if idle_w is None
        else IdleBaseline(avg_power_w=idle_w, duration_s=2.5, energy_source=energy_source)
    )
    return RunRecord(
        model=synthetic_model("org/tiny-1b", 1.1, False),
        workload=Workload(
            kind="inference", batch_size=1, input_tokens=512, output_tokens=128, num_requests=1
        ),
        hardware=hardware,
        software=Software(python="3.12", mlenergy="0"),
        energy_source=energy_source,
        scope=MeasuredScope(gpu_indices=gpus),
        phases=tuple(phases),
        idle=idle,
    )


def test_the_h200_eager_decode_is_marked():
    """docs/gpu-check.md, batch 1: prefill 17.9 ms at 219.5 W, decode 2.11 s at 139.9 W."""
    verdict = judge(run_of({"prefill": (0.01792, 219.5), "decode": (2.11485, 139.9)}))
    assert verdict.marked and verdict.near_idle == ("decode",)
    assert verdict.near_idle_share == pytest.approx(2.11485 / (2.11485 + 0.01792))
    assert verdict.window_power_w == {"prefill": 219.5, "decode": 139.9}
    assert verdict.power_limit_w == 700.0 and verdict.idle_power_w == 120.0
    assert "host-bound" in verdict.describe() and "139.9 W" in verdict.describe()


def test_the_h200_batch_64_decode_is_marked_by_the_power_range_clause():
    """173.6 W is 45% above the 120 W idle but used 9% of the range up to 700 W."""
    assert not near_idle(173.6, 120.0, None)  # the idle-margin clause alone misses it
    verdict = judge(run_of({"prefill": (0.1728, 686.0), "decode": (2.4029, 173.6)}))
    assert verdict.marked and verdict.near_idle == ("decode",)


def test_a_busy_gpu_is_not_marked():
    verdict = judge(run_of({"prefill": (0.05, 650.0), "decode": (1.0, 420.0)}))
    assert verdict is not None and not verdict.marked
    assert verdict.near_idle == () and verdict.near_idle_share == 0.0
    assert verdict.describe().startswith("not host-bound")


def test_near_idle_windows_must_hold_most_of_the_time():
    verdict = judge(run_of({"prefill": (2.0, 600.0), "decode": (1.0, 125.0)}))
    assert verdict.near_idle == ("decode",) and verdict.near_idle_share == pytest.approx(1 / 3)
    assert not verdict.marked


def test_without_a_power_limit_only_the_idle_margin_counts():
    assert near_idle(125.0, 120.0, None)
    assert not near_idle(140.0, 120.0, None)
    assert near_idle(140.0, 120.0, 700.0)  # 3% of the range
    assert not near_idle(120.0 + RANGE_SHARE * 580.0 + 1.0, 120.0, 700.0)
    assert judge(run_of({"decode": (1.0, 140.0)}, tdp_w=None)).marked is False


def test_the_limit_and_idle_cover_every_measured_gpu():
    verdict = judge(run_of({"decode": (1.0, 2 * 150.0)}, idle_w=2 * 120.0, gpus=(0, 1)))
    assert verdict.power_limit_w == 1400.0 and verdict.marked  # (300-240)/(1400-240) = 5%


def test_a_serving_window_is_judged_alone():
    verdict = judge(run_of({"request": (60.0, 130.0)}))
    assert verdict.window_power_w == {"request": 130.0} and verdict.marked


@pytest.mark.parametrize(
    "record",
    [
        run_of({"decode": (1.0, 20.0)}, gpus=(), energy_source="modelled:cpu-tdp"),
        run_of({"decode": (1.0, 121.0)}, idle_w=None),
        run_of({"decode": (1.0, 121.0)}, idle_w=0.0),
    ],
    ids=["cpu-modelled", "no-idle", "zero-idle"],
)
def test_the_rule_does_not_apply_without_a_gpu_or_an_idle_baseline(record):
    assert judge(record) is None
    assert with_host_bound(record).host_bound is None


def test_a_failed_run_is_not_judged():
    ok = run_of({"decode": (1.0, 121.0)})
    failed = ok.model_copy(update={"status": "failed", "error": "out of memory", "phases": ()})
    assert judge(failed) is None


def test_the_verdict_travels_with_the_record_and_changes_its_hash():
    plain = run_of({"decode": (1.0, 121.0)})
    marked = with_host_bound(plain)
    assert marked.host_bound.marked
    again = RunRecord.model_validate_json(marked.model_dump_json())
    assert again.host_bound == marked.host_bound
    assert marked.content_hash() != plain.content_hash()
