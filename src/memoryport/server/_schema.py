"""The HTTP API's bodies as pydantic models, and the OpenAPI document built from them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import models_json_schema

from .._records import MemoryHit, MemoryRecord

__all__ = [
    "DayCount",
    "ErasedResponse",
    "EraseRequest",
    "ErrorResponse",
    "ForgetResponse",
    "MemoryOut",
    "MemoryPage",
    "MemoryPatch",
    "NewMemory",
    "RememberRequest",
    "RememberResponse",
    "SearchHit",
    "SearchRequest",
    "SearchResponse",
    "StatsResponse",
    "ToolInfo",
    "openapi_document",
]

Scalar = Union[str, int, float, bool, None]


class _In(BaseModel):
    # Unknown fields are refused (422 naming them): a body never names whose memory it is.
    model_config = ConfigDict(extra="forbid")


class NewMemory(_In):
    """One memory to store for the calling user."""

    text: str = Field(description="The memory's text.")
    metadata: dict[str, Scalar] = Field(default_factory=dict, description="Flat metadata, e.g. {'kind': 'fact'}.")
    session_id: str | None = Field(default=None, description="The chat (session) it came from, within the user.")
    agent_id: str | None = Field(default=None, description="The agent it belongs to, within the user.")
    expires_at: datetime | None = Field(default=None, description="When it expires (timezone-aware ISO 8601).")


class RememberRequest(_In):
    """Memories to store, as one all-or-nothing batch."""

    memories: list[NewMemory] = Field(min_length=1, description="The memories, stored in order.")


class RememberResponse(BaseModel):
    ids: list[str] = Field(description="The new memories' ids, in the order given.")


class SearchRequest(_In):
    """A search in the calling user's memory."""

    query: str = Field(default="", description="What to look for; an empty query lists the newest memories.")
    k: int = Field(default=5, description="How many hits at most.")
    filters: dict[str, Any] | None = Field(
        default=None,
        description="Metadata conditions: {'kind': 'fact'} or operators {'importance': {'$gte': 0.5}}.",
    )
    since: str | None = Field(default=None, description="Created at or after: ISO 8601 or an age (90m, 24h, 7d, 2w).")
    until: str | None = Field(default=None, description="Created before: ISO 8601 or an age (90m, 24h, 7d, 2w).")
    session_id: str | None = Field(default=None, description="Only this session of the user.")
    agent_id: str | None = Field(default=None, description="Only this agent of the user.")


class MemoryOut(BaseModel):
    id: str
    text: str
    metadata: dict[str, Scalar]
    session_id: str | None
    agent_id: str | None
    created_at: datetime
    expires_at: datetime | None
    updated_at: datetime | None = Field(default=None, description="The last update; null if never updated.")

    @classmethod
    def of(cls, record: MemoryRecord) -> MemoryOut:
        assert record.id is not None
        return cls(
            id=record.id,
            text=record.text,
            metadata=dict(record.metadata),
            session_id=record.scope.session_id,
            agent_id=record.scope.agent_id,
            created_at=record.created_at,
            expires_at=record.expires_at,
            updated_at=record.updated_at,
        )


class SearchHit(MemoryOut):
    score: float = Field(description="Higher is better.")
    signal: str = Field(description="What produced the score: keyword, vector, hybrid, recent or backend.")

    @classmethod
    def of_hit(cls, hit: MemoryHit) -> SearchHit:
        base = MemoryOut.of(hit.record).model_dump()
        return cls(**base, score=float(hit.score), signal=str(hit.signal))


class SearchResponse(BaseModel):
    hits: list[SearchHit]
    mode: str = Field(description="keyword, vector, hybrid, recent or backend.")


class MemoryPage(BaseModel):
    memories: list[MemoryOut] = Field(description="Newest first.")
    total: int = Field(description="How many memories match the filters in all.")
    offset: int
    limit: int


class MemoryPatch(_In):
    """Change one memory: only the fields given change; ``metadata`` replaces the mapping."""

    text: str | None = Field(default=None, description="The new text.")
    metadata: dict[str, Scalar] | None = Field(default=None, description="The new metadata (replaces it whole).")
    expires_at: datetime | None = Field(default=None, description="The new expiry; null clears it.")


