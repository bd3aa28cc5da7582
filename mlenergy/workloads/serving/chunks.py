"""The schema of a streamed chunk: exactly what the client reads, checked before it is used.

Every ``data:`` line of a streamed answer must be a JSON object of this shape (other keys are
ignored)::

    {"choices": [                         # a list of at most one choice (n=1 was asked), or null
        {"delta": {"content": str|null,   # chat; also "reasoning_content"/"reasoning": str|null
                   ...} | null,
         "text": str|null,                # completions
         "finish_reason": str|null}],
     "usage": {"completion_tokens": int,  # 0 <= n <= max_tokens
               "prompt_tokens": int|null} | null,
     "error": ...}                        # with no choices: the server reports a failure

Anything else fails the request with one line that names the chunk (its number in the stream and
its first characters): a number, a list, a choice that is not an object, a delta that is a string,
a count that is not an integer or lies outside its bounds. JSON that is not JSON fails the same way.
"""

from __future__ import annotations

import json
from typing import Any

from orjson import loads as _loads  # a fast JSON parser (a dependency)

from mlenergy.workloads.serving.untrusted import clean_text, excerpt

_CHAT_TEXT = ("content", "reasoning_content", "reasoning")
"""Delta fields whose text is generated output (answer, and a reasoning model's thoughts)."""


class ChunkError(ValueError):
    """A chunk that does not fit the schema; the message names it."""


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _count(usage: dict[str, Any], key: str, low: int, high: int) -> int | None:
    value = usage.get(key)
    if value is None:
        return None
    if type(value) is not int:  # a bool, a float, a string: not a count
        raise ChunkError(f"usage.{key} is {_kind(value)}, not an integer")
    if not low <= value <= high:
        raise ChunkError(f"usage.{key} {value} is outside [{low}, {high}]")
    return value


def parse_chunk(
    data: bytes, chat: bool, max_tokens: int, max_prompt_tokens: int
) -> tuple[bool, str | None, int | None, int | None, str | None]:
    """Read one ``data:`` payload against the schema.

    Args:
        data: The bytes after ``data:``.
        chat: Chat completions (``delta``) rather than completions (``text``).
        max_tokens: The request's ``max_tokens``: the most output tokens a count may claim.
        max_prompt_tokens: The most prompt tokens a count may claim.

    Returns:
        ``(carries text, finish reason, completion tokens, prompt tokens, server error)``;
        the counts are ``None`` when the chunk has none, the error is ``None`` unless the chunk
        is an error report.

    Raises:
        ChunkError: What is wrong with the chunk (without naming it: the caller does).
    """
    try:
        chunk = _loads(data)
    except ValueError as err:
        raise ChunkError(f"is not JSON ({str(err)[:80]})") from None
    if type(chunk) is not dict:
        raise ChunkError(f"is {_kind(chunk)}, not an object")
    choices = chunk.get("choices")
    if chunk.get("error") is not None and not choices:
        detail = chunk["error"]
        if isinstance(detail, dict):
            detail = detail.get("message", detail)
        return False, None, None, None, clean_text(json.dumps(detail), 300) or "no detail"
    has_text = False
    finish: str | None = None
    if choices is not None:
        if type(choices) is not list:
            raise ChunkError(f"choices is {_kind(choices)}, not a list")
        if len(choices) > 1:
            raise ChunkError(f"holds {len(choices)} choices (one was asked for)")
        for choice in choices:
            if type(choice) is not dict:
                raise ChunkError(f"choices[0] is {_kind(choice)}, not an object")
            if chat:
                delta = choice.get("delta")
                if delta is not None:
                    if type(delta) is not dict:
                        raise ChunkError(f"choices[0].delta is {_kind(delta)}, not an object")
                    for key in _CHAT_TEXT:
                        text = delta.get(key)
                        if text is not None:
                            if type(text) is not str:
                                raise ChunkError(
                                    f"choices[0].delta.{key} is {_kind(text)}, not a string"
                                )
                            has_text = has_text or text != ""
            else:
                text = choice.get("text")
                if text is not None:
                    if type(text) is not str:
                        raise ChunkError(f"choices[0].text is {_kind(text)}, not a string")
                    has_text = text != ""
            reason = choice.get("finish_reason")
            if reason is not None:
                if type(reason) is not str:
                    raise ChunkError(f"choices[0].finish_reason is {_kind(reason)}, not a string")
                finish = clean_text(reason, 32)
    usage = chunk.get("usage")
    completion = prompt = None
    if usage is not None:
        if type(usage) is not dict:
            raise ChunkError(f"usage is {_kind(usage)}, not an object")
        completion = _count(usage, "completion_tokens", 0, max_tokens)
        prompt = _count(usage, "prompt_tokens", 0, max_prompt_tokens)
    return has_text, finish, completion, prompt, None


def name_chunk(number: int, data: bytes) -> str:
    """How an error message names a chunk: its number in the stream and its first characters."""
    return f"chunk {number} of the stream ({excerpt(data)!s})"
