"""Memory as tools for a model: ``remember``, ``recall`` and ``forget``.

The host builds the tools once with :func:`memory_tools` and passes a
:class:`ToolContext` (who the call is for) with every call. The scope always
comes from that context, never from the model's arguments. Every host shape is
a method of :class:`MemoryTools`, and only that: ``tools.openai()``,
``tools.anthropic()``, ``await tools.dispatch(...)`` (``tools.dispatch_sync``),
``tools.mcp_server(ctx)`` and ``await tools.serve_stdio(ctx)``::

    from memoryport import SQLiteMemory, ToolContext, memory_tools

    tools = memory_tools(SQLiteMemory("memory.db"))
    ctx = ToolContext(user_id="ann", session_id="chat-1")
    result = await tools.dispatch("remember", '{"text": "Ann likes green tea"}', ctx)

Each tool is a small class registered in one place (``_builtin.py``; the shape
is in ``_tool.py``): adding one makes it appear in every shape.
"""

from __future__ import annotations

from . import _builtin  # noqa: F401  (registers the tools, in order)
from ._context import ScopeFrom, ToolContext, ToolError, scope_from_context, session_scope, user_scope
from ._graph_tools import graph_tools
from ._pii import PIIKind, PIIMatch, find_pii, pii_check, redact_pii
from ._tool import Effect
from ._tools import (
    RECALL_NOTE,
    Approve,
    Handler,
    MemoryTool,
    MemoryTools,
    PendingWrite,
    ReadFilter,
    WriteCheck,
    memory_tools,
)

__all__ = [
    "RECALL_NOTE",
    "Approve",
    "Effect",
    "Handler",
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
    "find_pii",
    "graph_tools",
    "memory_tools",
    "pii_check",
    "redact_pii",
    "scope_from_context",
    "session_scope",
    "user_scope",
]
