"""``memoryport search``: the best memories of one scope for a query."""

from __future__ import annotations

import argparse
import asyncio
import sys

from .._records import MemoryHit
from . import _common

__all__ = ["register", "run"]

EXAMPLES = """examples:
  memoryport search --db memory.db --user ann "what does Ann drink"
  memoryport search --db memory.db --user ann               # newest first
  memoryport search --db memory.db --user ann -k 10 --filter kind=preference tea
  memoryport search --db memory.db --user ann --json tea    # one JSON object per line
"""


def run(args: argparse.Namespace) -> int:
    """Print the hits, best first."""
    scope = _common.scope_from_args(args)
    filters = _common.parse_pairs(args.filter, "--filter") or None
    memory = _common.open_memory(args)

    async def go() -> list[MemoryHit]:
        try:
            return await memory.search(args.query, scope=scope, k=args.k, filters=filters)
        finally:
            await memory.aclose()

    hits = asyncio.run(go())
    if not hits:
        # An empty result is an answer too; in --json mode stdout stays empty (zero JSON lines).
        where = ", ".join(f"{k}={v}" for k, v in (("user", args.user), ("session", args.session),
                                                   ("agent", args.agent)) if v is not None)
        what = f"match {args.query!r}" if args.query.strip() else "exist"
        print(f"no memories {what} for {where}", file=sys.stderr if args.json else sys.stdout)
        return 0
    for hit in hits:
        if args.json:
            _common.write_line({"score": hit.score, "signal": hit.signal, **_common.record_json(hit.record)})
        else:
            print(f"{hit.score:8.4f}  {hit.record.id}  {hit.record.text}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``search`` to the command line."""
    p = sub.add_parser(
        "search",
        help="search one user's memories",
        description="Search the memories of one scope, best first. Without a query: the newest.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_db_argument(p)
    _common.add_scope_arguments(p)
    p.add_argument("-k", type=int, default=5, help="how many hits (default 5)")
    p.add_argument("--filter", metavar="KEY=VALUE", action="append", help="match metadata exactly (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON lines instead of a table")
    p.add_argument("--embed", action="store_true", help="embed the query with the local model (extra: local)")
    p.add_argument("query", metavar="QUERY", nargs="?", default="", help="what to look for (empty: newest)")
    p.set_defaults(run=run)
