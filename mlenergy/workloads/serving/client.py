"""One streamed request to an OpenAI-compatible server, timed token by token (aiohttp).

Chat requests go to ``{endpoint}/chat/completions``, completion requests to
``{endpoint}/completions``; both ask for a streamed answer with the usage summary
(``stream_options.include_usage``). The stream may end with ``data: [DONE]`` or simply close
(``transformers serve``). Output tokens are the server's ``usage.completion_tokens`` when sent,
else the number of chunks that carried text.

The client believes nothing it has not checked, and its memory and time stay bounded whatever
the server does:

* every chunk fits the schema of :mod:`~.chunks` (else the request fails, naming the chunk);
* an SSE line is at most :data:`MAX_LINE_BYTES`; an error body is read up to 4 kB;
* token counts are integers in ``[0, max_tokens]`` and within :data:`TOKENS_PER_CHUNK` of the
  text chunks seen (either way); reported prompt tokens are at most the prompt's UTF-8 bytes plus
  :data:`TEMPLATE_TOKENS`; nothing is ever sized by a number the server sends;
* the first token arrives within ``request_timeout_s``, each later text chunk (and the end of the
  stream) within ``request_timeout_s`` of the one before, at most ``max_tokens`` text chunks and
  ``2 x max_tokens + 16`` data events arrive, and the whole request ends within
  :func:`request_deadline_s` (so comments or keep-alives cannot hold a request open).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
from aiohttp.http_exceptions import LineTooLong
from orjson import dumps as _dumps  # a fast JSON writer (a dependency)

from mlenergy.errors import UserError
from mlenergy.workloads.serving.chunks import ChunkError, name_chunk, parse_chunk
from mlenergy.workloads.serving.prompts import estimate_tokens
from mlenergy.workloads.serving.timing import RequestTiming
from mlenergy.workloads.serving.untrusted import clean_text

Api = Literal["chat", "completions"]

IGNORE_EOS_BODIES: dict[str, dict[str, Any]] = {
    "ignore_eos": {"ignore_eos": True},  # vLLM, SGLang, llama.cpp's llama-server
    "generation_config": {"generation_config": json.dumps({"eos_token_id": -1})},  # transformers
}
"""Request fields that ask an engine to ignore end-of-sequence, by how the engine takes it."""

MAX_LINE_BYTES = 1 << 20
"""Longest SSE line the client reads (1 MiB); a longer one fails the request."""
TOKENS_PER_CHUNK = 16
"""Most output tokens a server may count per text chunk it streamed, and most chunks per token."""
TEMPLATE_TOKENS = 4096
"""Prompt tokens a chat template may add beyond one token per UTF-8 byte of the prompt."""
SLOWEST_TOKEN_S = 10.0
"""Per output token, the most time the whole-request deadline grants (with the first token's)."""
_ERROR_BYTES = 4096
_ERROR_CHARS = 300
_JSON_HEADERS = {"Content-Type": "application/json", "Accept-Encoding": "identity"}


@dataclass(frozen=True)
class RequestOptions:
    """What every request of a run carries.

    Attributes:
        endpoint: Base URL of the OpenAI API, e.g. ``http://127.0.0.1:8000/v1``.
        model: The model name the server expects.
        api: ``chat`` or ``completions``.
        max_output_tokens: ``max_tokens`` of each request.
        extra_body: More fields (the ignore-EOS field, sampling settings).
        request_timeout_s: Seconds to the first token, and at most between text chunks.

    Raises:
        UserError: A time limit that is not a positive finite number, or no output token.
    """

    endpoint: str
    model: str
    api: Api = "chat"
    max_output_tokens: int = 64
    extra_body: dict[str, Any] = field(default_factory=dict)
    request_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.request_timeout_s) and self.request_timeout_s > 0):
            raise UserError(
                f"--request-timeout {self.request_timeout_s} is not a positive number of seconds",
                "Pass e.g. --request-timeout 600",
            )
        if self.max_output_tokens < 1:
            raise UserError(
                f"--max-output-tokens {self.max_output_tokens} must be at least 1",
                "Pass e.g. --max-output-tokens 128",
            )

    @property
    def url(self) -> str:
        """The URL requests are posted to."""
        path = "chat/completions" if self.api == "chat" else "completions"
        return f"{self.endpoint.rstrip('/')}/{path}"

    def payload(self, prompt: str) -> dict[str, Any]:
        """The JSON body of a request for ``prompt``."""
        body: dict[str, Any] = {
            "model": self.model,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": self.max_output_tokens,
            "temperature": 0.0,
        }
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        body.update(self.extra_body)
        return body


