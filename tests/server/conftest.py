"""Fixtures of the server tests: a live uvicorn server on 127.0.0.1 per module, and a PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.postgres.support import Server, start_server, stop_server

from .support import Live, live_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def pg() -> Iterator[Server]:
    """PostgreSQL 16 (pgserver, or the server $MEMORYPORT_PG_DSN names), as in tests/postgres."""
    server = start_server()
    yield server
    stop_server(server)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with live_server(tmp_path_factory.mktemp("server")) as server:
        yield server
