"""Reading a result bundle as a stream of records, each bounded before it is built.

A bundle is either a :class:`~mlenergy.records.Submission` JSON object, or records (run
records and quality results) as JSON Lines (``mlenergy bench --json`` output), a JSON array or
a single record object; then the submitter's name comes from the caller.

Reading stops at :data:`MAX_BUNDLE_BYTES`. :class:`BundleStream` then hands out one record at
a time: the items of a JSON array, the lines of JSON Lines, or the items of a Submission's
``runs`` and ``quality`` lists, each decoded on its own within the bounds of
:mod:`mlenergy.store.json_stream` (nesting, size, integers, NaN). The caller validates a record
and lets its JSON go before the next is read, and stops after :data:`MAX_PROBLEMS` problems;
:meth:`BundleStream.rest` then says how much was left unread. A bundle holds at most
:data:`MAX_RECORDS` records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mlenergy.store.checks import tag
from mlenergy.store.json_stream import (
    DECODER,
    MAX_RECORD_NODES,
    BundleRefused,
    decode_value,
    skip_space,
)

MAX_BUNDLE_BYTES = 5_000_000
"""Largest accepted bundle, in bytes (5 MB); reading stops there."""
MAX_PROBLEMS = 200
"""Problems listed before checking stops."""
MAX_RECORDS = 10_000
"""Most records (runs and quality results) in one bundle."""

_SCALAR_END = re.compile(r"[^,\]}\s]*")
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
_LIST_UNITS = {"runs": "run(s)", "quality": "quality result(s)", None: "record(s)"}


def read_bounded(data: bytes | str | Path, max_bytes: int) -> tuple[bytes | None, list[str]]:
    """The bundle's bytes, reading at most ``max_bytes + 1`` of them.

    Returns:
        ``(bytes, [])``, or ``(None, [problem])`` when the bundle is over the limit or
        cannot be read.
    """
    over = tag("bundle-size", f"bundle is over the {max_bytes / 1e6:g} MB limit")
    if isinstance(data, bytes):
        return (data, []) if len(data) <= max_bytes else (None, [over])
    path = Path(data)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        return None, [f"cannot read bundle {path.name}: {exc.strerror or exc}"]
    return (raw, []) if len(raw) <= max_bytes else (None, [over])


def decode_text(raw: bytes) -> tuple[str | None, list[str]]:
    """The bundle's text (UTF-8, a leading byte-order mark dropped), or the problem."""
    try:
        return raw.decode("utf-8").removeprefix("\ufeff"), []
    except UnicodeDecodeError as exc:
        return None, [
            tag("json-format", f"bundle is not UTF-8 text (bad byte at offset {exc.start})")
        ]


def kind_of(obj: Mapping[str, Any]) -> str:
    """``submission``, ``run`` or ``quality``: what a JSON object claims (or looks) to be."""
    kind = obj.get("record_type")
    if isinstance(kind, str):
        return kind
    if "runs" in obj:
        return "submission"
    return "quality" if "metric" in obj else "run"


SKIP_TOKENS = 200_000
"""Most brackets and strings looked at to skip one value that was refused or left unread."""


def skip_value(text: str, pos: int) -> int:
    """The index after the JSON value at ``pos`` without decoding it.

    Returns:
        The index, or -1 when the value never ends or holds more than :data:`SKIP_TOKENS`
        brackets and strings (reading then stops there).
    """
    if text[pos] == '"':
        match = _STRING.match(text, pos)
        return match.end() if match else -1
    if text[pos] not in "[{":
        scalar = _SCALAR_END.match(text, pos)
        return scalar.end() if scalar else -1
    depth = 0
    for seen, match in enumerate(_BRACKET.finditer(text, pos)):
        if seen > SKIP_TOKENS:
            return -1
        char = text[match.start()]
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return match.end()
    return -1


@dataclass(frozen=True)
class Item:
    """One record as read from the bundle, not yet checked against its schema.

    Attributes:
        where: Where it sits (``runs[3]``, ``record[0]``, ``line 7``, ``bundle``).
        value: The decoded JSON (``None`` when it could not be read).
        expect: ``run`` or ``quality`` inside a Submission's lists; ``None``: the record
            says what it is.
        problem: Why it could not be read (a broken bound, not JSON).
    """

    where: str
    value: Any = None
    expect: str | None = None
    problem: str | None = None


