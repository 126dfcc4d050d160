"""The contract suite on SQLiteMemory: a file in a temporary folder, both drivers, with and without vectors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memoryport import SQLiteMemory
from memoryport.contracts import MemoryContract

from .support import bow_embedder


class TestSQLiteContract(MemoryContract):
    @pytest.fixture(params=[False, True], ids=["keyword", "embedder"])
    async def memory(self, request: pytest.FixtureRequest, tmp_path: Path, driver: str) -> AsyncIterator[SQLiteMemory]:
        m = SQLiteMemory(tmp_path / "memory.db", embedder=bow_embedder() if request.param else None, driver=driver)
        yield m
        await m.aclose()
