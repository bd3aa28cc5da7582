"""The Perseus paper's option specs: how its published frontiers were computed.

Perseus (SOSP 2024) builds each instruction's lowtime spec from the profile this way
(``lowtime/scripts/perseus.py`` in ml-energy/zeus, with lowtime's ``operation.py`` and
``cost_model.py``), and its published frontiers are that model's figures:

* each clock is an option with its measured time and energy; lowtime's
  :class:`~lowtime.operation.CandidateExecutionOptions` keeps the options no other beats on both
  time and *energy*, rounds times *down* to whole units (``int(time // unit)``) and, among
  options that round to the same step, keeps the costliest; where three or fewer remain, the
  filtering is redone with a noise factor of 0.95 (an option goes only when another is better
  by more than 5% on both);
* each remaining option costs its energy minus the blocking power times its *rounded* time;
* an exponential model ``a * exp(b * q) + c`` is fitted to those costs
  (:class:`~lowtime.cost_model.ExponentialModel`, ``search_strategy="best"``), and the solver
  works on the fitted costs;
* a plan at rounded iteration time ``q`` is reported as ``(q * unit, sum of the fitted costs of
  its instructions + stages * p_blocking * q * unit)``.

Those figures are the model's, not the profile's: rounded down, a plan's real iteration time is
longer than ``q * unit`` (on the GPT-3 175B A100 profile, the published 2.818 s plan runs
2.840 s), and its energy differs from the fitted one.
"""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING

import numpy as np
from lowtime.cost_model import ExponentialModel
from lowtime.operation import CandidateExecutionOptions, ExecutionOption, OperationSpec

from mlenergy.errors import UserError

if TYPE_CHECKING:
    from mlenergy.optimize.pipeline_options import OptionKey, OptionTable

NOISE_FACTOR = 0.95
"""Perseus's noise factor, applied where the strict filtering leaves three or fewer options."""
FEW_OPTIONS = 3
"""At most this many options after strict filtering and the noise factor applies."""


def perseus_candidates(
    time_s: list[float], energy_j: list[float], knobs: list[int], unit_s: float
) -> CandidateExecutionOptions:
    """The candidate options as Perseus builds them with lowtime (costs: measured energy).

    Args:
        time_s: Measured time of each option (s).
        energy_j: Measured energy of each option (J).
        knobs: The knob of each option.
        unit_s: Time unit (s).
    """

    def options() -> list[ExecutionOption]:
        return [
            ExecutionOption(real_time=t, unit_time=unit_s, cost=e, knob=k)
            for t, e, k in zip(time_s, energy_j, knobs, strict=True)
        ]

    cands = CandidateExecutionOptions(options=options())
    if len(cands.options) <= FEW_OPTIONS:
        cands = CandidateExecutionOptions(options=options(), noise_factor=NOISE_FACTOR)
    return cands


def perseus_spec(
    table: OptionTable, knobs: list[int], unit_s: float, p_blocking_w: float, key: OptionKey
) -> OperationSpec:
    """The spec of one (stage, instruction) as Perseus builds it.

    The fit depends only on the options, the unit and the blocking power; it is kept for the
    process (lowtime's grid search runs 54 fits per instruction), so DAGs of several
    microbatch counts on one profile share it.

    Args:
        table: The option table.
        knobs: The knobs of this instruction's options.
        unit_s: Time unit (s).
        p_blocking_w: Blocking power (W).
        key: ``(stage, instruction)``, for the error message.

    Raises:
        UserError: The exponential model cannot be fitted to the options (fewer than three
            remain, or no starting point of lowtime's grid search converges).
    """
    times = tuple(float(table.time_s[k]) for k in knobs)
    energies = tuple(float(table.energy_j[k]) for k in knobs)
    return _fitted_spec(times, energies, tuple(int(k) for k in knobs), unit_s, p_blocking_w, key)


@functools.lru_cache(maxsize=256)
def _fitted_spec(
    times: tuple[float, ...],
    energies: tuple[float, ...],
    knobs: tuple[int, ...],
    unit_s: float,
    p_blocking_w: float,
    key: OptionKey,
) -> OperationSpec:
    cands = perseus_candidates(list(times), list(energies), list(knobs), unit_s)
    for o in cands.options:
        o.cost -= p_blocking_w * o.quant_time * o.unit_time
    stage, inst = key
    if len(cands.options) < 3:
        raise UserError(
            f"--accounting perseus: stage {stage} {inst} keeps {len(cands.options)} option(s); "
            "the exponential cost model needs 3",
            "Profile more clocks or use --accounting real",
        )
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            model = ExponentialModel(cands, search_strategy="best")
    except (ValueError, RuntimeError, TypeError) as exc:
        raise UserError(
            f"--accounting perseus: the exponential cost model does not fit stage {stage} "
            f"{inst} ({exc})",
            "Use --accounting real",
        ) from None
    return OperationSpec(options=cands, cost_model=model)
