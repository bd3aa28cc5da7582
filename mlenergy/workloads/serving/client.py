"""One streamed request to an OpenAI-compatible server, timed token by token (httpx).

Chat requests go to ``{endpoint}/chat/completions``, completion requests to
``{endpoint}/completions``; both ask for a streamed answer with the usage summary
(``stream_options.include_usage``). The stream may end with ``data: [DONE]`` or simply close
(``transformers serve``). Output tokens are the server's ``usage.completion_tokens`` when sent,
else the number of chunks that carried text.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

try:  # a fast JSON parser (a dependency of gradio); the standard library's otherwise
    from orjson import loads as _loads
except ImportError:  # pragma: no cover
    _loads = json.loads

from mlenergy.workloads.serving.prompts import estimate_tokens
from mlenergy.workloads.serving.timing import RequestTiming

Api = Literal["chat", "completions"]

IGNORE_EOS_BODIES: dict[str, dict[str, Any]] = {
    "ignore_eos": {"ignore_eos": True},  # vLLM, SGLang, llama.cpp's llama-server
    "generation_config": {"generation_config": json.dumps({"eos_token_id": -1})},  # transformers
}
"""Request fields that ask an engine to ignore end-of-sequence, by how the engine takes it."""

_ERROR_CHARS = 300


@dataclass(frozen=True)
class RequestOptions:
    """What every request of a run carries.

    Attributes:
        endpoint: Base URL of the OpenAI API, e.g. ``http://127.0.0.1:8000/v1``.
        model: The model name the server expects.
        api: ``chat`` or ``completions``.
        max_output_tokens: ``max_tokens`` of each request.
        extra_body: More fields (the ignore-EOS field, sampling settings).
    """

    endpoint: str
    model: str
    api: Api = "chat"
    max_output_tokens: int = 64
    extra_body: dict[str, Any] = field(default_factory=dict)

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
    return f"HTTP {status}: {detail[:_ERROR_CHARS] or 'no detail'}"


def _text_of(choice: dict[str, Any], api: Api) -> str:
    if api == "chat":
        return (choice.get("delta") or {}).get("content") or ""
    return choice.get("text") or ""


async def stream_request(
    client: httpx.AsyncClient,
    options: RequestOptions,
    prompt: str,
    timing: RequestTiming,
    on_first_token: Callable[[int, float], None] | None = None,
) -> RequestTiming:
    """Send one streamed request and fill ``timing`` as its chunks arrive.

    Never raises for a failed request: ``timing.error`` says what went wrong (HTTP status and
    the server's detail, a dropped connection, a stream without a token).

    Args:
        client: The shared HTTP client.
        options: Endpoint, model, API and body fields.
        prompt: The prompt text.
        timing: The request's record (``index`` and ``sent_s`` set by the caller).
        on_first_token: Called with ``(index, unix time)`` when the first text arrives.
    """
    timing.sent_s = time.time()
    timing.prompt_tokens = estimate_tokens(prompt)
    usage_tokens: int | None = None
    try:
        async with client.stream("POST", options.url, json=options.payload(prompt)) as response:
            if response.status_code != 200:
                body = (await response.aread()).decode("utf-8", errors="replace")
                timing.error = _error_detail(response.status_code, body)
                return timing
            async for line in response.aiter_lines():
                line = line.strip()
                if not line.startswith("data:"):
                    continue
                data = line.removeprefix("data:").strip()
                if data == "[DONE]":
                    break
                chunk = _loads(data)
                if "error" in chunk and not chunk.get("choices"):
                    timing.error = f"stream error: {str(chunk['error'])[:_ERROR_CHARS]}"
                    return timing
                now = time.time()
                for choice in chunk.get("choices") or []:
                    if _text_of(choice, options.api):
                        if timing.first_token_s is None:
                            timing.first_token_s = now
                            if on_first_token is not None:
                                on_first_token(timing.index, now)
                        timing.chunk_times_s.append(now)
                    if choice.get("finish_reason"):
                        timing.finish_reason = choice["finish_reason"]
                usage = chunk.get("usage")
                if usage:
                    usage_tokens = usage.get("completion_tokens", usage_tokens)
                    if usage.get("prompt_tokens"):
                        timing.prompt_tokens = int(usage["prompt_tokens"])
                        timing.prompt_tokens_reported = True
    except (httpx.HTTPError, ValueError) as err:
        timing.error = f"{type(err).__name__}: {str(err)[:_ERROR_CHARS] or 'connection lost'}"
        return timing
    finally:
        timing.end_s = time.time()
    timing.output_tokens = (
        int(usage_tokens) if usage_tokens is not None else len(timing.chunk_times_s)
    )
    if timing.first_token_s is None:
        timing.error = "the stream ended without an output token"
    return timing
