"""The power limit Zeus's own selectors choose from a power-limit profile.

A profile is the time and energy of the same training steps measured at each GPU power limit:
a CSV ``power_limit_w,time_s,energy_j`` or the JSON file Zeus's ``GlobalPowerLimitOptimizer``
writes (``{"measurements": [{"power_limit": W, "energy": J, "time": s}, ...]}``). The choice is
made by :mod:`zeus.optimizer.power_limit`'s ``Energy``, ``Time``, ``ZeusCost(eta)`` and
``MaxSlowdownConstraint(factor)``; nothing here re-derives them.
"""

from __future__ import annotations

import csv
import importlib
import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from mlenergy.errors import UserError

if TYPE_CHECKING:
    from zeus.optimizer.power_limit import OptimumSelector, PowerLimitMeasurement

_ZEUS_MODULE = "zeus.optimizer.power_limit"
_QUIET_COPY = "mlenergy.optimize._zeus_power_limit_selectors"


def zeus_power_limit() -> ModuleType:
    """Zeus's ``zeus.optimizer.power_limit`` module, for its selectors and measurements.

    That module also defines a Hugging Face Trainer callback and so imports transformers (and
    torch), which takes seconds and which choosing from a profile never needs. When neither it
    nor transformers is loaded yet, Zeus's file is executed once more under a private name with
    transformers hidden (Zeus supports its absence), and the real module is left untouched for
    code that needs the callback. Either way the selectors are Zeus's own code.
    """
    if _ZEUS_MODULE in sys.modules or "transformers" in sys.modules:
        return importlib.import_module(_ZEUS_MODULE)
    if _QUIET_COPY in sys.modules:
        return sys.modules[_QUIET_COPY]
    spec = importlib.util.find_spec(_ZEUS_MODULE)
    if spec is None or spec.origin is None:
        return importlib.import_module(_ZEUS_MODULE)
    copy_spec = importlib.util.spec_from_file_location(_QUIET_COPY, spec.origin)
    if copy_spec is None or copy_spec.loader is None:
        return importlib.import_module(_ZEUS_MODULE)
    module = importlib.util.module_from_spec(copy_spec)
    sys.modules[_QUIET_COPY] = module
    sys.modules["transformers"] = None  # type: ignore[assignment]  # its import now fails
    try:
        copy_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[_QUIET_COPY]
        raise
    finally:
        sys.modules.pop("transformers", None)  # not loaded before (checked above)
    return module


POWER_LIMIT_COLUMNS = ("power_limit_w", "time_s", "energy_j")
OBJECTIVES = ("energy", "time", "zeus-cost", "max-slowdown")


