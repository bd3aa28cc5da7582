"""Sweeps as plans: a YAML grid of measured runs or estimates, run in-process or on Ray.

>>> from mlenergy.sweep import load_plan, check_plan, run_sweep, LocalExecutor
>>> plan = load_plan("examples/sweep-tiny.yaml")                    # doctest: +SKIP
>>> runs = check_plan(plan)                                          # doctest: +SKIP
>>> run_sweep(runs, RunStore("data"), LocalExecutor())               # doctest: +SKIP

Each run's key is a hash of its specification (:attr:`RunSpec.key`), kept on its records as
``tags["sweep_key"]``: a stored run is never run or stored again. The Ray executor lives in
:mod:`mlenergy.sweep.ray_executor` (imported only when used).
"""

from __future__ import annotations

from mlenergy.sweep.checks import check_plan
from mlenergy.sweep.driver import SweepSummary, dry_run_lines, run_sweep, stored_keys
from mlenergy.sweep.local import LocalExecutor
from mlenergy.sweep.outcome import Outcome
from mlenergy.sweep.plan import Plan, Resources, load_plan, parse_plan
from mlenergy.sweep.spec import KEY_TAG, RunSpec

__all__ = [
    "KEY_TAG",
    "LocalExecutor",
    "Outcome",
    "Plan",
    "Resources",
    "RunSpec",
    "SweepSummary",
    "check_plan",
    "dry_run_lines",
    "load_plan",
    "parse_plan",
    "run_sweep",
    "stored_keys",
]
