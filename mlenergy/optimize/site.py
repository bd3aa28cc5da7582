"""The site a power-cap plan serves from: its budget, PUE, host power and the defaults of each.

The site defaults live here once: a PUE of :data:`SITE_PUE` and :data:`SITE_HOST_W_PER_GPU`
watts of host power (CPU, memory, network) per GPU, used by ``mlenergy optimize power-cap``,
:func:`mlenergy.optimize.power_cap.plan_power_cap` and the leaderboard's Power budget view
(its table and its API) alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from mlenergy.errors import UserError

SITE_PUE = 1.2
"""Power usage effectiveness of a site when none is given (total over IT power)."""

SITE_HOST_W_PER_GPU = 150.0
"""Host power (CPU, memory, network) per GPU when none is given, watts."""


@dataclass(frozen=True)
class SiteParams:
    """The site: power budget (W), PUE, host power per GPU (W), price (per kWh), peak factor.

    ``price_kwh`` is ``None`` unless the user gave a price: no cost is shown then.

    ``peak_factor`` multiplies the measured average GPU power to give the power the budget must
    hold at peaks (1.0: the average).
    """

    budget_w: float
    pue: float = SITE_PUE
    host_w_per_gpu: float = SITE_HOST_W_PER_GPU
    price_kwh: float | None = None
    peak_factor: float = 1.0

    def replica_site_w(self, gpu_w: Any, num_gpus: Any, peak: bool = False) -> Any:
        """Site power of one replica (W): (GPU power [x peak factor] + host share) x PUE.

        Args:
            gpu_w: Average power of the replica's GPUs, all of them together (W); a float or an
                array.
            num_gpus: GPUs in the replica.
            peak: Apply :attr:`peak_factor` to the GPU power (the figure the budget holds).
        """
        factor = self.peak_factor if peak else 1.0
        return (gpu_w * factor + self.host_w_per_gpu * num_gpus) * self.pue

    def check(self) -> None:
        """Raises UserError on a non-positive budget, a PUE below 1 or a negative host power."""
        for name, value, ok in (
            ("--budget-w", self.budget_w, self.budget_w > 0),
            ("--pue", self.pue, self.pue >= 1.0),
            ("--host-w-per-gpu", self.host_w_per_gpu, self.host_w_per_gpu >= 0),
            ("--peak-factor", self.peak_factor, self.peak_factor >= 1.0),
        ):
            if not (ok and math.isfinite(value)):
                raise UserError(f"{name} is {value}; it is out of range", "Pass a sensible value")
        price = self.price_kwh
        if price is not None and not (price >= 0 and math.isfinite(price)):
            raise UserError(f"--price-kwh is {price}; it is out of range", "Pass a sensible value")
