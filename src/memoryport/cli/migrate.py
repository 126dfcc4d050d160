"""``memoryport migrate`` and ``memoryport vacuum``: the PostgreSQL schema's upkeep.

``migrate`` creates or upgrades the tables (idempotent; an advisory lock lets
several deploys run it at once); ``vacuum`` removes erased rows' dead tuples
and index entries (``--full`` rewrites the tables). Both need the ``postgres``
extra and take ``--dsn`` (default ``$MEMORYPORT_PG_DSN``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

from ._common import CliError

__all__ = ["register", "register_vacuum", "run", "run_vacuum"]

EXAMPLES = """examples:
  memoryport migrate --dsn postgresql://owner@db.internal/app
  memoryport migrate --dsn "$DSN" --schema memoryport --text-search-config simple
  memoryport migrate --dsn "$DSN" --hnsw          # build the HNSW index once users hold many vectors
"""

VACUUM_EXAMPLES = """examples:
  memoryport vacuum --dsn postgresql://owner@db.internal/app          # dead rows and index entries
  memoryport vacuum --dsn postgresql://owner@db.internal/app --full   # rewrite the tables (exclusive lock)
"""


def _dsn(args: argparse.Namespace) -> str:
    if not args.dsn:
        raise CliError("give the database: --dsn postgresql://USER@HOST/DB (or set $MEMORYPORT_PG_DSN)")
    return str(args.dsn)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dsn",
        default=os.environ.get("MEMORYPORT_PG_DSN"),
        help="the PostgreSQL DSN (default: $MEMORYPORT_PG_DSN)",
    )
    p.add_argument("--schema", default="memoryport", help="the PostgreSQL schema of the tables (default: memoryport)")


def run(args: argparse.Namespace) -> int:
    """Create or upgrade the schema; print its meta as JSON."""
    from memoryport.adapters.postgres import migrate_dsn

    result: dict[str, Any] = asyncio.run(
        migrate_dsn(_dsn(args), schema=args.schema, text_search_config=args.text_search_config)
    )
    if args.hnsw:
        from memoryport.adapters.postgres import PostgresMemory

        async def build() -> bool:
            memory = PostgresMemory(_dsn(args), schema=args.schema, pool_size=1)
            try:
                return await memory.store.create_hnsw_index()
            finally:
                await memory.aclose()

        result["hnsw_built"] = asyncio.run(build())
    print(json.dumps(result, sort_keys=True))
    return 0


def run_vacuum(args: argparse.Namespace) -> int:
    """VACUUM the tables."""
    from memoryport.adapters.postgres import PostgresMemory

    async def go() -> None:
        memory = PostgresMemory(_dsn(args), schema=args.schema, pool_size=1)
        try:
            await memory.store.vacuum(full=args.full)
        finally:
            await memory.aclose()

    asyncio.run(go())
    print(f"vacuumed schema {args.schema}{' (full)' if args.full else ''}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``migrate`` to the command line."""
    p = sub.add_parser(
        "migrate",
        help="create or upgrade the PostgreSQL schema",
        description=(
            "Create or upgrade memoryport's tables in a PostgreSQL schema (idempotent; safe from several "
            "processes at once). PostgresMemory does this on first use too; run it from a deploy step with "
            "an owner role when the application's role may not create tables."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_common(p)
    p.add_argument(
        "--text-search-config",
        metavar="NAME",
        help="text-search configuration of a new schema (default: english); fixed once created",
    )
    p.add_argument(
        "--hnsw",
        action="store_true",
        help="also build the HNSW index on the vectors (CREATE INDEX CONCURRENTLY; the schema must keep vectors)",
    )
    p.set_defaults(run=run)


def register_vacuum(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``vacuum`` to the command line."""
    p = sub.add_parser(
        "vacuum",
        help="VACUUM the PostgreSQL tables after erasing",
        description=(
            "VACUUM (ANALYZE) memoryport's tables: erased rows' dead tuples and index entries go. --full rewrites "
            "the tables so no page keeps erased bytes (holds an exclusive lock). WAL, replicas and backups keep "
            "their copies until they expire: see docs/postgres.md."
        ),
        epilog=VACUUM_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_common(p)
    p.add_argument("--full", action="store_true", help="VACUUM FULL: rewrite the tables")
    p.set_defaults(run=run_vacuum)
