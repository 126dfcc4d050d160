"""Shared by the tool integrations: the memory tools they wrap and how a framework's context becomes a ToolContext."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._errors import UsageError
from .._guard import GuardedMemory
from ..tools import MemoryTools, ToolContext, memory_tools

__all__ = ["ContextFrom", "as_tools", "context_from_value"]

ContextFrom = Callable[[Any], ToolContext]
"""Turns a framework's run context value (deps, context, config) into the :class:`~memoryport.ToolContext`."""

# The chat's id: ``session_id``, or ``thread_id`` as frameworks such as LangGraph call it.
_SESSION_KEYS = ("session_id", "thread_id")


def as_tools(tools: MemoryTools | GuardedMemory) -> MemoryTools:
    """``tools`` as they are, or the default :func:`~memoryport.memory_tools` over a memory."""
    if isinstance(tools, MemoryTools):
        return tools
    if isinstance(tools, GuardedMemory):
        return memory_tools(tools)
    raise UsageError(
        f"expected memory_tools(memory) or a GuardedMemory such as SQLiteMemory(path), not {type(tools).__name__}"
    )


def _field(source: Any, name: str) -> Any:
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def context_from_value(value: Any) -> ToolContext:
    """The default: a :class:`~memoryport.ToolContext` as is, or one read off the value's ids.

    ``value`` may be a ``ToolContext`` (used as is, so its usage counters add
    up), ``None`` (anonymous: the tools refuse, unless the host chose
    ``session_scope``), or any object or mapping with ``user_id`` and optionally
    ``session_id`` (or ``thread_id``), ``agent_id`` and ``principal``.
    Other types are a host mistake and raise :class:`~memoryport.UsageError`.

    Example:
        >>> context_from_value({"user_id": "ann", "session_id": "chat-1"}).user_id
        'ann'
    """
    if isinstance(value, ToolContext):
        return value
    if value is None:
        return ToolContext()
    ids = {name: _field(value, name) for name in ("user_id", "agent_id", "principal")}
    session = next((s for key in _SESSION_KEYS if (s := _field(value, key)) is not None), None)
    if all(v is None for v in ids.values()) and session is None:
        raise UsageError(
            f"cannot tell whose memory this is from a {type(value).__name__}: give it user_id (and optionally "
            "session_id, agent_id), pass a ToolContext, or pass context=<function returning a ToolContext>"
        )
    for name, v in [*ids.items(), ("session_id", session)]:
        if v is not None and not isinstance(v, str):
            raise UsageError(f"{name} in the run context must be a string, not {type(v).__name__}")
    return ToolContext(user_id=ids["user_id"], session_id=session, agent_id=ids["agent_id"], principal=ids["principal"])
