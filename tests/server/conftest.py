"""Fixtures of the server tests: a live uvicorn server on 127.0.0.1 per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .support import Live, live_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with live_server(tmp_path_factory.mktemp("server")) as server:
        yield server
