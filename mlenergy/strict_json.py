"""JSON for ``--json`` outputs: strict (RFC 8259), a non-finite number refused, never written.

``json.dumps`` writes ``Infinity`` and ``NaN``, which strict readers (``jq``, JavaScript's
``JSON.parse``, Go, Rust) refuse. Every command that prints JSON goes through :func:`dumps`:
a non-finite number is a user error naming where it sits (exit 2), and nothing is printed.
This module imports nothing else of mlenergy but its errors.
"""

from __future__ import annotations

import json
import math
from typing import Any

from mlenergy.errors import UserError


def dumps(value: Any, *, indent: int | None = None, **kwargs: Any) -> str:
    """``json.dumps(value)`` as strict JSON.

    Args:
        value: What to write.
        indent: Indentation, as for ``json.dumps``.
        **kwargs: Other ``json.dumps`` options (``default=``, ``sort_keys=``...).

    Raises:
        UserError: ``value`` holds NaN or an infinity (the message names where).
    """
    try:
        return json.dumps(value, indent=indent, allow_nan=False, **kwargs)
    except ValueError as exc:
        if "JSON compliant" not in str(exc):
            raise
        where = _non_finite_path(value)
        raise UserError(
            f"the result holds a non-finite number{f' at {where}' if where else ''}, "
            "which JSON cannot carry",
            "check the inputs (an intensity, price or PUE, an energy figure) for values out "
            "of range",
        ) from None


def _non_finite_path(value: Any) -> str:
    """Where the first NaN or infinity sits in ``value`` (``rows[3].carbon``), or ``""``."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return path or "the top level"
        if isinstance(item, dict):
            children = [(v, f"{path}.{k}" if path else str(k)) for k, v in item.items()]
        elif isinstance(item, list | tuple):
            children = [(v, f"{path}[{i}]") for i, v in enumerate(item)]
        else:
            continue
        stack.extend(reversed(children))
    return ""