class ForgetResponse(BaseModel):
    id: str
    deleted: bool


class EraseRequest(_In):
    """Erase every memory of the user; ``dry_run`` only counts them."""

    dry_run: bool = Field(default=False, description="Only count what would be erased.")
    confirm: bool = Field(default=False, description="Must be true to erase (ignored for a dry run).")


class ErasedResponse(BaseModel):
    deleted: int = Field(description="How many memories went (or would go, for a dry run).")
    dry_run: bool


class DayCount(BaseModel):
    day: str = Field(description="A UTC date, YYYY-MM-DD.")
    count: int


class StatsResponse(BaseModel):
    user_id: str
    total: int
    by_kind: dict[str, int] = Field(description="Memories per metadata 'kind' ('' for none).")
    by_day: list[DayCount] = Field(description="Memories created per UTC day, oldest first.")
    backend: str
    capabilities: list[str]


class ToolInfo(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]
    effect: Literal["additive", "read_only", "destructive"]


class ErrorDetail(BaseModel):
    code: str = Field(description="unauthorized, forbidden, not_found, invalid_input, too_large, rate_limited, ...")
    message: str = Field(description="What went wrong; never repeats stored or submitted texts.")
    field: str | None = Field(default=None, description="The field at fault, for invalid_input.")


class ErrorResponse(BaseModel):
    error: ErrorDetail


