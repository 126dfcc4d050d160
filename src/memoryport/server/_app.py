"""The ASGI application: the JSON API, health probes, access logs and the dashboard.

(Over 500 lines: one handler per endpoint, each short, sharing the principal,
limit and error-mapping helpers defined here.)
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from .._errors import BackendError, InvalidInput, MemoryportError, MissingExtra, UnsupportedCapability, UsageError

try:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Match, Route
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - the server extra is in dev
    raise MissingExtra("server", package="starlette", feature="memoryport serve") from exc

from .. import __version__
from .._guard import GuardedMemory
from .._port import Capability
from .._records import MemoryRecord, MemoryScope, MemoryUpdate
from ..tools import MemoryTools, ToolContext, memory_tools
from ._keys import KeyStore, Principal
from ._limits import RateLimiter
from ._schema import (
    DayCount,
    ErasedResponse,
    EraseRequest,
    ForgetResponse,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    RememberRequest,
    RememberResponse,
    SearchHit,
    SearchRequest,
    SearchResponse,
    StatsResponse,
    ToolInfo,
    openapi_document,
)

__all__ = ["ApiError", "ServerState", "create_app"]

access_log = logging.getLogger("memoryport.server.access")
admin_log = logging.getLogger("memoryport.server.admin")
logger = logging.getLogger("memoryport.server")

ACT_FOR_HEADER = "x-memoryport-user"
THREAD_HEADER = "x-memoryport-thread"


class ApiError(Exception):
    """An HTTP error answer: ``{"error": {"code", "message", "field"}}`` with ``status``.

    Messages never repeat a stored or submitted text.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = dict(headers or {})

    def response(self) -> JSONResponse:
        detail: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field is not None:
            detail["field"] = self.field
        return JSONResponse({"error": detail}, status_code=self.status, headers=self.headers)


UNAUTHORIZED = "a valid API key is required (Authorization: Bearer mpk_...)"


@dataclass
class ServerState:
    """What every request shares: the memory, the keys, the tools and the limits."""

    memory: GuardedMemory
    keys: KeyStore
    tools: MemoryTools
    limiter: RateLimiter
    max_body_bytes: int
    close_on_shutdown: bool = True
    secure_cookies: bool = False
    draining: bool = False
    in_flight: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Caller:
    """The authenticated principal and the user it acts for in this request."""

    principal: Principal
    user_id: str

    def scope(self, session_id: str | None = None, agent_id: str | None = None) -> MemoryScope:
        try:
            return MemoryScope(user_id=self.user_id, session_id=session_id, agent_id=agent_id)
        except InvalidInput as exc:
            raise InvalidInput(str(exc).replace("scope.", "", 1), field=exc.field.removeprefix("scope.")) from None


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.memoryport
    return state


def route_of(app: Starlette, scope: Scope) -> str:
    """The route template a request matched (``/v1/memories/{memory_id}``), never the raw path."""
    for route in app.routes:
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return str(getattr(route, "path", "?"))
    return "(unmatched)"


def authorize(state: ServerState, principal: Principal | None, named: str | None, *, method: str, route: str) -> Caller:
    """Rate-limit ``principal`` and decide whose memory the request touches.

    An ordinary key always acts for its own user; naming another is refused
    (403). An admin key must name the user, and the action is logged without content.
    """
    if principal is None:
        raise ApiError(401, "unauthorized", UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})
    wait = state.limiter.take(principal.key_id, principal.rate_per_minute)
    if wait > 0:
        raise ApiError(
            429,
            "rate_limited",
            "too many requests for this key; retry after the number of seconds in Retry-After",
            headers={"Retry-After": RateLimiter.retry_after(wait)},
        )
    if not principal.admin:
        assert principal.user_id is not None
        if named is not None and named != principal.user_id:
            raise ApiError(403, "forbidden", "this key acts only for its own user; only an admin key may name a user")
        return Caller(principal, principal.user_id)
    if named is None or not named:
        raise ApiError(
            422,
            "invalid_input",
            "an admin key must name the user to act for (X-Memoryport-User header)",
            field="X-Memoryport-User",
        )
    try:
        MemoryScope(user_id=named)
        state.memory.limits.check_scope(MemoryScope(user_id=named))
    except InvalidInput as exc:
        raise ApiError(
            422, "invalid_input", "X-Memoryport-User is not a valid user id", field="X-Memoryport-User"
        ) from (exc)
    admin_log.info(
        json.dumps(
            {"event": "admin_action", "key_id": principal.key_id, "user": named, "method": method, "route": route}
        )
    )
    return Caller(principal, named)


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


