"""The memory tools as OpenAI Agents SDK function tools; the scope comes from the run context (extra ``openai-agents``).

Example:
    >>> from agents import Agent, Runner
    >>> from memoryport import SQLiteMemory, ToolContext, memory_tools
    >>> from memoryport.integrations.openai_agents import function_tools
    >>> agent = Agent(name="assistant", tools=function_tools(memory_tools(SQLiteMemory("memory.db"))))  # doctest: +SKIP
    >>> await Runner.run(agent, "Remember I like tea", context=ToolContext(user_id="ann"))  # doctest: +SKIP
"""

from __future__ import annotations

import json
from typing import Any

from .._extras import require
from .._guard import GuardedMemory
from ..tools import MemoryTool, MemoryTools
from ._context import ContextFrom, as_tools, context_from_value

require("agents", extra="openai-agents", feature="memoryport.integrations.openai_agents", package="openai-agents")

from agents import FunctionTool, RunContextWrapper  # noqa: E402

__all__ = ["function_tools"]


def _tool(tool: MemoryTool, tools: MemoryTools, context: ContextFrom) -> FunctionTool:
    async def invoke(wrapper: RunContextWrapper[Any], arguments: str) -> str:
        # The model's JSON goes to the same dispatcher as every host's: unknown
        # arguments (a user_id, say) come back to it as invalid_arguments.
        return json.dumps(await tools.dispatch(tool.name, arguments, context(wrapper.context)))

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=tool.parameters,
        on_invoke_tool=invoke,
        strict_json_schema=True,
    )


def function_tools(
    tools: MemoryTools | GuardedMemory, *, context: ContextFrom = context_from_value
) -> list[FunctionTool]:
    """The memory tools as ``FunctionTool``\\ s; whose memory it is comes from the run's context object.

    The Agents SDK hands each tool a ``RunContextWrapper`` whose ``context`` is
    what the host passed to ``Runner.run(..., context=...)``; ``context`` turns
    it into a :class:`~memoryport.ToolContext` (by default: a ``ToolContext``
    as is, or an object or dict with ``user_id``, ``session_id``, ``agent_id``).
    Every tool of ``tools`` appears, with its name, description and strict JSON
    schema, and runs through :meth:`MemoryTools.dispatch`.

    Args:
        tools: ``memory_tools(memory, ...)`` (or a ``GuardedMemory`` for the defaults).
        context: run context -> ``ToolContext``; default
            :func:`~memoryport.integrations._context.context_from_value`.

    Example:
        >>> agent = Agent(name="a", model=model, tools=function_tools(tools))  # doctest: +SKIP
        >>> await Runner.run(agent, "hi", context={"user_id": "ann", "session_id": "chat-1"})  # doctest: +SKIP
    """
    tools = as_tools(tools)
    return [_tool(t, tools, context) for t in tools]