_MODELS: list[type[BaseModel]] = [
    NewMemory,
    RememberRequest,
    RememberResponse,
    SearchRequest,
    SearchResponse,
    SearchHit,
    MemoryOut,
    MemoryPage,
    MemoryPatch,
    ForgetResponse,
    EraseRequest,
    ErasedResponse,
    StatsResponse,
    ToolInfo,
    ErrorResponse,
]


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(model: type[BaseModel], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _error(description: str) -> dict[str, Any]:
    return _json(ErrorResponse, description)


_ACT_FOR = {
    "name": "X-Memoryport-User",
    "in": "header",
    "required": False,
    "description": "Admin keys only: the user to act for. An ordinary key sending it gets 403.",
    "schema": {"type": "string"},
}
_SCOPE_QUERY = [
    {"name": "session_id", "in": "query", "required": False, "schema": {"type": "string"}},
    {"name": "agent_id", "in": "query", "required": False, "schema": {"type": "string"}},
]
_MEMORY_ID = {"name": "memory_id", "in": "path", "required": True, "schema": {"type": "string"}}
_COMMON_ERRORS = {
    "400": _error("The backend cannot do this (code unsupported), e.g. update on a store without it."),
    "401": _error("Missing, unknown or revoked key (one answer for all three)."),
    "403": _error("An ordinary key named another user."),
    "413": _error("The body is larger than the server's limit."),
    "422": _error("Invalid input; `field` names it."),
    "429": _error("Too many requests for this key; see Retry-After."),
}


def _op(summary: str, ok: dict[str, Any], *, body: type[BaseModel] | None = None, params: list[Any] = ()) -> Any:  # type: ignore[assignment]
    op: dict[str, Any] = {
        "summary": summary,
        "parameters": [_ACT_FOR, *params],
        "responses": {**ok, **_COMMON_ERRORS},
        "security": [{"apiKey": []}],
    }
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": _ref(body)}}}
    return op


def openapi_document(*, version: str, tools: list[str]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the HTTP API (served at ``/openapi.json``).

    Example:
        >>> openapi_document(version="0.1.0", tools=["recall"])["openapi"]
        '3.1.0'
    """
    _, top = models_json_schema(
        [(m, "validation" if issubclass(m, _In) else "serialization") for m in _MODELS],
        ref_template="#/components/schemas/{model}",
    )
    schemas = top.get("$defs", {})
    list_params = [
        *_SCOPE_QUERY,
        {"name": "offset", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 0}},
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "schema": {"type": "integer", "minimum": 1, "maximum": 1000},
        },
        {"name": "kind", "in": "query", "required": False, "schema": {"type": "string"}},
        {
            "name": "meta",
            "in": "query",
            "required": False,
            "description": "Metadata filters as key=value, repeatable.",
            "schema": {"type": "array", "items": {"type": "string"}},
            "style": "form",
            "explode": True,
        },
        {
            "name": "since",
            "in": "query",
            "required": False,
            "description": "Created at or after: ISO 8601 or an age such as 90m, 24h, 7d, 2w.",
            "schema": {"type": "string"},
        },
        {
            "name": "until",
            "in": "query",
            "required": False,
            "description": "Created before: ISO 8601 or an age such as 90m, 24h, 7d, 2w.",
            "schema": {"type": "string"},
        },
    ]
    tool_name = {"name": "tool", "in": "path", "required": True, "schema": {"type": "string", "enum": tools}}
    thread = {
        "name": "X-Memoryport-Thread",
        "in": "header",
        "required": False,
        "description": "The chat the call comes from (the ToolContext's session_id).",
        "schema": {"type": "string"},
    }
    paths: dict[str, Any] = {
        "/v1/memories": {
            "post": _op(
                "Remember: store memories for the calling user",
                {"200": _json(RememberResponse, "Stored.")},
                body=RememberRequest,
            ),
            "get": _op(
                "List the calling user's memories, newest first",
                {"200": _json(MemoryPage, "A page.")},
                params=list_params,
            ),
        },
        "/v1/memories/{memory_id}": {
            "get": _op(
                "One memory",
                {"200": _json(MemoryOut, "The memory."), "404": _error("No such memory for this user.")},
                params=[_MEMORY_ID],
            ),
            "patch": _op(
                "Update one memory (text, metadata, expiry); needs a backend with the update capability",
                {"200": _json(MemoryOut, "The memory as updated."), "404": _error("No such memory for this user.")},
                body=MemoryPatch,
                params=[_MEMORY_ID],
            ),
            "delete": _op(
                "Forget one memory",
                {"200": _json(ForgetResponse, "Deleted."), "404": _error("No such memory for this user.")},
                params=[_MEMORY_ID],
            ),
        },
        "/v1/search": {
            "post": _op(
                "Recall: search the calling user's memory",
                {"200": _json(SearchResponse, "Hits, best first.")},
                body=SearchRequest,
            ),
        },
        "/v1/export": {
            "get": {
                **_op("Export every memory of the user as JSON lines, oldest first", {}, params=_SCOPE_QUERY),
                "responses": {
                    "200": {
                        "description": "One MemoryOut object per line.",
                        "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
                    },
                    **_COMMON_ERRORS,
                },
            }
        },
        "/v1/erase": {
            "post": _op(
                "Erase every memory of the user (dry_run counts first)",
                {"200": _json(ErasedResponse, "Erased or counted.")},
                body=EraseRequest,
            ),
        },
        "/v1/stats": {"get": _op("Counts by kind and by day", {"200": _json(StatsResponse, "Stats.")})},
        "/v1/tools": {
            "get": {
                **_op("The memory tools (name, description, JSON schema, effect)", {}),
                "responses": {
                    "200": {
                        "description": "The tools.",
                        "content": {"application/json": {"schema": {"type": "array", "items": _ref(ToolInfo)}}},
                    },
                    **_COMMON_ERRORS,
                },
            }
        },
        "/v1/tools/{tool}": {
            "post": {
                **_op("Run a tool call: the body is the tool's JSON arguments", {}, params=[tool_name, thread]),
                "requestBody": {
                    "required": False,
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                "responses": {
                    "200": {
                        "description": "Exactly what MemoryTools.dispatch returns (failures: {error: {...}}).",
                        "content": {"application/json": {"schema": {"type": "object"}}},
                    },
                    **_COMMON_ERRORS,
                },
            }
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "memoryport",
            "version": version,
            "description": "Long-term memory for AI agents over HTTP. The API key decides whose memory it is.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer", "description": "An API key: mpk_..."}},
        },
    }
