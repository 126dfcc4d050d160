"""Memory as tools for a model: ``remember``, ``recall`` and ``forget``.

The host builds the tools once with :func:`memory_tools` and passes a
:class:`ToolContext` (who the call is for) with every call. The scope always
comes from that context, never from the model's arguments. The tools export to
OpenAI and Anthropic tool definitions, run through one dispatcher, and serve
over MCP::

    from memoryport import SQLiteMemory, ToolContext, memory_tools

    tools = memory_tools(SQLiteMemory("memory.db"))
    ctx = ToolContext(user_id="ann", thread_id="chat-1")
    result = await tools.dispatch("remember", '{"text": "Ann likes green tea"}', ctx)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._context import ScopeFrom, ToolContext, ToolError, scope_from_context, thread_scope, user_scope
from ._graph_tools import graph_tools
from ._pii import PIIKind, PIIMatch, find_pii, pii_check, redact_pii
from ._tools import (
    RECALL_NOTE,
    Approve,
    Effect,
    MemoryTool,
    MemoryTools,
    PendingWrite,
    ReadFilter,
    WriteCheck,
    memory_tools,
)

if TYPE_CHECKING:
    from ._mcp import mcp_server, serve_stdio

__all__ = [
    "RECALL_NOTE",
    "Approve",
    "Effect",
    "MemoryTool",
    "MemoryTools",
    "PIIKind",
    "PIIMatch",
    "PendingWrite",
    "ReadFilter",
    "ScopeFrom",
    "ToolContext",
    "ToolError",
    "WriteCheck",
    "anthropic_tools",
    "dispatch_tool_call",
    "find_pii",
    "graph_tools",
    "mcp_server",
    "memory_tools",
    "openai_tools",
    "pii_check",
    "redact_pii",
    "scope_from_context",
    "serve_stdio",
    "thread_scope",
    "user_scope",
]


def openai_tools(tools: MemoryTools, *, api: str = "chat", strict: bool = True) -> list[dict[str, Any]]:
    """``tools`` as OpenAI function tools (``api="chat"`` or ``"responses"``); same as ``tools.openai()``.

    Example:
        >>> openai_tools(memory_tools(memory))[0]["function"]["name"]     # doctest: +SKIP
        'remember'
    """
    return tools.openai(api=api, strict=strict)  # type: ignore[arg-type]


def anthropic_tools(tools: MemoryTools) -> list[dict[str, Any]]:
    """``tools`` as Anthropic tool definitions; same as ``tools.anthropic()``.

    Example:
        >>> anthropic_tools(memory_tools(memory))[0]["input_schema"]["type"]  # doctest: +SKIP
        'object'
    """
    return tools.anthropic()


async def dispatch_tool_call(tools: MemoryTools, name: str, arguments: Any, context: ToolContext) -> dict[str, Any]:
    """Run one tool call of a model; same as ``await tools.dispatch(name, arguments, context)``.

    Example:
        >>> await dispatch_tool_call(tools, "recall", '{"query": ""}', ctx)  # doctest: +SKIP
    """
    return await tools.dispatch(name, arguments, context)


def __getattr__(name: str) -> Any:
    if name in ("mcp_server", "serve_stdio"):
        from . import _mcp

        return getattr(_mcp, name)
    raise AttributeError(f"module 'memoryport.tools' has no attribute {name!r}")
