"""The floor ``benchmarks/training_clock_shape.py`` prints: what any curve shared by the two
shipped Perseus A40 profiles must miss one of them by (docs/estimate.md, "One power model")."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from mlenergy.optimize.estimated_profile import ClockShape, clock_shape_agreement

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "training_clock_shape.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("benchmark_training_clock_shape", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shape(profile: str, inst: str, measured: tuple[float, ...], estimated: tuple[float, ...]):
    return ClockShape(profile, 0, inst, (1740, 900), measured, estimated, 900, 900)


def test_shared_curve_floor_is_half_the_gap_over_the_mean(bench):
    first = [_shape("a", "forward", (1.0, 0.85), (1.0, 0.8))]
    second = [_shape("b", "forward", (1.0, 0.75), (1.0, 0.8))]
    floor, stage, clock, ra, rb = bench.shared_curve_floor(first, second, "forward")
    assert (stage, clock, ra, rb) == (0, 900, 0.85, 0.75)
    assert floor == pytest.approx(0.1 / 1.6)
    # The curve at 2ab / (a + b) misses both by exactly the floor, so no curve misses by less.
    shared = 2 * 0.85 * 0.75 / 1.6
    assert abs(shared / 0.85 - 1) == pytest.approx(floor)
    assert abs(shared / 0.75 - 1) == pytest.approx(floor)
    assert bench.estimated_spread(first, second, "forward") == 0.0


def test_the_two_measured_profiles_are_further_apart_than_the_ratio_goal(bench):
    """GPT-3 175B and Bloom 176B: near-identical estimated curves, measured ones over 10% apart."""
    first, second = (clock_shape_agreement(name) for name in bench.PERSEUS_PROFILES)
    for inst in ("forward", "backward"):
        floor, *_ = bench.shared_curve_floor(first, second, inst)
        assert floor > bench.RATIO_TARGET
        assert bench.estimated_spread(first, second, inst) < 0.02
    best = {s.measured_best_mhz for s in first + second if s.instruction == "backward"}
    assert max(best) - min(best) > 2 * bench.BEST_CLOCK_TARGET_MHZ
