"""Fixtures of the core tests: async tests run on asyncio through anyio."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
