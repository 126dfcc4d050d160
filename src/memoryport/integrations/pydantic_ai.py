"""The memory tools as a pydantic-ai toolset whose scope comes from the run's deps (extra ``pydantic-ai``).

Example:
    >>> from pydantic_ai import Agent
    >>> from memoryport import SQLiteMemory, ToolContext, memory_tools
    >>> from memoryport.integrations.pydantic_ai import memory_toolset
    >>> agent = Agent("openai:gpt-4o", deps_type=ToolContext,  # doctest: +SKIP
    ...               toolsets=[memory_toolset(memory_tools(SQLiteMemory("memory.db")))])
    >>> agent.run_sync("Remember that I like green tea", deps=ToolContext(user_id="ann"))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from .._extras import require
from .._guard import GuardedMemory
from ..tools import MemoryTool, MemoryTools
from ._context import ContextFrom, as_tools, context_from_value

require("pydantic_ai", extra="pydantic-ai", feature="memoryport.integrations.pydantic_ai", package="pydantic-ai-slim")

from pydantic_ai import FunctionToolset, RunContext, Tool  # noqa: E402

__all__ = ["memory_toolset"]


def _tool(tool: MemoryTool, tools: MemoryTools, context: ContextFrom) -> Tool[Any]:
    async def call(ctx: RunContext[Any], **arguments: Any) -> dict[str, Any]:
        # The arguments go to the same dispatcher as every host's: unknown ones
        # (a user_id, say) come back to the model as invalid_arguments.
        return await tools.dispatch(tool.name, arguments, context(ctx.deps))

    call.__name__ = tool.name
    made: Tool[Any] = Tool.from_schema(call, tool.name, tool.description, tool.parameters, takes_ctx=True)
    return made


def memory_toolset(
    tools: MemoryTools | GuardedMemory, *, context: ContextFrom = context_from_value
) -> FunctionToolset[Any]:
    """The memory tools as a pydantic-ai ``FunctionToolset``; whose memory it is comes from the run's deps.

    Every tool of ``tools`` (``remember``, ``recall``, ``forget``, and any the
    host adds) becomes a pydantic-ai tool with the same name, description and
    JSON schema. Each call builds its :class:`~memoryport.ToolContext` from
    ``RunContext.deps`` through ``context`` and runs through
    :meth:`MemoryTools.dispatch`, so the results, errors and the refusal of
    scope arguments are those of the core tools.

    Args:
        tools: ``memory_tools(memory, ...)`` (or a ``GuardedMemory`` for the defaults).
        context: deps -> ``ToolContext``. The default takes a ``ToolContext``
            as deps as is, or reads ``user_id``/``session_id``/``agent_id`` off
            a dataclass, model or dict; ``None`` deps are anonymous (refused).

    Example:
        >>> agent = Agent(model, deps_type=ToolContext, toolsets=[memory_toolset(tools)])  # doctest: +SKIP
        >>> await agent.run("What do I like?", deps=ToolContext(user_id="ann"))  # doctest: +SKIP
    """
    tools = as_tools(tools)
    return FunctionToolset([_tool(t, tools, context) for t in tools])
