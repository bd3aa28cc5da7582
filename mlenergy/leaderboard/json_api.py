"""The plain JSON API beside the page: ``GET /api/v1/...`` on the same server, for programs.

Each route serves one function of :func:`mlenergy.leaderboard.api.api_functions`, the very
objects behind the Gradio endpoints, so both answer alike: query parameters are those
functions' arguments (lists as repeated parameters or comma-separated), read by their type
hints. An answer is encoded once per store snapshot and kept (bytes, gzip, ``ETag``): a repeat
is a dictionary look-up, answered ``304`` when the client already holds it (``If-None-Match``)
and with ``Cache-Control`` that lets browsers and a CDN keep it for :data:`MAX_AGE_S`. A bad
parameter is ``400`` with one line, ``{"error": "..."}``, no path and no traceback.

The routes are listed, with their parameters, in the OpenAPI page ``/api/v1/docs``
(``/api/v1/openapi.json``). :class:`JsonApiMount` puts the API in front of Gradio's app.
"""

from __future__ import annotations

import gzip
import hashlib
import inspect
import logging
import threading
import types
import typing
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr
import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from mlenergy.leaderboard import catalog
from mlenergy.leaderboard.api import GRADIO_ONLY, refuse
from mlenergy.leaderboard.context import AppContext

PREFIX = "/api/v1"
"""Where the API is served (its version is in the path)."""
VERSION = "1"
MAX_AGE_S = 300
"""How long browsers and caches may keep an answer (s): the store changes by approvals only."""
CACHE_CONTROL = f"public, max-age={MAX_AGE_S}"
MEMO_SIZE = 1024
"""Encoded answers kept (least recently used dropped first; at most ~40 MB of 30 kB pages)."""
MAX_QUERY_BYTES = 4096
"""Longest query string taken."""
GZIP_MIN_BYTES = 1024
"""Answers at least this long are also kept gzip-compressed."""
LOGGED_CHARS = 200
"""A refused request's path and query are logged cut to this many characters."""
LOG = logging.getLogger("mlenergy.leaderboard.json_api")


@dataclass(frozen=True)
class Route:
    """One GET route of the API.

    Attributes:
        path: Path under :data:`PREFIX` (Starlette syntax, e.g. ``/runs/{run_id}``).
        function: Name of the function it serves (see :func:`.api.api_functions`).
        summary: One line for the OpenAPI page.
        path_param: The function argument given in the path, if any.
        pick: The key of the answer this route returns alone (``None``: the whole answer).
    """

    path: str
    function: str
    summary: str
    path_param: str | None = None
    pick: str | None = None


ROUTES = (
    Route("/leaderboard", "leaderboard_table", "The table: one page of rows, filtered and sorted"),
    Route(
        "/leaderboard/rows",
        "leaderboard_table",
        "The table's rows alone, a JSON array (for pandas.read_json)",
        pick="rows",
    ),
    Route("/estimate", "estimate", "The estimator's figures for one configuration"),
    Route("/runs/{run_id}", "provenance", "One run's provenance and power timeline", "run_id"),
    Route("/models", "models", "Every model on the board, and the estimator's models"),
    Route(
        "/models/{model_id:path}", "model_detail", "Every configuration of one model", "model_id"
    ),
    Route("/reference", "reference", "The reference data that ships, with its sources"),
    Route("/filters", "filter_choices", "The values each filter takes"),
    Route("/plots/{kind}", "plot", "A Plots-tab figure as Plotly JSON", "kind"),
    Route("/compare", "compare", "2 to 4 models side by side"),
    Route("/power-budget", "power_budget", "The best configuration per model under a power budget"),
)
"""Every route; a route whose function the app lacks (no estimator) is left out."""


@dataclass(frozen=True)
class Param:
    """One argument of an API function as a query parameter.

    Attributes:
        name: The argument's name.
        kind: ``str``, ``int``, ``float``, ``bool``, ``list[str]`` or ``list[int]``.
        default: Its default (``inspect.Parameter.empty``: required).
    """

    name: str
    kind: str
    default: Any

    @property
    def required(self) -> bool:
        """Whether the call must give it."""
        return self.default is inspect.Parameter.empty


def _kind(hint: Any) -> str:
    """A type hint as a :class:`Param` kind (``str | None`` -> ``str``)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is list:
        return f"list[{typing.get_args(hint)[0].__name__}]"
    return hint.__name__


def params_of(fn: Callable[..., Any]) -> dict[str, Param]:
    """The query parameters of an API function, in its signature's order."""
    hints = typing.get_type_hints(fn)
    return {
        name: Param(name, _kind(hints[name]), p.default)
        for name, p in inspect.signature(fn).parameters.items()
    }


_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _short(text: str) -> str:
    return text if len(text) <= 40 else text[:39] + "…"


