"""Fixtures of the PostgreSQL tests: one server for the session (pgserver or $MEMORYPORT_PG_DSN)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .support import Server, start_server, stop_server


@pytest.fixture(scope="session")
def pg() -> Iterator[Server]:
    """PostgreSQL 16 with pgvector, started in a temporary folder (or the server $MEMORYPORT_PG_DSN names)."""
    server = start_server()
    yield server
    stop_server(server)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