async def caller(request: Request) -> Caller:
    """Authenticate the API request (bearer key), rate-limit it and resolve the user."""
    state = _state(request)
    principal = state.keys.authenticate(_bearer(request))
    if principal is not None:
        request.state.key_id = principal.key_id
    return authorize(
        state,
        principal,
        request.headers.get(ACT_FOR_HEADER),
        method=request.method,
        route=route_of(request.app, request.scope),
    )


async def read_body(request: Request) -> bytes:
    """The request body, refused with 413 past the server's limit (declared or streamed)."""
    limit = _state(request).max_body_bytes
    declared = request.headers.get("content-length")
    too_large = ApiError(413, "too_large", f"the body is larger than this server's limit of {limit:,} bytes")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


async def read_model(request: Request, model: type[Any], *, empty_ok: bool = False) -> Any:
    """The body parsed as ``model``; 422 naming the field otherwise (never echoing the input)."""
    body = await read_body(request)
    if not body.strip():
        if not empty_ok:
            raise ApiError(422, "invalid_input", "the body must be a JSON object", field="body")
        data: Any = {}
    else:
        try:
            data = json.loads(body)
        except ValueError:
            raise ApiError(422, "invalid_input", "the body is not valid JSON", field="body") from None
    if not isinstance(data, dict):
        raise ApiError(422, "invalid_input", "the body must be a JSON object", field="body")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False, include_input=False, include_context=False)[0]
        loc = ".".join(str(p) for p in err["loc"]) or "body"
        msg = (
            "unknown field (whose memory it is comes from the API key)"
            if err["type"] == "extra_forbidden"
            else err["msg"]
        )
        raise ApiError(422, "invalid_input", f"{loc}: {msg}", field=loc) from None


def _json(model: BaseModel, status: int = 200) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json"), status_code=status)


def _query_one(request: Request, name: str) -> str | None:
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise ApiError(422, "invalid_input", f"{name} may be given once", field=name)
    return values[0] if values else None