def request_deadline_s(options: RequestOptions) -> float:
    """Seconds a whole request may take: the first token's timeout plus a bound per token.

    ``request_timeout_s + max_tokens x min(request_timeout_s, SLOWEST_TOKEN_S)``.
    """
    timeout = options.request_timeout_s
    return timeout + options.max_output_tokens * min(timeout, SLOWEST_TOKEN_S)


def http_session(connections: int) -> aiohttp.ClientSession:
    """An HTTP session with ``connections`` connections, no proxy, no decompression.

    Must be created inside a running event loop. Time limits are the client's own (see
    :func:`stream_request`); only connecting is bounded here (10 s).
    """
    connector = aiohttp.TCPConnector(limit=connections, limit_per_host=0, force_close=False)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None, sock_connect=10.0),
        trust_env=False,
        auto_decompress=False,  # never asked for: a compressed answer is not inflated
    )


def _error_detail(status: int, text: str) -> str:
    detail = text.strip()
    try:
        parsed = json.loads(detail)
        if isinstance(parsed, dict):
            inner = parsed.get("detail") or parsed.get("error") or parsed.get("message")
            if isinstance(inner, dict):
                inner = inner.get("message") or inner
            detail = str(inner or detail)
    except ValueError:
        pass
    return f"HTTP {status}: {clean_text(detail, _ERROR_CHARS) or 'no detail'}"


async def _read_some(content: aiohttp.StreamReader, limit: int = _ERROR_BYTES) -> str:
    """At most ``limit`` bytes of a body (an error page), decoded leniently."""
    parts: list[bytes] = []
    size = 0
    while size < limit:
        part = await content.read(limit - size)
        if not part:
            break
        parts.append(part)
        size += len(part)
    return b"".join(parts).decode("utf-8", errors="replace")


class _Deadline:
    """Cancels the request's task when ``at`` passes; ``at`` moves forward at no cost.

    One timer per request, re-armed only when it fires early (the deadline moved), so a text
    chunk costs a float assignment rather than a new timer.
    """

    __slots__ = ("at", "end", "fired", "handle", "loop", "task")

    def __init__(self, loop: asyncio.AbstractEventLoop, at: float, end: float) -> None:
        self.loop = loop
        self.at = min(at, end)
        self.end = end
        self.fired = False
        self.task = asyncio.current_task()
        self.handle = loop.call_at(self.at, self._check)

    def _check(self) -> None:
        if self.loop.time() < self.at:
            self.handle = self.loop.call_at(self.at, self._check)
            return
        self.fired = True
        if self.task is not None:
            self.task.cancel()


def _timed_out(timing: RequestTiming, options: RequestOptions, whole: bool) -> str:
    timeout = options.request_timeout_s
    if whole:
        return (
            f"the request ran past its whole deadline of {request_deadline_s(options):.4g} s "
            f"({timeout:.4g} s to the first token + {options.max_output_tokens} tokens x "
            f"{min(timeout, SLOWEST_TOKEN_S):.4g} s)"
        )
    if timing.first_token_s is None:
        return f"no output token within --request-timeout {timeout:.4g} s"
    return (
        f"no further output within --request-timeout {timeout:.4g} s after "
        f"{len(timing.chunk_times_s)} text chunk(s)"
    )