class BundleStream:
    """The records of a bundle's text, one at a time (see the module docstring).

    After :meth:`items` is exhausted, :attr:`form` says whether the text was a Submission
    object (its other fields in :attr:`shell`) or bare records, and :attr:`problems` holds the
    format problems that belong to no record (trailing text, a repeated field).

    Args:
        text: The bundle's text.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.form: Literal["submission", "records"] = "records"
        self.shell: dict[str, Any] = {}
        self.problems: list[str] = []
        self.count = 0
        """Records handed out so far."""
        self._pos = 0
        self.streamed: set[str] = set()
        """Fields of a Submission object whose records were handed out (``runs``, ``quality``)."""
        self._list: str | None = None
        self._lines = False

    # ------------------------------------------------------------------ the records

    def items(self) -> Iterator[Item]:
        """Hand out the records in bundle order; stops at a syntax error or :data:`MAX_RECORDS`."""
        text = self.text
        pos = skip_space(text, 0)
        if pos >= len(text):
            self.problems.append(tag("json-format", "bundle is empty"))
            return
        if self._is_json_lines(pos):
            yield from self._json_lines()
        elif text[pos] == "[":
            end = yield from self._array(pos, None)
            self._expect_end(end)
        elif text[pos] == "{":
            yield from self._object(pos)
        else:
            item, end = self._decode("bundle", pos, None)
            yield item
            self._expect_end(end)

    def rest(self) -> str:
        """How much is left after the last record handed out, e.g. ``1,599,979 more line(s)``."""
        if self._lines:
            pos = self._pos
            if pos >= len(self.text):
                return "0 more line(s)"
            left = self.text.count("\n", pos) + (0 if self.text.endswith("\n") else 1)
            return f"{left:,} more line(s)"
        unit = _LIST_UNITS.get(self._list, "record(s)")
        pos, left = self._pos, 0
        while left <= MAX_RECORDS:
            pos = skip_space(self.text, pos)
            if pos >= len(self.text) or self.text[pos] != ",":
                return f"{left:,} more {unit}"
            pos = skip_space(self.text, pos + 1)
            if pos >= len(self.text):
                return f"{left:,} more {unit}"
            if (pos := skip_value(self.text, pos)) < 0:
                return f"{left + 1:,} or more {unit}"
            left += 1
        return f"over {MAX_RECORDS:,} more {unit}"

    def _is_json_lines(self, pos: int) -> bool:
        """Whether the first line holds one whole JSON value and more lines follow."""
        text = self.text
        newline = text.find("\n", pos)
        if newline < 0 or skip_space(text, newline) >= len(text):
            return False
        line = text[pos:newline]
        try:
            _, end, _ = decode_value(line, 0)
        except BundleRefused:
            return True  # line 1 is refused as a record of JSON Lines
        except json.JSONDecodeError:
            return False  # one document over several lines
        return skip_space(line, end) >= len(line)

    def _json_lines(self) -> Iterator[Item]:
        self._lines = True
        text, start, number = self.text, 0, 0
        while start < len(text):
            newline = text.find("\n", start)
            end = len(text) if newline < 0 else newline
            number += 1
            line = text[start:end]
            self._pos = start = end + 1
            pos = skip_space(line, 0)
            if pos >= len(line):
                continue
            if self._full():
                return
            self.count += 1
            yield self._line_item(line, pos, f"line {number}")

    @staticmethod
    def _line_item(line: str, pos: int, where: str) -> Item:
        try:
            value, end, _ = decode_value(line, pos)
        except BundleRefused as refused:
            return Item(where, problem=f"{where}: {refused.problem}")
        except json.JSONDecodeError as exc:
            return Item(where, problem=_not_json_line(where, exc.msg, exc.colno))
        if skip_space(line, end) < len(line):
            return Item(where, problem=_not_json_line(where, "Extra data", end + 1))
        return Item(where, value)

    def _array(self, pos: int, key: str | None) -> Generator[Item, None, int]:
        """Records of the array at ``pos`` (a Submission's ``key`` list, or the whole bundle).

        Returns (as the generator's value) the index after the array, or -1 after a syntax
        error.
        """
        text, index = self.text, 0
        self._list = key
        pos = skip_space(text, pos + 1)
        if pos < len(text) and text[pos] == "]":
            return pos + 1
        while True:
            if pos >= len(text):
                self._syntax("Expecting value", pos)
                return -1
            if self._full():
                return -1
            where = f"{key}[{index}]" if key else f"record[{index}]"
            item, end = self._decode(
                where, pos, {"runs": "run", "quality": "quality"}.get(key or "")
            )
            self.count += 1
            self._pos = end
            yield item
            if end < 0:
                return -1
            pos = skip_space(text, end)
            if pos < len(text) and text[pos] == ",":
                pos = skip_space(text, pos + 1)
                index += 1
                continue
            if pos < len(text) and text[pos] == "]":
                return pos + 1
            self._syntax("Expecting ',' delimiter", pos)
            return -1

    def _object(self, pos: int) -> Iterator[Item]:
        """A top-level object: a Submission (its lists streamed) or one bare record."""
        text = self.text
        budget = MAX_RECORD_NODES
        refused: list[str] = []
        seen: set[str] = set()
        pos = skip_space(text, pos + 1)
        end = pos + 1
        while not (pos < len(text) and text[pos] == "}" and not seen):
            if pos >= len(text) or text[pos] != '"':
                self._syntax("Expecting property name enclosed in double quotes", pos)
                return
            try:
                key, pos = DECODER.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                self._syntax(exc.msg, exc.pos)
                return
            budget -= 1
            if budget < 0:
                self.problems.append(
                    tag(
                        "json-size",
                        f"bundle's top-level object holds more than {MAX_RECORD_NODES:,} "
                        "fields, objects, arrays and strings",
                    )
                )
                return
            pos = skip_space(text, pos)
            if pos >= len(text) or text[pos] != ":":
                self._syntax("Expecting ':' delimiter", pos)
                return
            pos = skip_space(text, pos + 1)
            if pos >= len(text):
                self._syntax("Expecting value", pos)
                return
            if key in seen:
                refused.append(tag("json-format", f"bundle repeats the field {key[:40]!r}"))
            seen.add(key)
            if key in ("runs", "quality") and text[pos] == "[":
                self.streamed.add(key)
                self.form = "submission"
                end = yield from self._array(pos, key)
                self._list = None
            else:
                end, used = self._shell_value(key, pos, budget, refused)
                budget -= used
            if end < 0:
                return
            pos = skip_space(text, end)
            if pos < len(text) and text[pos] == ",":
                pos = skip_space(text, pos + 1)
                continue
            if pos < len(text) and text[pos] == "}":
                end = pos + 1
                break
            self._syntax("Expecting ',' delimiter", pos)
            return
        if kind_of(self.shell) == "submission":
            self.form = "submission"
        if self.form == "submission":
            self.problems.extend(refused)
        else:
            self.count += 1
            shell, self.shell = self.shell, {}
            yield Item("bundle", problem="; ".join(refused)) if refused else Item("bundle", shell)
        self._expect_end(end)

    def _shell_value(self, key: str, pos: int, budget: int, refused: list[str]) -> tuple[int, int]:
        """Decode one field of the top-level object into :attr:`shell`.

        Returns:
            ``(end, nodes)``: the index after the value (-1: stop) and the nodes it holds.
        """
        try:
            value, end, used = decode_value(self.text, pos, max(budget, 0), (key,))
        except BundleRefused as problem:
            refused.append(f"bundle.{key[:40]}: {problem.problem}")
            return self._skip_refused(f"bundle.{key[:40]}", pos), 0
        except json.JSONDecodeError as exc:
            self._syntax(exc.msg, exc.pos)
            return -1, 0
        self.shell[key] = value
        return end, used

    def _decode(self, where: str, pos: int, expect: str | None) -> tuple[Item, int]:
        """One record at ``pos``: the item and the index after it (-1 after a syntax error)."""
        try:
            value, end, _ = decode_value(self.text, pos)
        except BundleRefused as refused:
            end = self._skip_refused(where, pos)
            return Item(where, problem=f"{where}: {refused.problem}"), end
        except json.JSONDecodeError as exc:
            self._syntax(exc.msg, exc.pos)
            return Item(where, problem=self.problems.pop()), -1
        return Item(where, value, expect), end

    def _skip_refused(self, where: str, pos: int) -> int:
        """Skip a refused value; when it cannot be skipped, say that reading stops there."""
        end = skip_value(self.text, pos)
        if end < 0:
            self.problems.append(
                f"... reading stopped at {where}: the rest of the bundle was not checked"
            )
        return end

    def _full(self) -> bool:
        if self.count < MAX_RECORDS:
            return False
        self.problems.append(
            tag(
                "bundle-size",
                f"bundle holds more than {MAX_RECORDS:,} records (at most {MAX_RECORDS:,})",
            )
        )
        return True

    def _expect_end(self, end: int) -> None:
        if end >= 0 and skip_space(self.text, end) < len(self.text):
            self._syntax("Extra data", skip_space(self.text, end))

    def _syntax(self, msg: str, pos: int) -> None:
        err = json.JSONDecodeError(msg, self.text, min(pos, len(self.text)))
        self.problems.append(
            tag(
                "json-format",
                f"bundle is not valid JSON ({msg} at line {err.lineno} column {err.colno})",
            )
        )


def _not_json_line(where: str, msg: str, column: int) -> str:
    return tag("json-format", f"{where}: not valid JSON ({msg} at column {column})")
