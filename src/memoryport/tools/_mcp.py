"""Serve the memory tools over MCP with the official ``mcp`` SDK (extra ``mcp``)."""

from __future__ import annotations

import importlib.metadata
import json
from typing import TYPE_CHECKING, Any

from .._errors import UsageError
from .._extras import require
from ._context import ToolContext

if TYPE_CHECKING:
    from mcp.server import Server

    from ._tools import MemoryTools

__all__ = ["mcp_server", "serve_stdio"]

_FEATURE = "the MCP server (memoryport mcp)"


def _sdk() -> tuple[Any, Any]:
    require("mcp", extra="mcp", feature=_FEATURE)
    try:
        version = importlib.metadata.version("mcp")
        major = int(version.split(".")[0])
    except (importlib.metadata.PackageNotFoundError, ValueError):  # pragma: no cover - a vendored copy
        version, major = "unknown", 2
    if major < 2:
        # mcp 1.x registers handlers with decorators; this server uses the 2.x constructor API.
        raise UsageError(
            f"{_FEATURE} needs mcp 2.3 or newer (installed: {version}); "
            'upgrade with: pip install -U "memoryport[mcp]"'
        )
    server = require("mcp.server", extra="mcp", feature=_FEATURE)
    types = require("mcp.types", extra="mcp", feature=_FEATURE)
    return server, types


def mcp_server(tools: MemoryTools, context: ToolContext, *, name: str = "memoryport") -> Server[Any]:
    """An MCP ``Server`` offering ``tools``, every call made with ``context``.

    The principal is fixed by the host (here: whoever starts the server), so a
    client cannot name another user: tool arguments carry no scope.

    Example:
        >>> server = mcp_server(memory_tools(memory), ToolContext(principal="ann"))  # doctest: +SKIP
    """
    server_mod, types = _sdk()
    from memoryport import __version__

    listed = [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.parameters,
            annotations=types.ToolAnnotations(
                title=tool.name.capitalize(),
                read_only_hint=tool.effect == "read_only",
                destructive_hint=tool.effect == "destructive",
                idempotent_hint=tool.effect != "additive",
                open_world_hint=False,
            ),
        )
        for tool in tools
    ]

    async def on_list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=listed)

    async def on_call_tool(ctx: Any, params: Any) -> Any:
        result = await tools.dispatch(params.name, params.arguments or {}, context)
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(result, ensure_ascii=False))],
            structured_content=result,
            is_error="error" in result,
        )

    server: Server[Any] = server_mod.Server(
        name,
        version=__version__,
        instructions=(
            "Long-term memory of one user. Use recall before answering questions that may depend on earlier "
            "conversations, remember to save lasting facts, and forget to delete a memory by id."
        ),
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
    return server


async def serve_stdio(tools: MemoryTools, context: ToolContext, *, name: str = "memoryport") -> None:
    """Serve ``tools`` over MCP on this process's stdin/stdout until the client closes them.

    Example:
        >>> anyio.run(serve_stdio, memory_tools(memory), ToolContext(principal="ann"))  # doctest: +SKIP
    """
    server = mcp_server(tools, context, name=name)
    stdio = require("mcp.server.stdio", extra="mcp", feature=_FEATURE)
    async with stdio.stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
