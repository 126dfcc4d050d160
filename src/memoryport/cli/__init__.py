"""The ``memoryport`` command line.

Each command lives in its own module of this package and registers itself in
:data:`COMMANDS`. A user mistake prints one line on stderr and exits with
status 2; a failing backend exits with 1. Neither shows a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn, cast

from .._errors import BackendError, MemoryportError
from ._common import CliError

__all__ = ["COMMANDS", "CliError", "main"]

# command name -> "module:function" that adds its subparser.
COMMANDS: dict[str, str] = {
    "demo": "memoryport.cli.demo:register",
    "add": "memoryport.cli.add:register",
    "search": "memoryport.cli.search:register",
    "export": "memoryport.cli.export:register",
    "erase": "memoryport.cli.erase:register",
    "purge": "memoryport.cli.purge:register",
    "reembed": "memoryport.cli.reembed:register",
    "stats": "memoryport.cli.stats:register",
    "mcp": "memoryport.cli.mcp:register",
    "copy": "memoryport.cli.copy:register",
    "import": "memoryport.cli.knowledge:register",
    "migrate": "memoryport.cli.migrate:register",
    "vacuum": "memoryport.cli.migrate:register_vacuum",
    "serve": "memoryport.cli.serve:register",
    "keys": "memoryport.cli.serve:register_keys",
    "doctor": "memoryport.cli.doctor:register",
}

EPILOG = """examples:
  memoryport demo                                      a scripted two-user conversation, offline
  memoryport add --db memory.db --user ann "Ann drinks green tea"
  memoryport search --db memory.db --user ann tea
  memoryport export --db memory.db --user ann > ann.jsonl
  memoryport erase --db memory.db --user ann --yes
  memoryport purge --db memory.db --retention-days 90
  memoryport stats --db memory.db
  memoryport reembed --db memory.db                    re-embed every memory with the local model
  memoryport mcp --db memory.db --user ann             serve the tools to an MCP client
  memoryport import handbook/ --db memory.db --user ann    import a folder of documents as knowledge
  memoryport copy old.db new.db --user ann             copy Ann's memories (also to/from module:factory)
  memoryport copy memory.db postgresql://app@db/app --user ann      ... or into PostgreSQL
  memoryport migrate --dsn postgresql://owner@db/app   create or upgrade the PostgreSQL schema
  memoryport vacuum --dsn postgresql://owner@db/app    VACUUM the PostgreSQL tables after erasing
  memoryport keys create --db memory.db --user ann     an API key for Ann (shown once)
  memoryport serve --db memory.db                      the HTTP API and dashboard on 127.0.0.1:8787
  memoryport doctor                                    what is installed, and what SQLite can do

Run `memoryport COMMAND --help` for a command's options and examples.
"""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``memoryport add: error: ...`` and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    """The parser with every registered command."""
    parser = _Parser(
        prog="memoryport",
        description="Long-term memory for AI agents.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", metavar="COMMAND"),
    )
    for spec in COMMANDS.values():
        module, func = spec.split(":")
        register: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None] = getattr(
            importlib.import_module(module), func
        )
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Example:
        >>> main(["search", "--db", "memory.db", "--user", "ann", "tea"])  # doctest: +SKIP
        0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed as one line
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except BrokenPipeError:
        # The reader went away (`memoryport export ... | head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except BackendError as exc:
        print(f"memoryport {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except (CliError, MemoryportError, OSError) as exc:
        print(f"memoryport {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    return " ".join(str(exc).split())


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