def _query_int(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = _query_one(request, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(422, "invalid_input", f"{name} must be an integer", field=name) from None
    if not low <= value <= high:
        raise ApiError(422, "invalid_input", f"{name} must be from {low} to {high}", field=name)
    return value


def _scope_from_query(request: Request, who: Caller) -> MemoryScope:
    return who.scope(_query_one(request, "session_id"), _query_one(request, "agent_id"))


def _memory_id(request: Request) -> str:
    raw = request.path_params["memory_id"]
    try:
        return _state(request).memory.limits.check_id(raw, "memory_id")
    except InvalidInput as exc:
        raise ApiError(422, "invalid_input", str(exc), field="memory_id") from None


def scalar_text(value: Any) -> str:
    """A metadata value as it is written in a ``key=value`` filter (``true``, ``3``, ``null``, ``fact``)."""
    return value if isinstance(value, str) else json.dumps(value)


def parse_meta(pairs: list[str], kind: str | None) -> dict[str, str]:
    """``key=value`` query filters (and ``kind``) as a mapping of key to written value."""
    wanted: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ApiError(422, "invalid_input", "meta filters are written key=value", field="meta")
        wanted[key] = value
    if kind is not None:
        wanted["kind"] = kind
    return wanted


async def select(state: ServerState, scope: MemoryScope, request: Request) -> list[MemoryRecord]:
    """The scope's memories narrowed by the request's ``since``/``until`` (the guard parses them),
    ``kind`` and ``meta``, newest first."""
    wanted = parse_meta(request.query_params.getlist("meta"), _query_one(request, "kind"))
    since, until = _query_one(request, "since"), _query_one(request, "until")
    records = await state.memory.export(scope, since=since or None, until=until or None)
    out = [r for r in records if all(k in r.metadata and scalar_text(r.metadata[k]) == v for k, v in wanted.items())]
    out.sort(key=lambda r: (r.created_at, r.id or ""), reverse=True)
    return out


# -- the API ----------------------------------------------------------------


async def remember(request: Request) -> Response:
    who = await caller(request)
    body: RememberRequest = await read_model(request, RememberRequest)
    records: list[MemoryRecord] = []
    for i, item in enumerate(body.memories):
        try:
            scope = who.scope(item.session_id, item.agent_id)
            records.append(
                MemoryRecord(scope=scope, text=item.text, metadata=item.metadata, expires_at=item.expires_at)
            )
        except InvalidInput as exc:
            name = f"memories.{i}.{exc.field.removeprefix('record.')}"
            message = str(exc).replace(exc.field, name, 1)
            raise ApiError(422, "invalid_input", message, field=name) from None
    ids = await _state(request).memory.add(records)
    return _json(RememberResponse(ids=ids))


async def search(request: Request) -> Response:
    who = await caller(request)
    body: SearchRequest = await read_model(request, SearchRequest, empty_ok=True)
    scope = who.scope(body.session_id, body.agent_id)
    results = await _state(request).memory.search(
        body.query, scope=scope, k=body.k, filters=body.filters, since=body.since, until=body.until
    )
    mode = str(getattr(results, "mode", None) or "backend")
    return _json(SearchResponse(hits=[SearchHit.of_hit(h) for h in results], mode=mode))


async def list_memories(request: Request) -> Response:
    who = await caller(request)
    scope = _scope_from_query(request, who)
    offset = _query_int(request, "offset", 0, 0, 10**9)
    limit = _query_int(request, "limit", 50, 1, 1000)
    records = await select(_state(request), scope, request)
    page = records[offset : offset + limit]
    return _json(MemoryPage(memories=[MemoryOut.of(r) for r in page], total=len(records), offset=offset, limit=limit))


_LIST_QUERY = ("session_id", "agent_id", "offset", "limit", "kind", "meta", "since", "until")

NOT_FOUND = "no memory with this id for this user"


async def get_memory(request: Request) -> Response:
    who = await caller(request)
    record = await _state(request).memory.get(_memory_id(request), scope=who.scope())
    if record is None:
        raise ApiError(404, "not_found", NOT_FOUND)
    return _json(MemoryOut.of(record))


async def update(request: Request) -> Response:
    who = await caller(request)
    memory = _state(request).memory
    memory_id = _memory_id(request)
    body: MemoryPatch = await read_model(request, MemoryPatch)
    given = {name: getattr(body, name) for name in body.model_fields_set}
    try:
        change = MemoryUpdate(id=memory_id, **given)
    except InvalidInput as exc:
        name = exc.field.split(".", 1)[1] if "." in exc.field else "body"
        raise ApiError(422, "invalid_input", str(exc).replace(exc.field, name, 1), field=name) from None
    scope = who.scope()
    if not await memory.update([change], scope=scope):
        raise ApiError(404, "not_found", NOT_FOUND)
    record = await memory.get(memory_id, scope=scope) if Capability.GET in memory.capabilities else None
    if record is None:
        raise ApiError(404, "not_found", NOT_FOUND)
    return _json(MemoryOut.of(record))


async def forget(request: Request) -> Response:
    who = await caller(request)
    memory = _state(request).memory
    memory_id = _memory_id(request)
    scope = who.scope()
    # Vet the id through the guard's scope filter first; another user's record is never touched.
    if Capability.GET in memory.capabilities and await memory.get(memory_id, scope=scope) is None:
        raise ApiError(404, "not_found", NOT_FOUND)
    if await memory.delete([memory_id], scope=scope) == 0:
        raise ApiError(404, "not_found", NOT_FOUND)
    return _json(ForgetResponse(id=memory_id, deleted=True))


async def export(request: Request) -> Response:
    who = await caller(request)
    records = await _state(request).memory.export(_scope_from_query(request, who))

    async def lines() -> AsyncIterator[bytes]:
        for record in records:
            yield (MemoryOut.of(record).model_dump_json() + "\n").encode("utf-8")

    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": 'attachment; filename="memoryport-export.jsonl"'},
    )


async def erase(request: Request) -> Response:
    who = await caller(request)
    body: EraseRequest = await read_model(request, EraseRequest, empty_ok=True)
    memory = _state(request).memory
    scope = who.scope()
    if body.dry_run:
        return _json(ErasedResponse(deleted=len(await memory.export(scope)), dry_run=True))
    if not body.confirm:
        raise ApiError(
            422,
            "invalid_input",
            "erasing every memory of the user needs confirm=true (or dry_run=true)",
            field="confirm",
        )
    return _json(ErasedResponse(deleted=await memory.delete(scope=scope), dry_run=False))


def compute_stats(state: ServerState, user_id: str, records: list[MemoryRecord]) -> StatsResponse:
    """Counts of ``records`` by kind and by UTC day."""
    kinds: Counter[str] = Counter(scalar_text(r.metadata["kind"]) if "kind" in r.metadata else "" for r in records)
    days: Counter[str] = Counter(r.created_at.date().isoformat() for r in records)
    return StatsResponse(
        user_id=user_id,
        total=len(records),
        by_kind=dict(sorted(kinds.items())),
        by_day=[DayCount(day=d, count=n) for d, n in sorted(days.items())],
        backend=state.memory.backend,
        capabilities=sorted(str(c) for c in state.memory.capabilities),
    )


async def stats(request: Request) -> Response:
    who = await caller(request)
    state = _state(request)
    return _json(compute_stats(state, who.user_id, await state.memory.export(who.scope())))


async def list_tools(request: Request) -> Response:
    await caller(request)
    tools = _state(request).tools
    infos = [ToolInfo(name=t.name, description=t.description, parameters=t.parameters, effect=t.effect) for t in tools]
    return JSONResponse([i.model_dump(mode="json") for i in infos])


async def call_tool(request: Request) -> Response:
    who = await caller(request)
    thread = request.headers.get(THREAD_HEADER)
    if thread is not None:
        try:
            MemoryScope(user_id=who.user_id, session_id=thread)
        except InvalidInput:
            raise ApiError(
                422, "invalid_input", "X-Memoryport-Thread is not a valid thread id", field="X-Memoryport-Thread"
            ) from None
    body = await read_body(request)
    context = ToolContext(user_id=who.user_id, session_id=thread)
    result = await _state(request).tools.dispatch(request.path_params["tool"], body, context)
    return JSONResponse(result)


async def openapi(request: Request) -> Response:
    return JSONResponse(openapi_document(version=__version__, tools=_state(request).tools.names))


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    state = _state(request)
    if state.draining:
        return JSONResponse({"status": "draining"}, status_code=503)
    try:
        probe = MemoryScope(user_id="memoryport-readyz")
        if Capability.GET in state.memory.capabilities:
            await state.memory.get("readyz", scope=probe)
        else:
            await state.memory.search("", scope=probe, k=1)
    except MemoryportError as exc:
        logger.warning("readyz: memory not ready (%s)", type(exc).__name__)
        return JSONResponse({"status": "unavailable"}, status_code=503)
    return JSONResponse({"status": "ready"})


# -- errors, logs, spans ------------------------------------------------------


def error_response(exc: BaseException) -> Response:
    """The JSON error answer for ``exc`` (content-free; unknown failures are a bare 500)."""
    if isinstance(exc, ApiError):
        return exc.response()
    if isinstance(exc, InvalidInput):
        name = exc.field.removeprefix("scope.")
        if name.startswith("records"):
            name = "memories" + name[len("records") :]
        elif name.startswith("changes[0]."):
            name = name[len("changes[0].") :]
        name = re.sub(r"\[(\d+)\]", r".\1", name)
        name = re.sub(r"\['([^']*)'\]", r".\1", name)
        if name == "changes.0":  # one PATCH is a batch of one: the whole body is at fault
            name = "body"
        return ApiError(422, "invalid_input", str(exc).replace(exc.field, name), field=name).response()
    if isinstance(exc, UnsupportedCapability):
        return ApiError(400, "unsupported", f"the {exc.backend!r} backend does not support {exc.capability}").response()
    if isinstance(exc, UsageError):
        return ApiError(400, "bad_request", str(exc)).response()
    if isinstance(exc, BackendError):
        logger.warning("backend %r failed in %s (%s)", exc.backend, exc.operation, type(exc.__cause__ or exc).__name__)
        return ApiError(503, "unavailable", "memory is unavailable right now; try again later").response()
    logger.error("internal error: %s", type(exc).__name__)
    return ApiError(500, "internal", "internal error").response()


def _handled(
    endpoint: Callable[[Request], Awaitable[Response]], query: tuple[str, ...] = ()
) -> Callable[[Request], Awaitable[Response]]:
    """``endpoint`` with its errors as JSON answers and unknown query parameters refused.

    Refusing (not ignoring) ``?user_id=ben`` makes plain that no query names whose memory it is.
    """
    allowed = frozenset(query)

    async def wrapped(request: Request) -> Response:
        try:
            unknown = sorted(set(request.query_params.keys()) - allowed)
            if unknown:
                await caller(request)  # 401 before anything else
                raise ApiError(
                    422,
                    "invalid_input",
                    f"unknown query parameter (this endpoint takes {', '.join(sorted(allowed)) or 'none'})",
                    field=unknown[0][:64],
                )
            return await endpoint(request)
        except Exception as exc:
            return error_response(exc)

    wrapped.__name__ = endpoint.__name__
    return wrapped


class AccessLog:
    """Pure ASGI middleware: one JSON log line per request and an OpenTelemetry server span.

    The line has the method, the route template, the status, the duration and
    the key id: never the raw path, the query string or a body.
    """

    def __init__(self, app: ASGIApp, starlette: Starlette) -> None:
        self.app = app
        self.starlette = starlette

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from opentelemetry import trace

        from .._events import get_telemetry

        route = route_of(self.starlette, scope)
        method = str(scope.get("method", ""))
        status = 500
        start = time.perf_counter()
        state: ServerState = self.starlette.state.memoryport
        state.in_flight += 1
        # The guard's own tracer, so its spans (memory.add, ...) are children of this one.
        tracer = get_telemetry().tracer

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        with tracer.start_as_current_span(
            f"{method} {route}",
            kind=trace.SpanKind.SERVER,
            attributes={"http.request.method": method, "http.route": route},
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                await self.app(scope, receive, send_wrapper)
            finally:
                state.in_flight -= 1
                span.set_attribute("http.response.status_code", status)
                key_id = scope.get("state", {}).get("key_id")
                access_log.info(
                    json.dumps(
                        {
                            "method": method,
                            "route": route,
                            "status": status,
                            "ms": round((time.perf_counter() - start) * 1000, 2),
                            "key_id": key_id,
                        }
                    )
                )


def create_app(
    memory: GuardedMemory,
    keys: KeyStore,
    *,
    rate_per_minute: int = 600,
    max_body_bytes: int = 1_048_576,
    tools: MemoryTools | None = None,
    close_on_shutdown: bool = True,
    secure_cookies: bool = False,
    dashboard: bool = True,
) -> Starlette:
    """The ASGI app serving ``memory`` to the holders of ``keys``: the API, the probes and the dashboard.

    Args:
        memory: what is served (any :class:`~memoryport.GuardedMemory`).
        keys: who may call; each key's principal decides whose memory a request touches.
        rate_per_minute: each key's request budget (a key may carry its own).
        max_body_bytes: larger bodies get 413.
        tools: the tools behind ``/v1/tools`` (default ``memory_tools(memory)``).
        close_on_shutdown: close ``memory`` and ``keys`` when the server stops.
        secure_cookies: mark the dashboard's cookie ``Secure`` (behind a TLS proxy).
        dashboard: serve the dashboard under ``/ui``.

    Example:
        >>> app = create_app(SQLiteMemory("memory.db"), KeyStore("keys.db"))  # doctest: +SKIP
        >>> uvicorn.run(app, host="127.0.0.1", port=8787)                      # doctest: +SKIP
    """
    if not isinstance(memory, GuardedMemory):
        raise UsageError(f"create_app() takes a GuardedMemory, not {type(memory).__name__}")
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1024:
        raise InvalidInput("max_body_bytes must be an integer of at least 1024", field="max_body_bytes")
    state = ServerState(
        memory=memory,
        keys=keys,
        tools=tools if tools is not None else memory_tools(memory),
        limiter=RateLimiter(rate_per_minute),
        max_body_bytes=max_body_bytes,
        close_on_shutdown=close_on_shutdown,
        secure_cookies=secure_cookies,
    )
    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/v1/memories", _handled(remember), methods=["POST"]),
        Route("/v1/memories", _handled(list_memories, _LIST_QUERY), methods=["GET"]),
        Route("/v1/memories/{memory_id}", _handled(get_memory), methods=["GET"]),
        Route("/v1/memories/{memory_id}", _handled(update), methods=["PATCH"]),
        Route("/v1/memories/{memory_id}", _handled(forget), methods=["DELETE"]),
        Route("/v1/search", _handled(search), methods=["POST"]),
        Route("/v1/export", _handled(export, ("session_id", "agent_id")), methods=["GET"]),
        Route("/v1/erase", _handled(erase), methods=["POST"]),
        Route("/v1/stats", _handled(stats), methods=["GET"]),
        Route("/v1/tools", _handled(list_tools), methods=["GET"]),
        Route("/v1/tools/{tool}", _handled(call_tool), methods=["POST"]),
    ]
    if dashboard:
        from ._dashboard import dashboard_routes

        routes.extend(dashboard_routes())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        # uvicorn has stopped accepting and waited for in-flight requests before this runs.
        state.draining = True
        if state.close_on_shutdown:
            await memory.aclose()
            keys.close()

    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.memoryport = state
    app.add_middleware(AccessLog, starlette=app)
    return app
