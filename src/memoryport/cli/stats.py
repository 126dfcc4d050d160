"""``memoryport stats``: what a SQLite memory file holds."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from .._port import Capability, store_stats
from . import _common

__all__ = ["register", "run"]

EXAMPLES = """examples:
  memoryport stats --db memory.db
  memoryport stats --db memory.db --user ann     # with the number of Ann's memories
  memoryport stats --db memory.db --json
"""


def _size(path: Path) -> int:
    total = 0
    for suffix in ("", "-wal", "-shm"):
        p = path.with_name(path.name + suffix)
        if p.exists():
            total += p.stat().st_size
    return total


def run(args: argparse.Namespace) -> int:
    """Print the file's backend, capabilities, size and (with a scope) the scope's count."""
    scoped = args.user is not None or args.session is not None or args.agent is not None
    scope = _common.scope_from_args(args) if scoped else None
    memory = _common.open_memory(args)
    path = Path(args.db).expanduser()

    async def go() -> dict[str, Any]:
        try:
            info: dict[str, Any] = {
                "file": str(path),
                "bytes": _size(path),
                "backend": memory.backend,
                "capabilities": sorted(str(c) for c in memory.capabilities),
                "retention_days": memory.retention_days,
            }
            # The backend may describe itself (record counts, embedder, schema version).
            info.update(await store_stats(memory.store) or {})
            if scope is not None and Capability.EXPORT in memory.capabilities:
                info["scope"] = " ".join(
                    f"{k.removesuffix('_id')}={v}" for k, v in scope.model_dump(exclude_none=True).items()
                )
                info["scope_memories"] = len(await memory.export(scope))
            return info
        finally:
            await memory.aclose()

    info = asyncio.run(go())
    if args.json:
        print(json.dumps(info, ensure_ascii=False, default=str))
    else:
        for key, value in info.items():
            shown = ", ".join(map(str, value)) if isinstance(value, list) else value
            print(f"{key + ':':<19} {shown}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``stats`` to the command line."""
    p = sub.add_parser(
        "stats",
        help="what a memory file holds",
        description="Show a memory file's backend, capabilities and size, and a scope's number of memories.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common.add_db_argument(p)
    _common.add_scope_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run)
