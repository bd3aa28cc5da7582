"""What a client sees and what the server logs when a request is refused.

A refused request (bad input to the page or to the API) is one log line on the server (the
endpoint, the reason and the inputs, truncated) and one short message for the client: no
traceback, no Python internals, no server path. :func:`public_message` scrubs a message;
:func:`refuse` logs the line and returns the ``gr.Error`` to raise (Gradio prints no traceback
for it).
"""

from __future__ import annotations

import logging
import re

LOG = logging.getLogger("mlenergy.leaderboard")

MAX_MESSAGE = 300
"""Characters of a client message kept (longer ones end with an ellipsis)."""
MAX_INPUT = 80
"""Characters of each input kept in the log line."""

_PATH = re.compile(r"(?<![\w.:/])(?:~|[A-Za-z]:)?(?:[/\\][^\s/\\'\"`,;:()]+){2,}[/\\]?")
"""An absolute path of at least two parts (``/srv/app/data``, ``C:\\x\\y``, ``~/a/b``)."""


def _short(text: str, limit: int) -> str:
    text = " ".join(str(text).split())  # one line: no newlines or control runs
    return text if len(text) <= limit else text[: limit - 1] + "…"


def public_message(message: object) -> str:
    """``message`` as a client may see it.

    Server paths are replaced by their last part; one line, at most :data:`MAX_MESSAGE`
    characters.

    Example: ``"no config at /srv/app/configs/x.json"`` -> ``"no config at …/x.json"``.
    """

    def _hide(match: re.Match) -> str:
        last = re.split(r"[/\\]", match.group(0).rstrip("/\\"))[-1]
        return f"…/{last}"

    return _short(_PATH.sub(_hide, str(message)), MAX_MESSAGE)


def log_line(endpoint: str, reason: object, inputs: dict | None = None) -> str:
    """The one log line of a refused request (inputs truncated to :data:`MAX_INPUT`)."""
    args = ", ".join(f"{k}={_short(repr(v), MAX_INPUT)}" for k, v in (inputs or {}).items())
    return f"refused {endpoint}({args}): {_short(str(reason), MAX_MESSAGE)}"


def refuse(endpoint: str, reason: object, **inputs: object):
    """Log one line for a refused request and return the ``gr.Error`` to raise.

    Args:
        endpoint: The endpoint or tab (e.g. ``"/estimate"``).
        reason: The exception or message (its text is scrubbed by :func:`public_message`).
        **inputs: The request's inputs, logged truncated.

    Returns:
        A ``gr.Error`` that Gradio shows without printing a traceback.
    """
    import gradio as gr

    message = getattr(reason, "message", None) or str(reason)
    LOG.warning(log_line(endpoint, message, inputs))
    return gr.Error(public_message(message), print_exception=False)
