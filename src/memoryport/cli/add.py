"""``memoryport add``: store one memory in a SQLite file."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import timedelta

from .._records import MemoryRecord, utcnow
from . import _common
from ._common import CliError

__all__ = ["register", "run"]

EXAMPLES = """examples:
  memoryport add --db memory.db --user ann "Ann drinks green tea"
  memoryport add --db memory.db --user ann --session chat-7 --meta kind=preference "Prefers window seats"
  echo "Ben is allergic to nuts" | memoryport add --db memory.db --user ben -
  memoryport add --db memory.db --user ann --expires-in 7 "Ann is in Lisbon this week"
"""


def run(args: argparse.Namespace) -> int:
    """Add the memory and print its id."""
    text = sys.stdin.read().rstrip("\n") if args.text == "-" else args.text
    scope = _common.scope_from_args(args)
    metadata = _common.parse_pairs(args.meta, "--meta")
    now = utcnow()
    expires = None
    if args.expires_in is not None:
        if not args.expires_in > 0:
            raise CliError("--expires-in takes a positive number of days")
        expires = now + timedelta(days=args.expires_in)
    record = MemoryRecord(scope=scope, text=text, metadata=metadata, created_at=now, expires_at=expires)
    memory = _common.open_memory(args, create=True)

    async def go() -> list[str]:
        try:
            return await memory.add([record])
        finally:
            await memory.aclose()

    [record_id] = asyncio.run(go())
    print(record_id)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``add`` to the command line."""
    p = sub.add_parser(
        "add",
        help="store one memory",
        description="Store one memory in a SQLite memory file (created if missing). Prints the new id.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_db_argument(p)
    _common.add_scope_arguments(p)
    p.add_argument("--meta", metavar="KEY=VALUE", action="append", help="metadata (repeatable)")
    p.add_argument("--expires-in", metavar="DAYS", type=float, help="hide the memory after this many days")
    p.add_argument("--embed", action="store_true", help="embed with the local model (extra: local)")
    p.add_argument("text", metavar="TEXT", help="the memory's text, or - to read it from stdin")
    p.set_defaults(run=run)
