"""Names shown to readers: normalised, visible, and never confusable with a reserved name.

A submitter's name is NFKC-normalised (fullwidth and styled letters become plain ones, see
:func:`mlenergy.records.submission.normalise_name`) and refused when it holds a control,
format or bidirectional character (an ANSI escape, a newline, a zero-width space, a
right-to-left override) or no letter at all. It is then compared with the reserved names by
its confusable skeleton (Unicode Technical Standard #39, section 4): ``МL.ENERGY`` with a
Cyrillic М, ``ML.ЕNERGY`` with a Cyrillic Е and ``mlеnergy`` with a Cyrillic е share the
skeleton of a reserved name. Model ids and hardware and software names are refused when they
hold a control or format character.

The confusable data is Unicode's ``confusables.txt`` as the ``confusable-homoglyphs``
package ships it (``confusables.json``). That file lists every pair of the table in both
directions without saying which side is the prototype; the pairs form stars, one per
prototype, so each character's prototype is the centre of its star: the neighbour that is
a string of several characters (only prototypes are) or has other neighbours. In a star of
two single characters either may be the prototype; both map to the smaller, which keeps
"same skeleton" exact for comparing names.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from mlenergy.records.submission import normalise_name
from mlenergy.store.checks import tag

RESERVED_SUBMITTERS = ("ML.ENERGY Leaderboard v3", "ML.ENERGY Leaderboard v2")
"""Submitter names of the shipped reference data."""
RESERVED_NAME_STEMS = ("mlenergy", "emulated", "reference")
"""A submitter whose name's skeleton starts with one of these stems' is reserved."""
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
"""Characters classed as letters or symbols that render as nothing (Hangul fillers, the blank
braille pattern): Unicode's default-ignorable fillers, hidden like format characters."""
_MARKS = "\u200e\u200f"
"""Direction marks the package wraps right-to-left characters in (not part of the data)."""


@lru_cache(maxsize=1)
def _prototypes() -> dict[str, str]:
    """Source character -> its prototype string, from the package's confusables table."""
    # lazy: the table is 0.9 MB of JSON, loaded on the first name check, not at import
    from confusable_homoglyphs.confusables import confusables_data

    neighbours: dict[str, set[str]] = {}
    for key, entries in confusables_data.items():
        node = key.strip(_MARKS)
        neighbours.setdefault(node, set()).update(e["c"].strip(_MARKS) for e in entries)
    out: dict[str, str] = {}
    for node, others in neighbours.items():
        if len(node) != 1 or len(others) != 1:
            continue  # strings of several characters and star centres are prototypes
        (other,) = others
        if len(other) > 1 or len(neighbours.get(other, ())) > 1 or other < node:
            out[node] = other
    return out


def skeleton(text: str) -> str:
    """The UTS #39 confusable skeleton: NFD, every character to its prototype, NFD again."""
    table = _prototypes()
    out = unicodedata.normalize("NFD", text)
    for _ in range(3):  # a prototype string may hold a character of a two-character star
        mapped = unicodedata.normalize("NFD", "".join(table.get(ch, ch) for ch in out))
        if mapped == out:
            break
        out = mapped
    return out


def name_key(name: str) -> str:
    """What two names that look alike share: skeleton, case-folded, letters and digits only.

    ``ML.ENERGY``, ``ml energy``, ``МL.ЕNERGY`` (Cyrillic) and ``ｍｌｅｎｅｒｇｙ`` have one key.
    """
    folded = skeleton(skeleton(normalise_name(name)).casefold())
    return "".join(ch for ch in folded if ch.isalnum())


def hidden_characters(text: str) -> list[str]:
    """The characters of ``text`` that show nothing or reorder what follows.

    Controls, format characters (zero-width, bidirectional), private-use and unassigned code
    points, line and paragraph separators, and the blank fillers of :data:`_BLANK_LETTERS`.

    Returns:
        Each offending character once, as ``U+XXXX NAME`` (in order of appearance).
    """
    out: list[str] = []
    for ch in text:
        category = unicodedata.category(ch)
        if category[0] == "C" or category in ("Zl", "Zp") or ch in _BLANK_LETTERS:
            label = f"U+{ord(ch):04X} {unicodedata.name(ch, category)}"
            if label not in out:
                out.append(label)
    return out


def text_problem(where: str, what: str, text: object) -> str | None:
    """Why a name shown to readers (model id, hardware, dtype...) cannot be shown, or ``None``."""
    if not isinstance(text, str):
        return None
    hidden = hidden_characters(text)
    if not hidden:
        return None
    return tag(
        "name-visible",
        f"{where}: the {what} holds {len(hidden)} control or format character(s) "
        f"({', '.join(hidden[:3])}); names are shown as typed, so they hold visible text only",
    )


def submitter_problems(where: str, name: object) -> list[str]:
    """Why ``name`` cannot be a submitter: hidden characters, no letter, or reserved.

    Args:
        where: Where the name sits (``bundle.submitter``), prefixed to each problem.
        name: The name as given (normalised here first).
    """
    if not isinstance(name, str):
        return []
    text = normalise_name(name)
    shown = repr(text[:80])
    hidden = hidden_characters(text)
    if hidden:
        return [
            tag(
                "name-visible",
                f"{where}: submitter {shown} holds {len(hidden)} control, format or "
                f"bidirectional character(s) ({', '.join(hidden[:3])}); use visible text only",
            )
        ]
    if not any(unicodedata.category(ch).startswith("L") for ch in text):
        return [tag("name-visible", f"{where}: submitter {shown} holds no letter")]
    problem = reserved_problem(where, "submitter", text, stems=True)
    return [problem] if problem else []


def reserved_problem(where: str, what: str, name: str, *, stems: bool) -> str | None:
    """Why ``name`` looks like a reserved name (by skeleton), or ``None``.

    Args:
        where: Where the name sits, prefixed to the problem.
        what: What the name is (``submitter``, ``model id``).
        name: The name.
        stems: Also refuse names starting with a reserved stem (``mlenergy...``).
    """
    key = name_key(name)
    reserved = _reserved_keys()
    if key in reserved or (stems and key.startswith(_stem_keys())):
        return tag(
            "no-reserved-submitter",
            f"{where}: {what} {name[:80]!r} looks like a reserved name (the reference data "
            "and mlenergy's own labels use it); submit under your own name",
        )
    return None


@lru_cache(maxsize=1)
def _reserved_keys() -> frozenset[str]:
    return frozenset(name_key(r) for r in RESERVED_SUBMITTERS)


@lru_cache(maxsize=1)
def _stem_keys() -> tuple[str, ...]:
    return tuple(name_key(s) for s in RESERVED_NAME_STEMS)
