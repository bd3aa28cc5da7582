"""Refuse malformed Gradio calls before Gradio logs them, and cap every log line.

Gradio prints the whole traceback of an event that fails outside the app's own guard, and
some of its messages hold the call's inputs: a call of ``/gradio_api/call/<name>`` with too
few values and a 5 MB string logged 5 MB; an unknown named argument to
``/gradio_api/call/v2/<name>`` logged a 5 kB traceback (and answered 500). :class:`CallGuard`
checks, before Gradio reads them, the bodies of the routes that start an event (call, run,
queue join): their size, the number of values (``data``) or the argument names against the
function they name, and, for the page's own events, the length of each text. A refused call
is one log line of at most :data:`~.client_errors.MAX_MESSAGE` characters and one short answer
(``400`` ``{"detail": ...}``, ``413`` when too large). As a last net, :func:`cap_log_lines`
cuts any line the server writes to stderr at :data:`LINE_LIMIT` characters.
"""

from __future__ import annotations

import inspect
import io
import logging
import re
import sys
from collections.abc import Callable
from typing import Any, TextIO

import orjson

from mlenergy.leaderboard.client_errors import log_line

LOG = logging.getLogger("mlenergy.leaderboard.call_guard")

MAX_BODY_BYTES = 1_500_000
"""Largest event body taken (the estimator's uploaded config, at most 1 MB, fits)."""
MAX_PAGE_TEXT = 2_000
"""Longest text value a page event takes (the page's texts are names, filters and numbers)."""
LINE_LIMIT = 1_000
"""Longest line the server writes to stderr (longer ones are cut, saying how much)."""

_EVENT_ROUTE = re.compile(
    r"^/gradio_api/(?:call/(?P<v2>v2/)?(?P<call>[^/]+)|(?:run|api)/(?P<run>[^/]+)|(?P<join>queue/join))/?$"
)


