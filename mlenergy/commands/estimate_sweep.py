"""The axes of ``mlenergy estimate --sweep``: ``name=v1,v2`` or ``name=start:stop:step``.

An axis is any option of the request (:class:`~mlenergy.estimate.request_types.EstimateRequest`)
named as on the command line, without its dashes (``batch-size``, ``sm-clock``,
``tensor-parallel``); the parsed axes go to :func:`mlenergy.estimate.api.sweep`, which
estimates every combination as one table.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlenergy.commands.typed import flags_of
from mlenergy.errors import UserError
from mlenergy.estimate.request_types import INTEGER_FIELDS, NUMBER_FIELDS, EstimateRequest

SWEEPABLE = {flag.removeprefix("--"): name for name, flag in flags_of(EstimateRequest).items()}
"""Sweep axis names (the options' names) and the request field each sets."""


def parse_sweep_axis(text: str) -> tuple[str, list[Any]]:
    """Parse ``name=v1,v2,...`` or ``name=start:stop:step`` (inclusive) into values.

    ``step`` is a positive magnitude; a range with ``start > stop`` counts down
    (``sm-clock=1980:900:90`` gives 1980, 1890, ..., 900).

    Raises:
        UserError: Unknown axis or malformed values.
    """
    if "=" not in text:
        raise UserError(f"sweep axis '{text}' must look like name=v1,v2 or name=a:b:step")
    name, values = text.split("=", 1)
    key = SWEEPABLE.get(name.strip().replace("_", "-"))
    if key is None:
        raise UserError(f"unknown sweep axis '{name}'", f"Use one of {', '.join(SWEEPABLE)}")
    if key not in NUMBER_FIELDS:
        return key, [v.strip() for v in values.split(",") if v.strip()]
    try:
        if ":" in values:
            start, stop, step = (float(x) for x in values.split(":"))
            if step <= 0:
                raise UserError(
                    f"sweep axis '{name.strip()}' needs a step > 0, got {step:g}",
                    "Write start:stop:step; a start above stop counts down",
                )
            sign = 1.0 if stop >= start else -1.0  # descending when start > stop
            vals = list(np.arange(start, stop + sign * step * 0.5, sign * step))
        else:
            vals = [float(v) for v in values.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"sweep axis '{text}' has malformed values") from None
    if not vals:
        raise UserError(f"sweep axis '{name.strip()}' has no values", "Give v1,v2 or a:b:step")
    if key in INTEGER_FIELDS:
        vals = [int(v) for v in vals]
    return key, vals