def _positive(value: Any, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{what} {value!r} is not a number", "Fix that value") from None
    if not math.isfinite(number) or number <= 0:
        raise UserError(f"{what} is {value!r}; it must be a positive number", "Fix that value")
    return number


def _measurement(limit: Any, time_s: Any, energy_j: Any, where: str) -> PowerLimitMeasurement:
    pl = _positive(limit, f"{where}: power_limit_w")
    if pl != int(pl):
        raise UserError(f"{where}: power_limit_w {limit!r} is not whole watts", "Use whole W")
    return zeus_power_limit().PowerLimitMeasurement(
        power_limit=int(pl),
        time=_positive(time_s, f"{where}: time_s"),
        energy=_positive(energy_j, f"{where}: energy_j"),
    )


SOURCE_COMMENT = "# energy_source:"
"""A leading CSV comment line ``# energy_source: <label>`` names where the figures came from."""


def _leading_comments(text: str) -> list[str]:
    lines = text.splitlines()
    n = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    return lines[:n]


def profile_source(path: str | Path) -> str | None:
    """The ``# energy_source: <label>`` a CSV profile declares in its leading comments, if any.

    A profile that was not measured (an estimate, a worked example) says so there, and every
    output of the choice shows that label instead of ``profile:<file name>``.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    for line in _leading_comments(text):
        if line.startswith(SOURCE_COMMENT):
            label = line.removeprefix(SOURCE_COMMENT).strip()
            return label or None
    return None


def _read_csv(path: Path, text: str) -> list[PowerLimitMeasurement]:
    skip = len(_leading_comments(text))  # leading '# ...' lines: provenance notes
    reader = csv.DictReader(text.splitlines()[skip:])
    header = [h.strip() for h in (reader.fieldnames or [])]
    unknown = [h for h in header if h not in POWER_LIMIT_COLUMNS]
    missing = [c for c in POWER_LIMIT_COLUMNS if c not in header]
    if unknown or missing:
        what = f"unknown column(s) {', '.join(unknown)}" if unknown else ""
        what += ("; " if what and missing else "") + (
            f"missing column(s) {', '.join(missing)}" if missing else ""
        )
        raise UserError(f"{path}: {what}", f"The columns are {','.join(POWER_LIMIT_COLUMNS)}")
    reader.fieldnames = header
    rows = []
    for line, row in enumerate(reader, start=2 + skip):
        rows.append(
            _measurement(row["power_limit_w"], row["time_s"], row["energy_j"], f"{path} row {line}")
        )
    return rows


def _read_zeus_json(path: Path, text: str) -> list[PowerLimitMeasurement]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})", "Fix the file"
        ) from None
    items = data.get("measurements") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise UserError(
            f"{path}: no 'measurements' list",
            "Give the JSON profile GlobalPowerLimitOptimizer writes, or a CSV",
        )
    rows = []
    for i, item in enumerate(items):
        where = f"{path} measurements[{i}]"
        if not isinstance(item, dict) or set(item) != {"power_limit", "energy", "time"}:
            raise UserError(
                f"{where}: needs exactly power_limit, energy and time", "Fix that entry"
            )
        rows.append(_measurement(item["power_limit"], item["time"], item["energy"], where))
    return rows


def read_power_limit_profile(path: str | Path) -> list[PowerLimitMeasurement]:
    """Read a CSV or Zeus JSON power-limit profile.

    Raises:
        UserError: Unreadable file, unknown or missing columns, a non-positive or non-numeric
            value, a duplicate power limit or an empty profile; the message names the row.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot read profile {p}: {exc.strerror}", "Check the path") from None
    rows = _read_zeus_json(p, text) if text.lstrip().startswith("{") else _read_csv(p, text)
    if not rows:
        raise UserError(f"{p}: no measurements", "Give one row per power limit")
    seen: set[int] = set()
    for i, m in enumerate(rows):
        if m.power_limit in seen:
            raise UserError(
                f"{p}: power limit {m.power_limit} W appears twice (entry {i + 1})",
                "Keep one row per power limit",
            )
        seen.add(m.power_limit)
    return rows


def zeus_selector(
    objective: str, eta: float = 0.5, max_slowdown: float = 1.1, world_size: int = 1
) -> OptimumSelector:
    """Zeus's selector for ``objective`` (``energy``, ``time``, ``zeus-cost``, ``max-slowdown``).

    Raises:
        UserError: Unknown objective, ``eta`` outside [0, 1] or ``max_slowdown`` below 1.
    """
    if objective not in OBJECTIVES:
        raise UserError(
            f"--objective {objective!r} is unknown", f"Use one of {', '.join(OBJECTIVES)}"
        )
    if objective == "energy":
        return zeus_power_limit().Energy()
    if objective == "time":
        return zeus_power_limit().Time()
    if objective == "zeus-cost":
        if not 0.0 <= eta <= 1.0:
            raise UserError(f"--eta is {eta}; it must be within [0, 1]", "Pass e.g. --eta 0.5")
        return zeus_power_limit().ZeusCost(eta_knob=eta, world_size=world_size)
    if not max_slowdown >= 1.0:
        raise UserError(f"--max-slowdown is {max_slowdown}; it must be >= 1", "Pass e.g. 1.1")
    return zeus_power_limit().MaxSlowdownConstraint(factor=max_slowdown)


def choose_power_limit(
    measurements: list[PowerLimitMeasurement],
    objective: str = "zeus-cost",
    eta: float = 0.5,
    max_slowdown: float = 1.1,
    world_size: int = 1,
    energy_source: str = "profile",
) -> dict[str, Any]:
    """The limit Zeus's selector picks, with its time and energy against the highest limit.

    Returns:
        ``power_limit_w``, ``objective``, ``time_s``, ``energy_j`` of the chosen limit, the
        highest limit's figures, the energy saving and slowdown against it, and every
        measurement (``power_limit_w``, ``time_s``, ``energy_j``), highest limit first.
    """
    selector = zeus_selector(objective, eta, max_slowdown, world_size)
    chosen = selector.select(measurements)
    return {
        "power_limit_w": chosen,
        "objective": objective,
        "eta": eta if objective == "zeus-cost" else None,
        "max_slowdown": max_slowdown if objective == "max-slowdown" else None,
        **limit_summary(chosen, measurements, selector, energy_source),
    }


def limit_summary(
    chosen: int, measurements: list[PowerLimitMeasurement], selector: Any, energy_source: str
) -> dict[str, Any]:
    """The chosen limit's time and energy against the highest limit's, and every measurement.

    Args:
        chosen: The limit the selector picked (W).
        measurements: Zeus's measurements, one per profiled limit.
        selector: The Zeus selector that picked it.
        energy_source: Label of the figures.

    Returns:
        ``selector``, ``time_s``, ``energy_j``, the highest limit's figures, the energy saving
        and slowdown against it, ``energy_source`` and every measurement, highest limit first.
    """
    by_limit = {m.power_limit: m for m in measurements}
    pick, top = by_limit[chosen], by_limit[max(by_limit)]
    return {
        "selector": f"zeus.optimizer.power_limit.{type(selector).__name__}",
        "time_s": pick.time,
        "energy_j": pick.energy,
        "max_power_limit_w": top.power_limit,
        "max_limit_time_s": top.time,
        "max_limit_energy_j": top.energy,
        "energy_saving_fraction": (top.energy - pick.energy) / top.energy,
        "slowdown": pick.time / top.time,
        "energy_source": energy_source,
        "measurements": [
            {"power_limit_w": m.power_limit, "time_s": m.time, "energy_j": m.energy}
            for m in sorted(measurements, key=lambda m: -m.power_limit)
        ],
    }
