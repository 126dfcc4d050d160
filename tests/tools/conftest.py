"""Fixtures for the tools tests."""

from __future__ import annotations

import pytest
from tools_support import DictStore

from memoryport import GuardedMemory


@pytest.fixture
def store() -> DictStore:
    return DictStore()


@pytest.fixture
def memory(store: DictStore) -> GuardedMemory[DictStore]:
    return store.memory()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _no_default_db(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own MEMORYPORT_DB must not leak into the CLI tests."""
    monkeypatch.delenv("MEMORYPORT_DB", raising=False)
