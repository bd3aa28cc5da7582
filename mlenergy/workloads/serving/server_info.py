"""What a server says about itself: its models, its engine, its metrics, read with a size cap.

Attach mode (``--endpoint``) asks the server what it is: vLLM's ``/version``, TGI's ``/info``,
SGLang's ``/get_server_info``, llama-server's ``/props``, the ``owned_by`` of ``/v1/models`` and
the metric prefixes of a Prometheus ``/metrics``; ``--engine NAME`` names it otherwise. A served
alias is traced to the model behind it through ``/v1/models`` (``root``).

The server is not trusted: every answer is read as a stream and dropped past a size cap
(:data:`INFO_BYTES`, :data:`LIST_BYTES`), names and versions are cleaned
(:func:`~.untrusted.clean_text`: a length limit, no control characters, no ``repr`` of an
object), and metric values that are not finite or lie outside their range are dropped.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import httpx

from mlenergy.errors import UserError
from mlenergy.workloads.serving.untrusted import clean_text

_METRIC_ENGINES = (
    ("vllm:", "vllm"),
    ("sglang:", "sglang"),
    ("tgi_", "tgi"),
    ("llamacpp:", "llama.cpp"),
)
_OWNERS = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp", "tgi": "tgi"}
_RUNNING = ("vllm:num_requests_running", "sglang:num_running_reqs", "tgi_batch_current_size")
_WAITING = ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size")
_KV_CACHE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")
_KEYS = (("running", _RUNNING), ("waiting", _WAITING), ("kv_cache", _KV_CACHE))
_METRIC_RANGES = {"running": (0.0, 1e6), "waiting": (0.0, 1e6), "kv_cache": (0.0, 1.0)}
"""Values a scraped metric may take (requests; a fraction): anything else is dropped."""
INFO_BYTES = 1 << 20
"""Most bytes read from ``/version``, ``/info``, ``/get_server_info``, ``/props``."""
ROOT_CHARS = 512
"""Longest model ``root`` (a folder or hub id) kept from ``/v1/models``."""
LIST_BYTES = 4 << 20
"""Most bytes read from ``/v1/models`` and ``/metrics``."""


def server_root(endpoint: str) -> str:
    """The server's root URL from its OpenAI base URL (``.../v1`` dropped)."""
    root = endpoint.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def http_client(timeout_s: float) -> httpx.Client:
    """A client for the server's info pages: no proxy, no compression asked for."""
    return httpx.Client(timeout=timeout_s, trust_env=False, headers={"Accept-Encoding": "identity"})


def read_capped(client: httpx.Client, url: str, limit: int = INFO_BYTES) -> bytes | None:
    """The body of ``GET url`` when it answers 200 within ``limit`` bytes, else ``None``.

    The body is read as a stream and dropped once it passes ``limit``: a server cannot make the
    client hold more than that.
    """
    try:
        with client.stream("GET", url) as response:
            if response.status_code != 200:
                return None
            parts, size = [], 0
            for part in response.iter_raw():
                size += len(part)
                if size > limit:
                    return None
                parts.append(part)
            return b"".join(parts)
    except httpx.HTTPError:
        return None


def _json(body: bytes | None) -> Any:
    if body is None:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return None


