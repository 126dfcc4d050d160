"""The context a host passes with every tool call, and how it becomes a scope."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._errors import InvalidInput, MemoryportError, UsageError
from .._events import EventSink, MemoryEvent, deliver
from .._records import MemoryScope

__all__ = [
    "ScopeFrom",
    "ToolContext",
    "ToolError",
    "scope_from_context",
    "session_scope",
    "user_scope",
]


class ToolError(MemoryportError):
    """A tool call failed in a way the model should hear about, not the host loop.

    The dispatcher turns it into ``{"error": {"code": ..., "message": ...}}``.
    Messages never repeat a stored text or another user's data.

    Attributes:
        code: a short machine-readable reason: ``anonymous``, ``invalid_arguments``,
            ``unknown_tool``, ``refused``, ``not_approved``, ``invalid_input``,
            ``unavailable`` or ``hook_failed``.

    Example:
        >>> raise ToolError("anonymous", "no signed-in user")  # doctest: +SKIP
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def as_result(self) -> dict[str, Any]:
        """The JSON-serialisable result the model sees."""
        return {"error": {"code": self.code, "message": self.message}}


@dataclass
class ToolContext:
    """Who a tool call is for, set by the host, never by the model.

    Attributes:
        user_id: the signed-in end user the agent serves.
        session_id: the chat (conversation, thread) the call comes from; the
            memory's ``session_id``.
        agent_id: the agent, when several agents keep separate memories.
        principal: the host's own identity for the caller (an API key's owner,
            the user an MCP server was started for); the scope's user when
            ``user_id`` is not set.
        sink: where memory events go (a callable or an object with ``emit``).
            When ``None``, events still reach the memory's own ``sink``.
        usage: embedding usage summed from ``embedding.used`` events:
            ``{"embedding_calls": 2, "texts": 2, "tokens": 17}``.
        operations: how many events of each name passed through this context
            (``memory.added``, ``memory.searched``, ...).

    Example:
        >>> ctx = ToolContext(user_id="ann", session_id="chat-1")
        >>> scope_from_context(ctx)
        MemoryScope(user_id='ann', session_id='chat-1', agent_id=None)
    """

    user_id: str | None = None
    session_id: str | None = None
    agent_id: str | None = None
    principal: str | None = None
    sink: EventSink | None = None
    usage: Counter[str] = field(default_factory=Counter)
    operations: Counter[str] = field(default_factory=Counter)

    @property
    def capture_content(self) -> bool:
        """Whether texts may ride on events: only when the host's sink captures them too."""
        return bool(getattr(self.sink, "capture_content", False))

    def emit(self, event: MemoryEvent) -> None:
        """Count ``event`` and pass it on to :attr:`sink`.

        Example:
            >>> ctx = ToolContext(user_id="ann")
            >>> ctx.emit(MemoryEvent(name="embedding.used", backend="x", count=1, latency_ms=0.0,
            ...                      usage={"texts": 1, "tokens": 5}))
            >>> ctx.usage["tokens"]
            5
        """
        self.operations[event.name] += 1
        if event.name == "embedding.used":
            self.usage["embedding_calls"] += 1
            for key, value in event.usage.items():
                self.usage[key] += int(value)
        deliver(self.sink, event)


ScopeFrom = Callable[[ToolContext], MemoryScope]
"""Turns a :class:`ToolContext` into the scope a tool writes to (raise :class:`ToolError` to refuse)."""

_ANONYMOUS = (
    "no signed-in user: memory is only available to a signed-in user. "
    "Tell the user that you cannot remember anything in this conversation."
)


def _scope(**ids: str | None) -> MemoryScope:
    try:
        return MemoryScope(**ids)
    except InvalidInput as exc:
        # The host built the context; a bad id there is a host bug, not the model's.
        raise InvalidInput(f"ToolContext: {exc}", field=exc.field) from None


def _user(ctx: ToolContext) -> str:
    if not isinstance(ctx, ToolContext):
        raise UsageError(f"memory tools need a ToolContext, not {type(ctx).__name__}")
    user = ctx.user_id if ctx.user_id is not None else ctx.principal
    if user is None:
        raise ToolError("anonymous", _ANONYMOUS)
    return user


def scope_from_context(ctx: ToolContext) -> MemoryScope:
    """The default: the signed-in user (else the host's principal), with the session and agent when set.

    An anonymous context (neither ``user_id`` nor ``principal``) is refused with
    :class:`ToolError` code ``anonymous``. With ``across_sessions=True`` (the
    default of :func:`~memoryport.memory_tools`), recall and forget see all of
    the user's sessions; remember still records the session it came from.

    Example:
        >>> scope_from_context(ToolContext(principal="svc-ann"))
        MemoryScope(user_id='svc-ann', session_id=None, agent_id=None)
    """
    return _scope(user_id=_user(ctx), session_id=ctx.session_id, agent_id=ctx.agent_id)


def user_scope(ctx: ToolContext) -> MemoryScope:
    """Only the user (else the principal): for ``user_only`` backends such as Zep or Graphiti.

    :func:`~memoryport.memory_tools` picks it automatically when the memory is
    ``user_only``.

    Example:
        >>> user_scope(ToolContext(user_id="ann", session_id="chat-1"))
        MemoryScope(user_id='ann', session_id=None, agent_id=None)
    """
    return _scope(user_id=_user(ctx))


def session_scope(ctx: ToolContext) -> MemoryScope:
    """Memory that belongs to one session (chat) only; the explicit opt-in for anonymous chats.

    The scope is the session, plus the user (or principal) and agent when set.
    Recall and forget stay inside the session even with ``across_sessions=True``.
    A context without ``session_id`` is refused with :class:`ToolError`.

    Example:
        >>> session_scope(ToolContext(session_id="chat-9"))
        MemoryScope(user_id=None, session_id='chat-9', agent_id=None)
    """
    if not isinstance(ctx, ToolContext):
        raise UsageError(f"memory tools need a ToolContext, not {type(ctx).__name__}")
    if ctx.session_id is None:
        raise ToolError("anonymous", "no conversation: this memory belongs to a conversation and none is set.")
    user = ctx.user_id if ctx.user_id is not None else ctx.principal
    return _scope(user_id=user, session_id=ctx.session_id, agent_id=ctx.agent_id)


session_scope.keeps_session = True  # type: ignore[attr-defined]
