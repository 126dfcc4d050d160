"""``memoryport export``: every memory of a scope, as JSON lines (a data-access answer)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from .._records import MemoryRecord
from . import _common
from ._common import CliError

__all__ = ["register", "run"]

EXAMPLES = """examples:
  memoryport export --db memory.db --user ann > ann.jsonl
  memoryport export --db memory.db --user ann -o ann.jsonl   # created owner-only (0600)
  memoryport export --db memory.db --user ann --session chat-7
"""


def run(args: argparse.Namespace) -> int:
    """Write one JSON object per memory, oldest first."""
    scope = _common.scope_from_args(args)
    out: Path | None = None
    if args.output is not None and args.output != "-":
        out = Path(args.output).expanduser()
        if out.exists():
            raise CliError(f"{out} already exists; choose another file (export never overwrites)")
        if not out.parent.exists():
            raise CliError(f"the folder {out.parent} does not exist")
    memory = _common.open_memory(args)

    async def go() -> list[MemoryRecord]:
        try:
            return await memory.export(scope)
        finally:
            await memory.aclose()

    records = asyncio.run(go())
    lines = "".join(json.dumps(_common.record_json(r), ensure_ascii=False) + "\n" for r in records)
    if out is None:
        sys.stdout.write(lines)
    else:
        # Personal data: owner-only from the first byte, and never clobber a file.
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(lines)
        print(f"exported {len(records)} memories to {out}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``export`` to the command line."""
    p = sub.add_parser(
        "export",
        help="export a scope's memories as JSON lines",
        description="Export every live memory of a scope, oldest first, one JSON object per line.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_db_argument(p)
    _common.add_scope_arguments(p)
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (created 0600) instead of stdout")
    p.set_defaults(run=run)