def served_models(endpoint: str, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """The models a server lists at ``/v1/models``.

    Raises:
        UserError: The server cannot be reached or does not answer like an OpenAI server.
    """
    url = f"{endpoint}/models"
    try:
        with (
            http_client(timeout_s) as client,
            client.stream("GET", url) as response,
        ):
            status = response.status_code
            body = b""
            for part in response.iter_raw():
                body += part
                if len(body) > LIST_BYTES:
                    break
    except httpx.HTTPError as err:
        raise UserError(
            f"cannot reach the server at {endpoint} ({type(err).__name__}: "
            f"{clean_text(str(err), 200)})",
            "Start the server first, check --endpoint (host, port, /v1), or use --launch",
        ) from err
    if status != 200:
        raise UserError(
            f"{url} answered HTTP {status}, not a list of models",
            "Point --endpoint at an OpenAI-compatible server's /v1 base URL",
        )
    if len(body) > LIST_BYTES:
        raise UserError(
            f"{url} answered more than {LIST_BYTES >> 20} MiB, not a list of models",
            "Point --endpoint at an OpenAI-compatible server's /v1 base URL",
        )
    listing = _json(body)
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        raise UserError(
            f"{url} did not answer an OpenAI model list",
            "Point --endpoint at an OpenAI-compatible server's /v1 base URL",
        )
    return [m for m in data if isinstance(m, dict)]


def check_model_served(endpoint: str, model: str) -> list[dict[str, Any]]:
    """Check that ``model`` is among the served models; return the list.

    Raises:
        UserError: The server is unreachable or serves other models only.
    """
    models = served_models(endpoint)
    ids = [m.get("id") for m in models]
    if ids and model not in ids:
        shown = [clean_text(i) or "?" for i in ids[:5]]
        raise UserError(
            f"the server at {endpoint} does not serve model {model!r} (it serves: "
            f"{', '.join(shown)})",
            "Pass --model exactly as the server lists it",
        )
    return models


def model_root(models: list[dict[str, Any]], model: str) -> str | None:
    """What the server says it loaded for ``model``: vLLM's ``root`` in ``/v1/models``.

    A served alias (``--served-model-name tiny``) names nothing the client can read; its
    ``root`` is the folder or hub id the server loaded. ``None`` when not said, or when it is
    the name itself. The text is the server's, cleaned (:func:`~.untrusted.clean_text`).
    """
    for entry in models:
        if entry.get("id") == model:
            root = clean_text(entry.get("root"), ROOT_CHARS)
            return root if root and root != model else None
    return None


@dataclass(frozen=True)
class EngineInfo:
    """What engine answered, and how we know.

    Attributes:
        name: ``"vllm 0.11.1"``, ``"tgi 3.0.1"``, ``"transformers 5.25.0"``..., or ``None``.
        source: Where it came from (``/version``, ``/info``, ``--engine``, ``--launch``...).
        has_metrics: Whether ``/metrics`` answers with an engine's Prometheus metrics.
    """

    name: str | None
    source: str | None
    has_metrics: bool = False


def detect_engine(
    endpoint: str, models: list[dict[str, Any]], given: str | None = None
) -> EngineInfo:
    """Ask the server what engine it is; fall back to ``given`` (``--engine``).

    A name given with ``--engine`` wins over what the server says only when the server says
    nothing.
    """
    root = server_root(endpoint)
    name: str | None = None
    source: str | None = None
    with http_client(5.0) as client:
        body = read_capped(client, f"{root}/metrics", LIST_BYTES)
        metrics = body.decode("utf-8", "replace") if body is not None else None
        kind = None
        if metrics is not None:
            for prefix, engine in _METRIC_ENGINES:
                if prefix in metrics:
                    kind = engine
                    break
        owner = next((str(m.get("owned_by")) for m in models if m.get("owned_by")), "")
        kind = kind or _OWNERS.get(owner.lower())
        for path, key in (
            ("/version", "version"),
            ("/info", "version"),
            ("/get_server_info", "version"),
            ("/props", "build_info"),
        ):
            answer = _json(read_capped(client, f"{root}{path}"))
            version = clean_text(answer.get(key)) if isinstance(answer, dict) else None
            if version:
                guessed = kind or {"/version": "vllm", "/info": "tgi", "/props": "llama.cpp"}.get(
                    path, "sglang"
                )
                name, source = clean_text(f"{guessed} {version}"), path
                break
        if name is None and kind is not None:
            name, source = kind, "/metrics" if metrics is not None else "/v1/models"
    if name is None and given:
        name, source = clean_text(given), "--engine"
    return EngineInfo(
        name=name, source=source, has_metrics=metrics is not None and kind is not None
    )


def read_metrics(client: httpx.Client, url: str, dropped: list[str]) -> dict[str, float] | None:
    """One scrape of ``/metrics`` (at most :data:`LIST_BYTES`), read by :func:`scrape_metrics`.

    Returns:
        The values, or ``None`` when the page does not answer or is too large.
    """
    body = read_capped(client, url, LIST_BYTES)
    if body is None:
        return None
    return scrape_metrics(body.decode("utf-8", "replace"), dropped)


async def read_metrics_async(
    client: httpx.AsyncClient, url: str, dropped: list[str]
) -> dict[str, float] | None:
    """:func:`read_metrics` for an event loop: one capped scrape, or ``None``."""
    try:
        async with client.stream("GET", url, headers={"Accept-Encoding": "identity"}) as response:
            if response.status_code != 200:
                return None
            parts, size = [], 0
            async for part in response.aiter_raw():
                size += len(part)
                if size > LIST_BYTES:
                    return None
                parts.append(part)
    except httpx.HTTPError:
        return None
    return scrape_metrics(b"".join(parts).decode("utf-8", "replace"), dropped)


def scrape_metrics(text: str, dropped: list[str] | None = None) -> dict[str, float]:
    """Running and waiting requests and KV-cache use from a Prometheus text page.

    A value that is not a finite number in its range (requests in ``[0, 1e6]``, cache use in
    ``[0, 1]``) is dropped, and so is a sum over label sets that leaves the range.

    Args:
        text: The page.
        dropped: Gets ``"name value"`` of every value dropped (for one warning).

    Returns:
        Keys ``running``, ``waiting``, ``kv_cache`` (fraction) for the metrics found; a metric
        with several label sets is summed (cache use: averaged).
    """
    found: dict[str, list[float]] = {}
    bad = dropped if dropped is not None else []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, brace, tail = line.partition("{")
        name = head.split(" ", 1)[0]
        key = next((k for k, names in _KEYS if name in names), None)
        if key is None:
            continue
        rest = (tail.rpartition("}")[2] if brace else line[len(name) :]).split()
        try:
            value = float(rest[0])
        except (ValueError, IndexError):
            continue
        low, high = _METRIC_RANGES[key]
        if not (math.isfinite(value) and low <= value <= high):
            bad.append(f"{name} {clean_text(rest[0], 20)}")
            continue
        found.setdefault(key, []).append(value)
    out = {k: sum(v) for k, v in found.items()}
    if "kv_cache" in found:
        out["kv_cache"] = sum(found["kv_cache"]) / len(found["kv_cache"])
    for key, value in list(out.items()):
        if not _METRIC_RANGES[key][0] <= value <= _METRIC_RANGES[key][1]:
            bad.append(f"{key} {value:.4g} (summed)")
            del out[key]
    return out