def _scalar(param: Param, raw: str, kind: str) -> Any:
    """One query value as the argument's type (a number that does not parse is refused)."""
    if kind == "str":
        return raw
    if raw == "" and param.default is None:
        return None
    if kind == "bool":
        if raw.lower() in _TRUE + _FALSE:
            return raw.lower() in _TRUE
        raise refuse(f"{param.name} must be true or false, not {_short(raw)!r}")
    try:
        return int(raw) if kind == "int" else float(raw)
    except ValueError:
        what = "a whole number" if kind == "int" else "a number"
        raise refuse(f"{param.name} must be {what}, not {_short(raw)!r}") from None


def parse_query(params: dict[str, Param], items: list[tuple[str, str]]) -> dict[str, Any]:
    """The function's arguments from query items (lists: repeated or comma-separated).

    Raises:
        gradio.Error: An unknown or repeated parameter, or a value of the wrong type (one line
            naming it); the function checks ranges and names itself.
    """
    raw: dict[str, list[str]] = {}
    for key, value in items:
        param = params.get(key)
        if param is None:
            known = ", ".join(params) or "none"
            raise refuse(f"{_short(key)!r} is not a parameter here; parameters: {known}")
        if param.kind.startswith("list["):
            raw.setdefault(key, []).extend(v for v in value.split(",") if v)
        elif key in raw:
            raise refuse(f"{key} is given twice; give it once")
        else:
            raw[key] = [value]
    args: dict[str, Any] = {}
    for key, values in raw.items():
        param = params[key]
        if param.kind.startswith("list["):
            item = param.kind[5:-1]
            args[key] = [_scalar(param, v, item) for v in values]
        else:
            args[key] = _scalar(param, values[0], param.kind)
    return args


@dataclass(frozen=True)
class Encoded:
    """An answer ready to send: its JSON bytes, their gzip form (or ``None``) and its ETag."""

    body: bytes
    gzipped: bytes | None
    etag: str


def encode(answer: Any) -> Encoded:
    """Encode an answer once: strict JSON (NaN and infinities as ``null``), gzip, ETag."""
    body = orjson.dumps(answer, option=orjson.OPT_SERIALIZE_NUMPY)
    gzipped = gzip.compress(body, compresslevel=6, mtime=0) if len(body) >= GZIP_MIN_BYTES else None
    return Encoded(body, gzipped, f'"{hashlib.sha256(body).hexdigest()[:32]}"')


def _not_modified(request: Request, etag: str) -> bool:
    given = request.headers.get("if-none-match")
    if not given:
        return False
    tags = {t.strip().removeprefix("W/") for t in given.split(",")}
    return etag in tags or "*" in tags


class Answers:
    """Encoded answers of one app, kept per store snapshot (thread-safe).

    Args:
        ctx: The app's state (its snapshot signature keys the answers).
        functions: The API functions by name (see :func:`.api.api_functions`).
    """

    def __init__(self, ctx: AppContext, functions: dict[str, Callable[..., dict]]) -> None:
        self.ctx = ctx
        self.functions = functions
        self._memo: OrderedDict[tuple, Encoded] = OrderedDict()
        self._signature = ctx.data.signature
        self._lock = threading.Lock()

    def get(self, key: tuple) -> Encoded | None:
        """The encoded answer kept under ``key`` for the current snapshot, if any."""
        with self._lock:
            if self._signature != self.ctx.data.signature:
                self._memo.clear()
                self._signature = self.ctx.data.signature
                return None
            found = self._memo.get(key)
            if found is not None:
                self._memo.move_to_end(key)
            return found

    def compute(self, key: tuple, route: Route, args: dict[str, Any]) -> Encoded:
        """Call ``route``'s function with ``args``, encode and keep its answer under ``key``."""
        signature = self.ctx.data.signature
        answer = self.functions[route.function](**args)
        encoded = encode(answer[route.pick] if route.pick else answer)
        with self._lock:
            if signature == self._signature == self.ctx.data.signature:
                self._memo[key] = encoded
                while len(self._memo) > MEMO_SIZE:
                    self._memo.popitem(last=False)
        return encoded


def _error(status: int, message: str) -> Response:
    return Response(
        orjson.dumps({"error": message}),
        status_code=status,
        media_type="application/json",
        headers={"Cache-Control": "no-store"},
    )


def _respond(request: Request, encoded: Encoded) -> Response:
    headers = {"ETag": encoded.etag, "Cache-Control": CACHE_CONTROL, "Vary": "Accept-Encoding"}
    if _not_modified(request, encoded.etag):
        return Response(status_code=304, headers=headers)
    body = encoded.body
    if encoded.gzipped is not None and "gzip" in request.headers.get("accept-encoding", ""):
        body, headers["Content-Encoding"] = encoded.gzipped, "gzip"
    return Response(body, media_type="application/json", headers=headers)


def _logged(request: Request) -> str:
    text = f"{request.url.path}?{request.url.query}"
    return text if len(text) <= LOGGED_CHARS else text[: LOGGED_CHARS - 1] + "…"


