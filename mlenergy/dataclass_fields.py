"""The fields of a dataclass with its nested dataclasses' fields in place.

One dataclass per concern, nested (a request holds its parallel layout and its GPU settings;
a command's options hold their groups), read flat: the typed commands turn each flat field into
an option (:mod:`mlenergy.commands.typed`) and an estimate request takes and gives its fields
flat (:mod:`mlenergy.estimate.request_types`).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any, NamedTuple


class FlatField(NamedTuple):
    """One field of the flat view.

    Attributes:
        field: The dataclass field.
        hint: Its resolved type hint (``Annotated`` extras kept).
        owner: The dataclass that declares it (the outer one or a nested one).
    """

    field: dataclasses.Field[Any]
    hint: Any
    owner: type


def is_dataclass_type(hint: Any) -> bool:
    """Whether ``hint`` is a dataclass (a class, not an instance)."""
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


@functools.cache  # a class's fields do not change; reading its type hints costs ~0.2 ms
def flat_fields(cls: type) -> tuple[FlatField, ...]:
    """Every field of ``cls`` in order, a field typed with a dataclass replaced by its fields."""
    hints = typing.get_type_hints(cls, include_extras=True)
    out: list[FlatField] = []
    for f in dataclasses.fields(cls):
        if is_dataclass_type(hints[f.name]):
            out.extend(flat_fields(hints[f.name]))
        else:
            out.append(FlatField(f, hints[f.name], cls))
    return tuple(out)
