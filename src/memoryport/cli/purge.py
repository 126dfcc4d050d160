"""``memoryport purge``: physically remove expired and retained-out memories."""

from __future__ import annotations

import argparse
import asyncio

from . import _common
from ._common import CliError

__all__ = ["register", "run"]

EXAMPLES = """examples:
  memoryport purge --db memory.db                      # memories past their expires_at
  memoryport purge --db memory.db --retention-days 90  # and everything older than 90 days
"""


def run(args: argparse.Namespace) -> int:
    """Purge and print how many memories went."""
    if args.retention_days is not None and not args.retention_days > 0:
        raise CliError("--retention-days takes a positive number of days")
    memory = _common.open_memory(args)

    async def go() -> int:
        try:
            return await memory.purge()
        finally:
            await memory.aclose()

    n = asyncio.run(go())
    print(f"purged {n} {'memory' if n == 1 else 'memories'}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``purge`` to the command line."""
    p = sub.add_parser(
        "purge",
        help="remove expired memories for good",
        description="Physically remove memories past their expiry or older than --retention-days.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_db_argument(p)
    p.add_argument("--retention-days", metavar="DAYS", type=float, help="also remove memories older than this")
    p.set_defaults(run=run)