def _handler(route: Route, params: dict[str, Param], store: Answers):
    async def answer(request: Request) -> Response:
        query = request.scope.get("query_string", b"")
        path_value = request.path_params.get(route.path_param) if route.path_param else None
        key = (route.path, path_value, query)
        found = store.get(key)
        if found is not None:
            return _respond(request, found)
        try:
            if len(query) > MAX_QUERY_BYTES:
                raise refuse(f"the query is longer than {MAX_QUERY_BYTES} bytes")
            args = parse_query(params, request.query_params.multi_items())
            if route.path_param:
                args[route.path_param] = path_value
            missing = [p.name for p in params.values() if p.required and p.name not in args]
            if missing:
                raise refuse(f"{', '.join(missing)} is required")
            encoded = await run_in_threadpool(store.compute, key, route, args)
        except gr.Error as exc:  # the function's guard logged its refusal
            message = str(exc.message)
            LOG.info("GET %s refused: %s", _logged(request), message[:LOGGED_CHARS])
            return _error(400, message)
        return _respond(request, encoded)

    return answer


def _openapi_parameters(route: Route, params: dict[str, Param]) -> list[dict]:
    schemas = {
        "str": {"type": "string"},
        "int": {"type": "integer"},
        "float": {"type": "number"},
        "bool": {"type": "boolean"},
    }
    out = []
    for p in params.values():
        in_path = p.name == route.path_param
        if p.kind.startswith("list["):
            schema: dict = {"type": "array", "items": schemas[p.kind[5:-1]]}
        else:
            schema = dict(schemas[p.kind])
        if not p.required and p.default is not None:
            schema["default"] = list(p.default) if isinstance(p.default, tuple) else p.default
        item = {
            "name": p.name,
            "in": "path" if in_path else "query",
            "required": in_path or p.required,
            "schema": schema,
        }
        if p.kind.startswith("list[") and not in_path:
            item["style"], item["explode"] = "form", True
            item["description"] = "repeat the parameter, or separate values with commas"
        out.append(item)
    return out


RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "The answer (JSON); ETag and Cache-Control set"},
    304: {"description": "Not modified: the ETag given in If-None-Match is current"},
    400: {"description": 'A bad parameter: {"error": "one line naming it"}'},
}


def build_json_api(ctx: AppContext, functions: dict[str, Callable[..., dict]]) -> FastAPI:
    """The JSON API over the app's functions, as a FastAPI app served under :data:`PREFIX`.

    Args:
        ctx: The app's state.
        functions: From :func:`.api.api_functions` (the Gradio endpoints' own objects).
    """
    app = FastAPI(
        title="mlenergy leaderboard API",
        version=VERSION,
        description=(
            "Read-only JSON answers of the leaderboard: the same data the page shows and the "
            "Gradio endpoints return. Numbers carry their unit in the column name (J, s, W, "
            "ms); every energy figure says its source (`energy_source`). With no parameter, "
            "`/leaderboard` is the page's opening view."
        ),
        docs_url="/docs",
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    store = Answers(ctx, functions)
    served = []
    for route in ROUTES:
        fn = functions.get(route.function)
        if fn is None or route.function in GRADIO_ONLY:
            continue
        params = params_of(fn)
        app.add_api_route(
            route.path,
            _handler(route, params, store),
            methods=["GET"],
            summary=route.summary,
            description=inspect.getdoc(fn) or "",
            name=route.function + (f"_{route.pick}" if route.pick else ""),
            responses=RESPONSES,
            openapi_extra={"parameters": _openapi_parameters(route, params)},
        )
        served.append(PREFIX + route.path.replace(":path", ""))

    @app.get("/", summary="The routes of this API, and the store snapshot it answers from")
    async def index() -> dict:
        snap = ctx.data.memo(("api-snapshot",), lambda: catalog.snapshot(ctx))
        return {"version": VERSION, "routes": served, "docs": f"{PREFIX}/docs", "snapshot": snap}

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 404:
            return _error(404, f"no such route; routes: {', '.join(served)}")
        return _error(exc.status_code, str(exc.detail)[:LOGGED_CHARS])

    app.state.answers = store
    return app


class JsonApiMount:
    """ASGI middleware: requests under :data:`PREFIX` go to the JSON API, the rest to Gradio.

    Args:
        app: The app it wraps (Gradio's, or the next middleware).
        api: The JSON API (:func:`build_json_api`); ``None`` passes everything on.
    """

    def __init__(self, app: Callable, api: FastAPI | None = None) -> None:
        self.app = app
        self.api = api

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        """Route one request."""
        path = scope.get("path", "")
        if (
            self.api is not None
            and scope["type"] == "http"
            and (path == PREFIX or path.startswith(PREFIX + "/"))
        ):
            root = scope.get("root_path", "")
            child = {**scope, "app_root_path": scope.get("app_root_path", root)}
            child["root_path"] = root + PREFIX
            await self.api(child, receive, send)
            return
        await self.app(scope, receive, send)