async def stream_request(
    session: aiohttp.ClientSession,
    options: RequestOptions,
    prompt: str,
    timing: RequestTiming,
    on_first_token: Callable[[int, float], None] | None = None,
) -> RequestTiming:
    """Send one streamed request and fill ``timing`` as its chunks arrive.

    Never raises for a failed request: ``timing.error`` says what went wrong in one line (HTTP
    status and the server's detail, a dropped connection, a chunk that breaks the schema, a
    count out of bounds, a deadline passed, a stream without a token).

    Args:
        session: The shared HTTP session (:func:`http_session`).
        options: Endpoint, model, API, body fields and time limit.
        prompt: The prompt text.
        timing: The request's record (``index`` set by the caller).
        on_first_token: Called with ``(index, unix time)`` when the first text arrives.
    """
    loop = asyncio.get_running_loop()
    timing.sent_s = time.time()
    timing.prompt_tokens = estimate_tokens(prompt)
    timeout = options.request_timeout_s
    max_tokens = options.max_output_tokens
    max_prompt = len(prompt.encode("utf-8")) + TEMPLATE_TOKENS
    max_events = 2 * max_tokens + 16
    chat = options.api == "chat"
    start = loop.time()
    guard = _Deadline(loop, start + timeout, start + request_deadline_s(options))
    times = timing.chunk_times_s
    usage_tokens: int | None = None
    events = 0
    try:
        body = _dumps(options.payload(prompt))
        async with session.post(options.url, data=body, headers=_JSON_HEADERS) as response:
            if response.status != 200:
                timing.error = _error_detail(response.status, await _read_some(response.content))
                return timing
            content = response.content
            while True:
                line = await content.readline(max_line_length=MAX_LINE_BYTES)
                if not line:
                    break
                if not line.startswith(b"data:"):
                    continue  # blank separators, comments, event names
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                events += 1
                if events > max_events:
                    timing.error = f"the stream sent more than {max_events} data events"
                    return timing
                try:
                    text, finish, completion, prompt_n, error = parse_chunk(
                        data, chat, max_tokens, max_prompt
                    )
                except ChunkError as err:
                    timing.error = f"{name_chunk(events, data)} {err}"
                    return timing
                if error is not None:
                    timing.error = f"stream error: {error}"
                    return timing
                if text:
                    now = time.time()
                    if timing.first_token_s is None:
                        timing.first_token_s = now
                        if on_first_token is not None:
                            on_first_token(timing.index, now)
                    times.append(now)
                    if len(times) > max_tokens:
                        timing.error = (
                            f"the stream sent more than {max_tokens} text chunks (max_tokens)"
                        )
                        return timing
                    guard.at = min(loop.time() + timeout, guard.end)
                if finish is not None:
                    timing.finish_reason = finish
                if completion is not None:
                    usage_tokens = completion
                if prompt_n:
                    timing.prompt_tokens = prompt_n
                    timing.prompt_tokens_reported = True
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if not guard.fired or task is None:
            raise
        task.uncancel()
        timing.error = _timed_out(timing, options, guard.at >= guard.end)
        return timing
    except LineTooLong:
        timing.error = f"an SSE line longer than {MAX_LINE_BYTES >> 20} MiB"
        return timing
    except (aiohttp.ClientError, OSError, ValueError) as err:
        detail = clean_text(str(err), _ERROR_CHARS) or "connection lost"
        timing.error = f"{type(err).__name__}: {detail}"
        return timing
    finally:
        guard.handle.cancel()
        timing.end_s = time.time()
    chunks = len(times)
    if timing.first_token_s is None:
        timing.error = "the stream ended without an output token"
    elif usage_tokens is not None and not (
        chunks <= usage_tokens * TOKENS_PER_CHUNK and usage_tokens <= chunks * TOKENS_PER_CHUNK
    ):
        timing.error = (
            f"the server counted {usage_tokens} output tokens for {chunks} text chunk(s) "
            f"(at most {TOKENS_PER_CHUNK} tokens a chunk or chunks a token are believed)"
        )
    timing.output_tokens = usage_tokens if usage_tokens is not None else chunks
    return timing
