"""The benchmark smoke tests run on asyncio, as the harness itself does."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