class Refused(Exception):
    """A call refused before Gradio saw it: an HTTP status and one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _texts_over(value: Any, limit: int) -> bool:
    """Whether ``value`` holds a text longer than ``limit`` (in lists and objects too)."""
    if isinstance(value, str):
        return len(value) > limit
    if isinstance(value, list):
        return any(_texts_over(v, limit) for v in value)
    if isinstance(value, dict):
        return any(_texts_over(v, limit) for v in value.values())
    return False


class CallGuard:
    """ASGI middleware: check the body of each Gradio event call against its function.

    Args:
        app: The app it wraps.
        blocks: The Gradio app whose functions the calls name (``None``: pass everything on).
    """

    def __init__(self, app: Callable, blocks: Any = None) -> None:
        self.app = app
        self.blocks = blocks

    def _function(self, match: re.Match, body: dict) -> Any:
        fns = self.blocks.fns
        name = match["call"] or match["run"]
        if name is not None:
            found = next((f for f in fns.values() if f.api_name == name), None)
            if found is None or getattr(found, "api_visibility", "public") == "private":
                raise Refused(404, f"no endpoint named {name[:80]!r}")
            return found
        index = body.get("fn_index")
        if isinstance(index, bool) or not isinstance(index, int) or index not in fns:
            raise Refused(400, "fn_index names no event of this app")
        return fns[index]

    def check(self, path: str, raw: bytes) -> None:
        """Refuse an event body that Gradio would fail on loudly.

        Raises:
            Refused: Too large, not JSON, too few or too many values, an unknown argument, or
                a page event's text over :data:`MAX_PAGE_TEXT` characters.
        """
        match = _EVENT_ROUTE.match(path)
        if match is None or self.blocks is None:
            return
        if len(raw) > MAX_BODY_BYTES:
            raise Refused(413, f"the call is over {MAX_BODY_BYTES // 1000} kB")
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise Refused(400, "the body is not JSON") from None
        if not isinstance(body, dict):
            raise Refused(400, "the body must be a JSON object")
        fn = self._function(match, body)
        label = fn.api_name or fn.name or "event"
        if match["v2"]:
            names = [label for i in fn.inputs if (label := getattr(i, "label", None))]
            known = _parameter_names(fn) or names
            unknown = [k for k in body if k not in known and k != "oauth_token"]
            if unknown:
                raise Refused(
                    400,
                    f"{label} takes no argument {unknown[0][:60]!r}; it takes {', '.join(known)}",
                )
            return
        data = body.get("data")
        if not isinstance(data, list):
            raise Refused(400, "data must be a list of the call's values")
        wanted = {len(fn.inputs), sum(not i.skip_api for i in fn.inputs)}
        if len(data) not in wanted:
            want = " or ".join(str(n) for n in sorted(wanted))
            raise Refused(400, f"{label} takes {want} values in data, not {len(data)}")
        page_event = getattr(fn, "api_visibility", "public") == "private"  # not the API
        if page_event and _texts_over(data, MAX_PAGE_TEXT):
            raise Refused(400, f"a text value is longer than {MAX_PAGE_TEXT} characters")

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        """Pass a call on with its body, or answer a refusal."""
        path = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") != "POST" or "/gradio_api/" not in path:
            await self.app(scope, receive, send)
            return
        root = scope.get("root_path", "")
        route = path[len(root) :] if root and path.startswith(root) else path
        if _EVENT_ROUTE.match(route) is None:
            await self.app(scope, receive, send)
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left
            chunk = message.get("body", b"")
            size += len(chunk)
            if size <= MAX_BODY_BYTES:
                chunks.append(chunk)
            more = message.get("more_body", False)
        raw = b"".join(chunks) if size <= MAX_BODY_BYTES else b"x" * (MAX_BODY_BYTES + 1)
        try:
            self.check(route, raw)
        except Refused as exc:
            LOG.warning(log_line(route[:80], exc.message))
            await _answer(send, exc.status, exc.message)
            return
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": raw, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _parameter_names(fn: Any) -> list[str]:
    """The named arguments of an API function (``gr.api``), from its signature."""
    try:
        return list(inspect.signature(fn.fn).parameters)
    except (TypeError, ValueError):
        return []


async def _answer(send: Callable, status: int, message: str) -> None:
    body = orjson.dumps({"detail": message})
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class CappedLines(io.TextIOBase):
    """A text stream that writes each line cut at ``limit`` characters, saying how many were cut.

    Args:
        stream: Where the lines go (e.g. ``sys.stderr``).
        limit: Longest line kept (characters).
    """

    def __init__(self, stream: TextIO, limit: int = LINE_LIMIT) -> None:
        super().__init__()
        self.stream, self.limit = stream, limit
        self._column = 0
        self._cut = 0

    def write(self, text: str) -> int:
        """Write ``text``; every line longer than the limit ends with ``… (N characters cut)``."""
        out = []
        for part in text.splitlines(keepends=True):
            line = part.rstrip("\r\n")
            end = part[len(line) :]
            room = max(0, self.limit - self._column)
            out.append(line[:room])
            self._column += min(len(line), room)
            self._cut += max(0, len(line) - room)
            if end:
                if self._cut:
                    out.append(f"… ({self._cut} characters cut)")
                out.append(end)
                self._column = self._cut = 0
        self.stream.write("".join(out))
        return len(text)

    def flush(self) -> None:
        """Flush the stream below."""
        self.stream.flush()

    def isatty(self) -> bool:
        """Whether the stream below is a terminal."""
        return self.stream.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]  # a property over the base attribute
        """The stream's encoding."""
        return getattr(self.stream, "encoding", "utf-8")


def cap_log_lines(limit: int = LINE_LIMIT) -> None:
    """Cut every line this process writes to stderr at ``limit`` characters (once)."""
    if not isinstance(sys.stderr, CappedLines):
        sys.stderr = CappedLines(sys.stderr, limit)
