"""Curated-memory fixtures: every policy on SQLite, PostgreSQL and CallableMemory over the reference store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryport import CallableMemory, GuardedMemory, SQLiteMemory

from .support import reference_functions

# "reference": the guard applies operator filters and time ranges on the way out;
# "reference-native": the store declares it runs them itself.
BACKENDS = ["sqlite", "postgres", "reference", "reference-native"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def curated_pg() -> Iterator[Any]:
    """PostgreSQL for these tests (pgserver, or $MEMORYPORT_PG_DSN), started only when a test asks for it."""
    from postgres.support import start_server, stop_server

    server = start_server()
    yield server
    stop_server(server)


def open_backend(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> GuardedMemory:
    if name == "sqlite":
        return SQLiteMemory(tmp_path / "curated.db")
    if name == "postgres":
        from postgres.support import fresh_schema

        from memoryport.adapters.postgres import PostgresMemory

        server = request.getfixturevalue("curated_pg")
        return PostgresMemory(server.app_dsn, schema=fresh_schema(), pool_size=2)
    fns = reference_functions()
    caps = fns.pop("capabilities")
    if name == "reference-native":
        return CallableMemory(**fns, capabilities=caps, name="reference-native")
    return CallableMemory(**fns, name="reference")


@pytest.fixture(params=BACKENDS)
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[GuardedMemory]:
    m = open_backend(str(request.param), tmp_path, request)
    yield m
    await m.aclose()
