"""Text a server sends, made safe to store and to show.

The server under test is not trusted. A name or version it reports (``/version``, ``/info``,
``owned_by``, a model's ``root``) is cut to a length and stripped of control characters (ANSI
escapes, newlines, bidi and zero-width marks) before it reaches a record or a terminal, and only a
string or a number counts as one: a JSON object is not stored as its Python ``repr``. Excerpts of
what a server sent, quoted in error messages, show control characters as escapes.
"""

from __future__ import annotations

import math
import re
import unicodedata

NAME_CHARS = 80
"""Longest engine name, version or model root kept from a server, in characters."""

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
"""ANSI escape sequences (CSI, OSC, two-character), removed whole rather than left as text."""


def clean_text(value: object, limit: int = NAME_CHARS) -> str | None:
    """A server's string made safe: control characters dropped, spaces collapsed, cut to ``limit``.

    Args:
        value: What the server sent; only a string or a finite number is text.
        limit: Most characters kept (a longer text ends with ``...``).

    Returns:
        The clean text, or ``None`` for anything else (an object, a list, a boolean, ``null``,
        a non-finite number) or a text with no visible character.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    text = _ANSI.sub("", str(value)[: 8 * limit])  # never scan more than a short prefix
    text = "".join(  # controls (newline, tab) part words; format marks (bidi) just go
        " " if ch.isspace() else ch
        for ch in text
        if unicodedata.category(ch)[0] != "C" or ch.isspace()
    )
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 3].rstrip() + "..."
    return text or None


def excerpt(data: bytes | str, limit: int = 60) -> str:
    """The start of what a server sent, quoted for an error message (control characters escaped).

    Args:
        data: Raw bytes (decoded leniently) or text.
        limit: Most characters shown before ``...``.
    """
    text = data[: 4 * limit].decode("utf-8", "replace") if isinstance(data, bytes) else data
    shown = "".join(
        ch if unicodedata.category(ch)[0] != "C" else f"\\x{ord(ch):02x}"
        for ch in text[: limit + 1]
    )
    return shown[:limit] + "..." if len(shown) > limit else shown
