"""``memoryport mcp``: serve remember/recall/forget over MCP on stdio for one user."""

from __future__ import annotations

import argparse
import logging
import sys

from .._port import store_stats
from .._sync import run_sync
from . import _common
from ._common import CliError

__all__ = ["register", "run"]

EXAMPLES = """examples:
  memoryport mcp --db ~/memory.db --user ann
  memoryport mcp --db ~/memory.db --user ann --agent coder --no-forget

In an MCP client's configuration (e.g. a desktop assistant):
  {"mcpServers": {"memory": {"command": "memoryport",
                             "args": ["mcp", "--db", "/home/ann/memory.db", "--user", "ann"]}}}

The user is fixed when the server starts; no tool argument can name another.
"""


def run(args: argparse.Namespace) -> int:
    """Serve until the client closes stdin."""
    import anyio

    from memoryport.tools import ToolContext, memory_tools, pii_check, redact_pii
    from memoryport.tools._mcp import _sdk

    if not args.user:
        raise CliError("whose memory does this server hold? pass --user ID")
    if args.k < 1:
        raise CliError("-k takes a positive number")
    _sdk()  # a missing or too old mcp SDK: one line, before anything is opened
    # stdout carries the protocol: every log line goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="memoryport mcp: %(message)s")
    memory = _common.open_memory(args, create=True)
    kept = (run_sync(store_stats(memory.store), method="stats") or {}).get("embedder")
    if kept and not args.embed:
        memory.close()
        raise CliError(f"{args.db} keeps vectors of embedder {kept!r}; start the server with --embed")
    tools = memory_tools(
        memory,
        forget=not args.no_forget,
        update=False if args.no_update else None,
        k=args.k,
        write_check=None if args.allow_pii else pii_check,
        read_filter=None if args.allow_pii else redact_pii,
    )
    context = ToolContext(principal=args.user, agent_id=args.agent, session_id=args.session)
    if sys.stdin.isatty():
        # Started by hand in a terminal: say what it is waiting for, instead of hanging silently.
        print(
            f"memoryport mcp: serving the memory of user {args.user!r} from {args.db} over MCP on "
            "stdin/stdout. An MCP client (a desktop assistant, an IDE) starts this command itself and "
            "speaks to it; typing here does nothing useful. Stop with Ctrl-D or Ctrl-C.",
            file=sys.stderr,
            flush=True,
        )

    async def serve() -> None:
        try:
            await tools.serve_stdio(context)
        finally:
            await memory.aclose()

    anyio.run(serve)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``mcp`` to the command line."""
    p = sub.add_parser(
        "mcp",
        help="serve the memory tools over MCP (stdio)",
        description=(
            "Serve remember, recall and forget over the Model Context Protocol on stdin/stdout, "
            "for one user fixed at start (extra: mcp)."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_db_argument(p)
    p.add_argument("--user", metavar="ID", help="the user whose memory this server holds (required)")
    p.add_argument("--agent", metavar="ID", help="keep this agent's memories apart")
    p.add_argument("--session", metavar="ID", help="record memories under this session (chat) id")
    p.add_argument("-k", type=int, default=5, help="how many memories recall returns (default 5)")
    p.add_argument("--no-forget", action="store_true", help="do not offer the forget tool")
    p.add_argument("--no-update", action="store_true", help="do not offer the update_memory tool")
    p.add_argument("--allow-pii", action="store_true", help="turn off the PII check and the redactor")
    p.add_argument("--embed", action="store_true", help="embed with the local model (extra: local)")
    p.set_defaults(run=run)
