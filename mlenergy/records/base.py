"""Shared base classes and small value types for every record.

All records are frozen pydantic models that forbid unknown fields, so a typo in a submitted
bundle is an error rather than a silently dropped value. Units live in field names.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Annotated, Any, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

SCHEMA_VERSION: Final = "1.0"
"""Version of the record schema; bumped on any incompatible change."""

ENERGY_SOURCE_PATTERN = r"^(measured|modelled|emulated|estimated|reference):[A-Za-z0-9_.+\-]+$"
"""Where an energy figure came from, e.g. ``measured:zeus-nvml`` or ``modelled:cpu-tdp``.

Prefixes:
    measured: read from a hardware counter through Zeus (``zeus-nvml``, ``zeus-rapl``, ...).
    modelled: computed from a documented power model because no counter exists.
    emulated: produced by emulated devices in tests; never accepted as a submission.
    estimated: predicted by the analytical estimator (``estimated:mlenergy-<version>``).
    reference: imported from a published measurement table (e.g. ``reference:mlenergy-v3``).
"""

_ENERGY_SOURCE_RE = re.compile(ENERGY_SOURCE_PATTERN)


def _check_energy_source(value: str) -> str:
    if not _ENERGY_SOURCE_RE.match(value):
        raise ValueError(
            f"energy_source {value!r} must look like 'measured:zeus-nvml', 'modelled:cpu-tdp', "
            "'emulated:test' or 'estimated:mlenergy-<version>'"
        )
    return value


EnergySource = Annotated[str, AfterValidator(_check_energy_source)]
"""A validated energy-source label (see :data:`ENERGY_SOURCE_PATTERN`)."""

NonNegFloat = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
PosInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]


class FrozenModel(BaseModel):
    """Base for all records: immutable, no unknown fields, no NaN or infinity.

    No float field of any record accepts NaN or infinity, whether built in Python or parsed
    from JSON. A non-finite float that bypassed validation (``model_construct``) is written as
    the bare ``NaN`` / ``Infinity`` constant, which every reader refuses, never as ``null``
    (a ``null`` would read back as a missing value, or fail on a required field later).
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", allow_inf_nan=False, ser_json_inf_nan="constants"
    )


def canonical_json(data: Any) -> str:
    """Serialise plain data to a canonical JSON string (sorted keys, no spaces).

    Args:
        data: JSON-compatible data (dicts, lists, str, numbers, None).

    Returns:
        A deterministic JSON text, suitable for hashing.
    """
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(text: str) -> str:
    """Return the hex SHA-256 of a UTF-8 string."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Interval(FrozenModel):
    """A two-sided interval, e.g. a 95% confidence interval, in the unit of its owner field.

    Attributes:
        low: Lower end.
        high: Upper end (not below ``low``).
    """

    low: float = Field(allow_inf_nan=False)
    high: float = Field(allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> Interval:
        if self.low > self.high:
            raise ValueError(f"interval low {self.low} is above high {self.high}")
        return self


class RepeatStats(FrozenModel):
    """A quantity measured over several repeats: values, mean, spread and 95% CI of the mean.

    The unit is that of the field that holds it (e.g. ``energy_j_repeats`` is in joules).

    Attributes:
        n: Number of repeats.
        values: The value of each repeat, in the order measured.
        mean: Their mean.
        std: Their sample standard deviation.
        ci95: Student-t 95% confidence interval of the mean (``None`` for one repeat).
    """

    n: PosInt
    values: tuple[float, ...]
    mean: float
    std: NonNegFloat
    ci95: Interval | None = None

    @model_validator(mode="after")
    def _consistent(self) -> RepeatStats:
        if len(self.values) != self.n:
            raise ValueError(f"RepeatStats has n={self.n} but {len(self.values)} values")
        mean = sum(self.values) / self.n
        if not math.isclose(mean, self.mean, rel_tol=1e-6, abs_tol=1e-9):
            raise ValueError(f"RepeatStats mean {self.mean} differs from mean of values {mean}")
        return self

    @classmethod
    def from_values(
        cls, values: list[float] | tuple[float, ...], nonnegative: bool | None = None
    ) -> RepeatStats:
        """Summarise repeat values with a 95% confidence interval of the mean.

        The interval is the Student-t interval ``mean ± t(0.975, n-1) x std / sqrt(n)``. For a
        quantity that cannot be negative (energy in joules, a duration in seconds) that
        interval can reach below 0 when the repeats are few and spread out (e.g. ``n=2``);
        such a bound is impossible, so for a non-negative quantity the interval is the
        Student-t interval *truncated at 0*: ``low = max(0, mean - half)``, ``high`` unchanged.
        The truncated interval still contains the mean and is never wider than the t interval.

        Args:
            values: One value per repeat (at least one), in the unit of the owning field.
            nonnegative: Whether the quantity cannot be negative, so the interval's low end is
                clamped at 0. ``None`` (default) infers it: ``True`` when every value is
                ``>= 0``, ``False`` otherwise.

        Returns:
            The statistics; ``ci95`` is ``None`` for a single repeat.

        Raises:
            ValueError: No values, or ``nonnegative=True`` with a negative value.
        """
        # local: keep record import light; scipy.special is a third of scipy.stats's import
        from scipy.special import stdtrit

        vals = tuple(float(v) for v in values)
        if not vals:
            raise ValueError("RepeatStats needs at least one value")
        if nonnegative is None:
            nonnegative = all(v >= 0 for v in vals)
        elif nonnegative and any(v < 0 for v in vals):
            raise ValueError(f"RepeatStats: nonnegative=True but a value is negative: {vals}")
        n = len(vals)
        mean = sum(vals) / n
        if n == 1:
            return cls(n=1, values=vals, mean=mean, std=0.0, ci95=None)
        var = sum((v - mean) ** 2 for v in vals) / (n - 1)
        std = math.sqrt(var)
        half = float(stdtrit(n - 1, 0.975)) * std / math.sqrt(n)  # t(0.975, n-1), as t.ppf
        low = mean - half
        if nonnegative:
            low = max(0.0, low)
        return cls(n=n, values=vals, mean=mean, std=std, ci95=Interval(low=low, high=mean + half))
