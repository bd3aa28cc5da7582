"""Checks of the program API's arguments, and its guard: one clean error per bad call.

Every check raises the error :func:`refuse` makes: one line, no server path, and no traceback
in the server's log; :func:`endpoint` wraps an API function so that whatever goes wrong is one
log line (its input cut short) and one message for the caller.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Callable
from typing import Any, Literal, ParamSpec, TypeVar, overload

import gradio as gr

from mlenergy.errors import UserError

LOG = logging.getLogger("mlenergy.leaderboard.api")
LOGGED_INPUT_CHARS = 200
"""A refused call's arguments are logged cut to this many characters."""
MAX_LIST_ITEMS = 200
"""Most items a list argument may hold."""
MAX_TEXT_CHARS = 500
"""Longest text argument."""
_SERVER_PATH = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?[/\\](?:[\w.\-]+[/\\])+[\w.\-]*")
"""An absolute file path in a message (``/srv/app/x.json``), never shown to a client."""
_P = ParamSpec("_P")
_R = TypeVar("_R")


def refuse(message: str) -> gr.Error:
    """The error a client sees: one line, no server path, no traceback in the log."""
    return gr.Error(_SERVER_PATH.sub("<server path>", message)[:1000], print_exception=False)


def _logged(args: tuple, kwargs: dict) -> str:
    text = repr({**{str(i): a for i, a in enumerate(args)}, **kwargs})
    return text if len(text) <= LOGGED_INPUT_CHARS else text[: LOGGED_INPUT_CHARS - 1] + "…"


def endpoint(name: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Guard an endpoint: a bad call is one log line (input cut short) and one clean error.

    ``gr.Error`` and :class:`UserError` keep their message (server paths removed); anything
    else becomes a generic message naming the endpoint, never Python's own text.
    """

    def wrap(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(fn)
        def guarded(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return fn(*args, **kwargs)
            except gr.Error as exc:
                message = str(exc.message)
            except UserError as exc:
                message = exc.message
            except Exception as exc:  # a bug or an input no check foresaw: no internals out
                LOG.warning(
                    "/%s failed (%s) on %s", name, type(exc).__name__, _logged(args, kwargs)
                )
                raise refuse(f"/{name} could not answer these arguments") from None
            LOG.info("/%s refused: %s; input %s", name, message[:200], _logged(args, kwargs))
            raise refuse(message) from None

        return guarded

    return wrap


@overload
def text_arg(name: str, value: Any, *, optional: Literal[False] = False) -> str: ...
@overload
def text_arg(name: str, value: Any, *, optional: bool) -> str | None: ...
def text_arg(name: str, value: Any, *, optional: bool = False) -> str | None:
    """A text argument (``None`` allowed when ``optional``)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise refuse(f"{name} must be text, not {kind_name(value)}")
    if len(value) > MAX_TEXT_CHARS:
        raise refuse(f"{name} is longer than {MAX_TEXT_CHARS} characters")
    return value


def strings_arg(name: str, value: Any) -> tuple[str, ...]:
    """A list of texts (``None``: empty); a bare string is an error, not a list of letters."""
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise refuse(f"{name} must be a list of texts, not {kind_name(value)}")
    if len(value) > MAX_LIST_ITEMS:
        raise refuse(f"{name} has more than {MAX_LIST_ITEMS} items")
    return tuple(text_arg(f"{name}[{i}]", v) or "" for i, v in enumerate(value))


def int_arg(name: str, value: Any, low: int, high: int) -> int:
    """A whole number in ``[low, high]`` (a float with no fraction is accepted)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise refuse(f"{name} must be a whole number, not {kind_name(value)}")
    if not low <= value <= high:
        raise refuse(f"{name} {value} is out of range; give {low} to {high}")
    return value


def ints_arg(name: str, value: Any, low: int, high: int) -> tuple[int, ...]:
    """A list of whole numbers (``None``: empty)."""
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        raise refuse(f"{name} must be a list of whole numbers, not {kind_name(value)}")
    if len(value) > MAX_LIST_ITEMS:
        raise refuse(f"{name} has more than {MAX_LIST_ITEMS} items")
    return tuple(int_arg(f"{name}[{i}]", v, low, high) for i, v in enumerate(value))


@overload
def float_arg(
    name: str, value: Any, low: float, high: float, *, optional: Literal[False] = False
) -> float: ...
@overload
def float_arg(
    name: str, value: Any, low: float, high: float, *, optional: bool
) -> float | None: ...
def float_arg(
    name: str, value: Any, low: float, high: float, *, optional: bool = False
) -> float | None:
    """A finite number in ``[low, high]`` (``None`` allowed when ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise refuse(f"{name} must be a number, not {kind_name(value)}")
    number = float(value)
    if not math.isfinite(number) or not low <= number <= high:
        raise refuse(f"{name} {value!r} is out of range; give {low:g} to {high:g}")
    return number


def bool_arg(name: str, value: Any) -> bool:
    """A true/false argument (not a string, not a number)."""
    if not isinstance(value, bool):
        raise refuse(f"{name} must be true or false, not {kind_name(value)}")
    return value


def kind_name(value: Any) -> str:
    """What a refusal calls the type of ``value`` (``text``, ``a list``, ``null``, ...)."""
    names = {str: "text", list: "a list", tuple: "a list", dict: "an object", bool: "true/false"}
    return (
        "null"
        if value is None
        else names.get(
            type(value), "a number" if isinstance(value, int | float) else "another type"
        )
    )
