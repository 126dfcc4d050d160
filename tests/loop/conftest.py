"""Agent-loop fixtures: every part on SQLite (a real file), the in-memory reference store, and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryport import GuardedMemory, SQLiteMemory
from memoryport.testing import InMemoryStore

BACKENDS = ["sqlite", "inmemory", "postgres"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def loop_pg() -> Iterator[Any]:
    """PostgreSQL for these tests (pgserver, or $MEMORYPORT_PG_DSN), started only when a test asks for it."""
    from postgres.support import start_server, stop_server

    server = start_server()
    yield server
    stop_server(server)


def open_backend(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> GuardedMemory:
    if name == "sqlite":
        return SQLiteMemory(tmp_path / "loop.db")
    if name == "postgres":
        from postgres.support import fresh_schema

        from memoryport.adapters.postgres import PostgresMemory

        server = request.getfixturevalue("loop_pg")
        return PostgresMemory(server.app_dsn, schema=fresh_schema(), pool_size=2)
    return GuardedMemory(InMemoryStore())


@pytest.fixture(params=BACKENDS)
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[GuardedMemory]:
    m = open_backend(str(request.param), tmp_path, request)
    yield m
    await m.aclose()


@pytest.fixture
async def sqlite_memory(tmp_path: Path) -> AsyncIterator[GuardedMemory]:
    m = SQLiteMemory(tmp_path / "loop.db")
    yield m
    await m.aclose()
