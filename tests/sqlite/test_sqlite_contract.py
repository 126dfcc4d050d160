"""The contract suite on SQLiteMemory: a file in a temporary folder, both drivers, with and without vectors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memoryport import GuardedMemory
from memoryport.adapters.sqlite import SQLiteStore
from memoryport.adapters.sqlite._schema import PAGE_SIZE
from memoryport.contracts import MemoryContract

from .support import bow_embedder


class TestSQLiteContract(MemoryContract):
    """Every add straight to the tables (``write_behind=False``), in a file of 4 KiB pages."""

    @pytest.fixture(params=[False, True], ids=["keyword", "embedder"])
    async def memory(
        self, request: pytest.FixtureRequest, tmp_path: Path, driver: str
    ) -> AsyncIterator[GuardedMemory[SQLiteStore]]:
        embedder = bow_embedder() if request.param else None
        path = tmp_path / "memory.db"
        m = GuardedMemory(SQLiteStore(path, embedder=embedder, driver=driver, write_behind=False, page_size=4096))
        yield m
        await m.aclose()


class TestSQLiteContractDefaults(MemoryContract):
    """The defaults: small adds to the write-behind log (drained by its thread or the next read), default pages."""

    @pytest.fixture(params=[False, True], ids=["keyword", "embedder"])
    async def memory(
        self, request: pytest.FixtureRequest, tmp_path: Path, driver: str
    ) -> AsyncIterator[GuardedMemory[SQLiteStore]]:
        embedder = bow_embedder() if request.param else None
        m = GuardedMemory(SQLiteStore(tmp_path / "memory.db", embedder=embedder, driver=driver))
        assert m.store.write_behind and m.store.stats()["page_size"] == PAGE_SIZE
        yield m
        await m.aclose()


class TestSQLiteContract16KPages(MemoryContract):
    """The same contract in a file created with ``page_size=16384``, with vectors."""

    @pytest.fixture
    async def memory(self, tmp_path: Path) -> AsyncIterator[GuardedMemory[SQLiteStore]]:
        m = GuardedMemory(SQLiteStore(tmp_path / "memory.db", embedder=bow_embedder(), page_size=16384))
        assert m.store.stats()["page_size"] == 16384
        yield m
        await m.aclose()
