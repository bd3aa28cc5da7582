"""Serve the app's page (``GET /``) from memory after the first request.

Gradio renders its page per request: it deep-copies the page configuration (every component,
event and API parameter), rewrites its URLs and fills the HTML template, which costs more CPU
than any API call of this app. The page depends only on the app (built once) and on what the
request says about its address (host, forwarding headers, query string), so one answer per such
address is kept and replayed. Only successful (200) answers to ``GET /`` are kept.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

KEY_HEADERS = (b"host", b"x-forwarded-host", b"x-forwarded-proto", b"x-forwarded-prefix")
"""Request headers the page's URLs are built from (Gradio's ``get_root_url``)."""
MAX_ENTRIES = 32
"""Distinct addresses kept (a proxy or two, a few hosts); the oldest goes first."""


class PageCache:
    """ASGI middleware: replay the first ``200`` answer to ``GET /`` for each address.

    Args:
        app: The ASGI app it wraps (Gradio's FastAPI app, or the next middleware).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._answers: dict[tuple, tuple[int, list, bytes]] = {}
        self._lock = threading.Lock()

    def _key(self, scope: Scope) -> tuple | None:
        if scope["type"] != "http" or scope.get("method") != "GET" or scope.get("path") != "/":
            return None
        headers = dict(scope.get("headers") or [])
        forwarded = tuple(headers.get(name, b"") for name in KEY_HEADERS)
        return (
            scope.get("scheme"),
            scope.get("root_path", ""),
            scope.get("query_string"),
            forwarded,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer from memory when possible, else pass on (and keep a ``200`` answer)."""
        key = self._key(scope)
        if key is None:
            await self.app(scope, receive, send)
            return
        cached = self._answers.get(key)
        if cached is not None:
            status, headers, body = cached
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        start: dict = {}
        chunks: list[bytes] = []

        async def keep(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body") and start.get("status") == 200:
                    self._store(key, (200, list(start.get("headers", [])), b"".join(chunks)))
            await send(message)

        await self.app(scope, receive, keep)

    def _store(self, key: tuple, answer: tuple[int, list, bytes]) -> None:
        with self._lock:
            if len(self._answers) >= MAX_ENTRIES:
                self._answers.pop(next(iter(self._answers)))
            self._answers[key] = answer
