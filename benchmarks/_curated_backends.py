"""The backends the curated-memory benchmarks run on: SQLite, PostgreSQL (pgserver or a DSN), the reference store."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

BACKENDS = ("sqlite", "postgres", "reference")


def open_backend(name: str, folder: Path, **kwargs: Any) -> tuple[Any, Any]:
    """``(memory, stop)``: a guarded backend and a function that releases what it started."""
    if name == "sqlite":
        from memoryport import SQLiteMemory

        return SQLiteMemory(folder / "bench.db", **kwargs), lambda: None
    if name == "postgres":
        from memoryport.adapters.postgres import PostgresMemory

        dsn = os.environ.get("MEMORYPORT_PG_DSN")
        handle = None
        if not dsn:
            import pgserver

            handle = pgserver.get_server(tempfile.mkdtemp(prefix="memoryport-bench-pg-"), cleanup_mode="delete")
            dsn = str(handle.get_uri())
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        memory = PostgresMemory(dsn, schema="mp_bench_" + os.urandom(4).hex(), **kwargs)
        return memory, (lambda: handle.cleanup()) if handle is not None else (lambda: None)
    from memoryport import CallableMemory
    from memoryport.testing import InMemoryStore

    store = InMemoryStore()
    ops = ("add", "search", "get", "delete", "export", "purge", "update", "count")
    return CallableMemory(**{op: getattr(store, op) for op in ops}, capabilities=store.capabilities), lambda: None
