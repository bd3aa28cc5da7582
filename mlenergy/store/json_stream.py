"""Bounded JSON decoding for bundles: one value at a time, its size checked before it is built.

A bundle is read one record at a time (:mod:`mlenergy.store.bundle`). Before a record is
decoded, a scan of its text counts the objects, arrays and strings it would build and their
nesting; a record over :data:`MAX_RECORD_NODES` or :data:`MAX_DEPTH` is refused without
being built. Once decoded, an array longer than :data:`MAX_ARRAY_ITEMS` is refused unless it
is one of the number series a record may hold at length (:data:`SERIES`, e.g. a power
timeline) and every item is a number >= 0. Integers longer than :data:`MAX_INT_DIGITS` digits,
NaN and Infinity are refused while decoding. So a record never costs more than a few
thousand Python objects, and the schema's error list for it stays short, whatever the bundle.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from mlenergy.store.checks import tag

MAX_DEPTH = 32
"""Deepest nesting of JSON objects and arrays accepted within one record."""
MAX_INT_DIGITS = 20
"""Longest integer accepted, in digits (a 64-bit count has at most 20)."""
MAX_RECORD_NODES = 5_000
"""Most objects, arrays and strings one record may hold (a real run holds a few hundred)."""
MAX_ARRAY_ITEMS = 1_000
"""Most items of an array in a record, number series (:data:`SERIES`) excepted."""
SERIES: frozenset[tuple[str, ...]] = frozenset(
    {
        ("power_timeline", "t_s"),
        ("power_timeline", "power_w"),
        ("serving", "request_energies_j"),
        ("serving", "request_output_tokens"),
    }
)
"""Paths in a run record of the arrays that may be long: numbers >= 0, one per sample."""

_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
"""A JSON string (skipped whole, so brackets inside it do not count) or a bracket."""
_SPACE = re.compile(r"[ \t\n\r]*")


class BundleRefused(ValueError):
    """The bundle's JSON breaks a bound (depth, size, integer, NaN); ``problem`` says which."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


def _depth_refused() -> BundleRefused:
    return BundleRefused(
        tag("json-depth", f"bundle nests objects or arrays deeper than {MAX_DEPTH}")
    )


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise BundleRefused(
            tag(
                "integer-size",
                f"bundle holds an integer of {digits} digits (at most {MAX_INT_DIGITS})",
            )
        )
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BundleRefused(
            tag("finite-numbers", f"bundle holds {text[:40]!r}, which is not a finite number")
        )
    return value


def _parse_constant(name: str) -> float:
    raise BundleRefused(
        tag("finite-numbers", f"bundle holds {name}, which is not a number (JSON has no {name})")
    )


DECODER = json.JSONDecoder(
    parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant
)
"""The standard library's decoder with the bounds on integers, NaN and Infinity."""


def skip_space(text: str, pos: int) -> int:
    """The first position at or after ``pos`` that is not JSON whitespace."""
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def scan_container(text: str, pos: int, budget: int = MAX_RECORD_NODES) -> tuple[int, int]:
    """Where the object or array starting at ``pos`` ends, and how many nodes it holds.

    Only the brackets and strings are looked at (numbers are skipped by the regular
    expression engine), and the scan stops as soon as a bound is broken.

    Args:
        text: The bundle text.
        pos: Index of the opening ``{`` or ``[``.
        budget: Most objects, arrays and strings allowed.

    Returns:
        ``(end, nodes)``: the index after the closing bracket (-1 when it never closes: the
        decoder then names the syntax error) and the nodes counted.

    Raises:
        BundleRefused: Nested deeper than :data:`MAX_DEPTH`, or more than ``budget`` nodes.
    """
    depth = 0
    nodes = 0
    for match in _TOKEN.finditer(text, pos):
        char = text[match.start()]
        if char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise _depth_refused()
        elif char in "]}":
            depth -= 1
            if depth <= 0:
                return match.end(), nodes
            continue
        nodes += 1
        if nodes > budget:
            raise BundleRefused(
                tag(
                    "json-size",
                    f"a record holds more than {budget:,} objects, arrays and strings",
                )
            )
    return -1, nodes


def decode_value(
    text: str, pos: int, budget: int = MAX_RECORD_NODES, path: tuple[str, ...] = ()
) -> tuple[Any, int, int]:
    """Decode the JSON value at ``pos`` within the bounds.

    Args:
        text: The bundle text (or one line of JSON Lines).
        pos: Index where the value starts (not whitespace).
        budget: Most objects, arrays and strings the value may hold.
        path: Where the value sits in its record (for :data:`SERIES`), e.g. ``("serving",)``.

    Returns:
        ``(value, end, nodes)``: the value, the index after it, and the nodes it holds.

    Raises:
        BundleRefused: A bound is broken.
        json.JSONDecodeError: Not JSON.
    """
    nodes = 0
    if text[pos] in "[{":
        _, nodes = scan_container(text, pos, budget)
    elif text[pos] == '"':
        nodes = 1
    try:
        value, end = DECODER.raw_decode(text, pos)
    except RecursionError:
        raise _depth_refused() from None
    check_arrays(value, path)
    return value, end, nodes


def check_arrays(value: Any, path: tuple[str, ...] = ()) -> None:
    """Refuse an array over :data:`MAX_ARRAY_ITEMS` items, number series excepted.

    Args:
        value: A decoded value (bounded already in nodes).
        path: Its keys within the record.

    Raises:
        BundleRefused: An array too long, or a long series holding something other than
            numbers >= 0.
    """
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            stack.extend((v, (*where, k)) for k, v in item.items() if isinstance(v, dict | list))
            continue
        if not isinstance(item, list):
            continue
        if len(item) > MAX_ARRAY_ITEMS:
            if where not in SERIES:
                raise BundleRefused(
                    tag(
                        "json-size",
                        f"{_dotted(where)} holds {len(item):,} items (at most "
                        f"{MAX_ARRAY_ITEMS:,}; only number series such as a power timeline "
                        "may be longer)",
                    )
                )
            if not all(type(x) in (int, float) and x >= 0 for x in item):
                raise BundleRefused(
                    tag(
                        "json-size",
                        f"{_dotted(where)} holds {len(item):,} items, not all numbers >= 0 "
                        f"(a series longer than {MAX_ARRAY_ITEMS:,} holds numbers only)",
                    )
                )
            continue
        stack.extend((v, (*where, i)) for i, v in enumerate(item) if isinstance(v, dict | list))


def _dotted(path: tuple[Any, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "an array"


def load_json(text: str) -> Any:
    """``json.loads`` with the bounds on depth, integers, NaN and Infinity.

    For one whole document (an uploaded config); bundles are read record by record.

    Raises:
        BundleRefused: Too deep, an integer too long, NaN or Infinity.
        json.JSONDecodeError: Not JSON.
    """
    try:
        value = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
        )
    except RecursionError:
        raise _depth_refused() from None
    stack = [(value, 1)]
    while stack:  # iterative: no recursion
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _depth_refused()
        children = item.values() if isinstance(item, dict) else item
        if isinstance(item, dict | list):
            stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return value
