"""Fixtures of the model-port tests: asyncio, and a sink of usage events."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def events() -> Iterator[list[object]]:
    """A sink installed as the sink of the operation in progress."""
    from memoryport._events import current_sink

    got: list[object] = []
    token = current_sink.set(got.append)
    yield got
    current_sink.reset(token)
