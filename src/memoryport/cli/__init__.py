"""The ``memoryport`` command line.

Each command lives in its own module of this package and registers itself in
:data:`COMMANDS`. A user mistake prints one line on stderr and exits non-zero;
it never shows a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from .._errors import MemoryportError

__all__ = ["COMMANDS", "main"]

# command name -> "module:function" that adds its subparser.
COMMANDS: dict[str, str] = {
    "doctor": "memoryport.cli.doctor:register",
    "demo": "memoryport.cli.demo:register",
    "copy": "memoryport.cli.copy:register",
}

EPILOG = """examples:
  memoryport doctor                 what is installed, and what SQLite can do
  memoryport demo                   a scripted two-user conversation, offline
  memoryport copy old.db new.db --user ann
                                    copy Ann's memories (also to/from module:factory, e.g. Mem0)
"""


class CliError(Exception):
    """A user mistake: printed as one line, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    """The parser with every registered command."""
    parser = argparse.ArgumentParser(
        prog="memoryport",
        description="Long-term memory for AI agents.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for spec in COMMANDS.values():
        module, func = spec.split(":")
        register: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None] = getattr(
            importlib.import_module(module), func
        )
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except (CliError, MemoryportError, OSError) as exc:
        print(f"memoryport {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
