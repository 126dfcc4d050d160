"""The memory tools as LangChain ``BaseTool``\\ s; the scope comes from the runnable config (extra ``langchain``).

Example:
    >>> from memoryport import SQLiteMemory, memory_tools
    >>> from memoryport.integrations.langchain import langchain_tools
    >>> tools = langchain_tools(memory_tools(SQLiteMemory("memory.db")))  # doctest: +SKIP
    >>> model = ChatOpenAI(model="gpt-4o").bind_tools(tools)  # doctest: +SKIP
    >>> tools[1].invoke({"query": "tea"}, config={"configurable": {"user_id": "ann"}})  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

from .._errors import UsageError
from .._extras import require
from .._guard import GuardedMemory
from ..tools import MemoryTool, MemoryTools, ToolContext
from ._context import as_tools, context_from_value

require(
    "langchain_core.tools", extra="langchain", feature="memoryport.integrations.langchain", package="langchain-core"
)

from langchain_core.runnables import RunnableConfig  # noqa: E402
from langchain_core.tools import BaseTool  # noqa: E402
from pydantic import ConfigDict, PrivateAttr  # noqa: E402

__all__ = ["MemoryBaseTool", "context_from_config", "langchain_tools"]

ConfigContext = Callable[[RunnableConfig], ToolContext]
"""Turns the runnable config of a call into the :class:`~memoryport.ToolContext`."""


def context_from_config(config: RunnableConfig) -> ToolContext:
    """The default: ``config["configurable"]``'s ``tool_context`` (a ToolContext), else its ids.

    The ids are ``user_id`` and optionally ``session_id`` (or ``thread_id``,
    which LangGraph's checkpointers already set), ``agent_id`` and
    ``principal``. Nothing set means anonymous: the tools refuse.

    Example:
        >>> context_from_config({"configurable": {"user_id": "ann", "thread_id": "t1"}}).session_id
        't1'
    """
    configurable = (config or {}).get("configurable") or {}
    if not isinstance(configurable, Mapping):
        raise UsageError("config['configurable'] must be a dict")
    given = configurable.get("tool_context")
    if given is not None:
        if not isinstance(given, ToolContext):
            raise UsageError(
                f"config['configurable']['tool_context'] must be a ToolContext, not {type(given).__name__}"
            )
        return given
    if not any(
        configurable.get(k) is not None for k in ("user_id", "session_id", "thread_id", "agent_id", "principal")
    ):
        return ToolContext()
    return context_from_value(configurable)


class MemoryBaseTool(BaseTool):
    """One memory tool as a LangChain tool: same name, description and JSON schema.

    Whose memory it is comes from the call's :class:`RunnableConfig` (see
    :func:`context_from_config`), never from the arguments; the arguments go
    to :meth:`MemoryTools.dispatch`, which refuses any it does not know. The
    result is the dispatcher's JSON (errors included, as ``{"error": ...}``).

    Example:
        >>> langchain_tools(tools)[0].invoke({"text": "Ann likes tea"}, config={"configurable": {"user_id": "ann"}})
        ... # doctest: +SKIP
        '{"id": "...", "remembered": true}'
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    _memory_tools: MemoryTools = PrivateAttr()
    _context: ConfigContext = PrivateAttr()

    @classmethod
    def wrap(cls, tool: MemoryTool, tools: MemoryTools, context: ConfigContext) -> MemoryBaseTool:
        """The LangChain tool for ``tool``."""
        made = cls(name=tool.name, description=tool.description, args_schema=tool.parameters)
        made._memory_tools = tools
        made._context = context
        return made

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        args, kwargs = super()._to_args_and_kwargs(tool_input, tool_call_id)
        # LangChain would overwrite a model's "config" argument with the host's
        # config; keep it aside so the dispatcher refuses it like any other.
        if "config" in kwargs:
            kwargs[_MODEL_CONFIG] = kwargs.pop("config")
        return args, kwargs

    def _run(self, config: RunnableConfig, **arguments: Any) -> str:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise UsageError(
                f"the {self.name!r} memory tool was invoked synchronously inside a running event loop; "
                "use `await tool.ainvoke(...)` (or the agent's async API) there instead"
            )
        return json.dumps(self._memory_tools.dispatch_sync(self.name, _restore(arguments), self._context(config)))

    async def _arun(self, config: RunnableConfig, **arguments: Any) -> str:
        return json.dumps(await self._memory_tools.dispatch(self.name, _restore(arguments), self._context(config)))


_MODEL_CONFIG = "__model_config__"


def _restore(arguments: dict[str, Any]) -> dict[str, Any]:
    if _MODEL_CONFIG in arguments:
        arguments["config"] = arguments.pop(_MODEL_CONFIG)
    return arguments


def langchain_tools(
    tools: MemoryTools | GuardedMemory, *, context: ConfigContext = context_from_config
) -> list[BaseTool]:
    """The memory tools as LangChain ``BaseTool``\\ s, for ``bind_tools`` and agents.

    Every tool of ``tools`` appears, so tools added to :func:`~memoryport.memory_tools`
    later appear here too.

    Args:
        tools: ``memory_tools(memory, ...)`` (or a ``GuardedMemory`` for the defaults).
        context: runnable config -> ``ToolContext``; default :func:`context_from_config`.

    Example:
        >>> lc_tools = langchain_tools(memory_tools(memory))  # doctest: +SKIP
        >>> agent = create_react_agent(model, lc_tools)  # doctest: +SKIP
        >>> agent.invoke({"messages": [...]}, {"configurable": {"user_id": "ann", "thread_id": "t1"}})  # doctest: +SKIP
    """
    tools = as_tools(tools)
    return [MemoryBaseTool.wrap(t, tools, context) for t in tools]
