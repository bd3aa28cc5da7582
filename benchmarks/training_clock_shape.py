"""Training-stage energy against the SM clock: the estimator against the measured A40 profiles.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/training_clock_shape.py``.
Targets, per shipped Perseus profile (GPT-3 175B, Bloom 176B on A40) and instruction: the
energy at each clock over the energy at the top clock within 5% of the measured ratio at every
clock and stage, and the least-energy clock within 90 MHz of the measured one. Prints, for each
profile and instruction, the worst ratio error over stages and clocks (and where), the measured
and estimated least-energy clocks, and the ratios at a few clocks of the middle stage.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

from mlenergy.optimize.estimated_profile import clock_shape_agreement
from mlenergy.optimize.reference_profiles import PERSEUS_PROFILES

RATIO_TARGET = 0.05
"""Largest relative error of the energy ratio at any clock."""
BEST_CLOCK_TARGET_MHZ = 90
"""Largest distance between estimated and measured least-energy clocks (MHz)."""
SHOWN_CLOCKS = (1740, 1500, 1245, 1050, 945, 870)


def main() -> None:
    """Print the figures and the targets met."""
    met = total = 0
    for name in PERSEUS_PROFILES:
        shapes = clock_shape_agreement(name)
        for inst in ("forward", "backward"):
            rows = [s for s in shapes if s.instruction == inst]
            worst = max(rows, key=lambda s: s.worst_ratio_error)
            far = max(rows, key=lambda s: s.best_clock_error_mhz)
            ratio_ok = worst.worst_ratio_error <= RATIO_TARGET
            best_ok = far.best_clock_error_mhz <= BEST_CLOCK_TARGET_MHZ
            met += ratio_ok + best_ok
            total += 2
            print(
                f"{name} {inst:8s}: energy-ratio error {worst.worst_ratio_error:6.1%} "
                f"(stage {worst.stage}, {worst.worst_clock_mhz} MHz; target 5%: "
                f"{'yes' if ratio_ok else 'NO'}); least-energy clock measured "
                f"{far.measured_best_mhz} MHz, estimated {far.estimated_best_mhz} MHz "
                f"(off {far.best_clock_error_mhz} MHz; target 90: {'yes' if best_ok else 'NO'})"
            )
            mid = next(s for s in rows if s.stage == 3)
            cells = [
                f"{f}: {m:.3f}/{e:.3f}"
                for f, m, e in zip(
                    mid.clocks_mhz, mid.measured_ratio, mid.estimated_ratio, strict=True
                )
                if f in SHOWN_CLOCKS
            ]
            print(f"    stage 3 E(f)/E(top) measured/estimated  {'  '.join(cells)}")
    print(f"targets met: {met} of {total}")


if __name__ == "__main__":
    main()
