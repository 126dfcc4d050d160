"""``memoryport erase``: delete every memory of a scope (erasing a user)."""

from __future__ import annotations

import argparse
import asyncio

from . import _common
from ._common import CliError

__all__ = ["register", "run"]

EXAMPLES = """examples:
  memoryport erase --db memory.db --user ann --yes              # everything of Ann
  memoryport erase --db memory.db --user ann --session chat-7 --yes
"""


def _describe(args: argparse.Namespace) -> str:
    parts = [
        f"{name}={value}"
        for name, value in (("user", args.user), ("session", args.session), ("agent", args.agent))
        if value is not None
    ]
    return " ".join(parts)


def run(args: argparse.Namespace) -> int:
    """Erase the scope and print how many memories went."""
    scope = _common.scope_from_args(args)
    if not args.yes:
        raise CliError(f"erase deletes every memory of {_describe(args)} for good; add --yes to go ahead")
    memory = _common.open_memory(args)

    async def go() -> int:
        try:
            return await memory.delete(scope=scope)
        finally:
            await memory.aclose()

    n = asyncio.run(go())
    print(f"erased {n} {'memory' if n == 1 else 'memories'} of {_describe(args)}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``erase`` to the command line."""
    p = sub.add_parser(
        "erase",
        help="delete every memory of a scope",
        description=(
            "Delete every memory the scope covers: --user alone erases the user across all sessions and agents."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_db_argument(p)
    _common.add_scope_arguments(p)
    p.add_argument("--yes", action="store_true", help="confirm: this cannot be undone")
    p.set_defaults(run=run)
