"""The contract suite on PostgresMemory: a fresh schema per test, with and without an embedder."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memoryport import GuardedMemory
from memoryport.adapters.postgres import PostgresStore
from memoryport.contracts import MemoryContract

from .support import Server, bow_embedder, fresh_schema


class TestPostgresContract(MemoryContract):
    hypothesis_examples = 15

    @pytest.fixture(params=[False, True], ids=["keyword", "embedder"])
    async def memory(
        self, request: pytest.FixtureRequest, pg: Server
    ) -> AsyncIterator[GuardedMemory[PostgresStore]]:
        # certified exactly as a third party's store: GuardedMemory(store)
        store = PostgresStore(
            pg.app_dsn, embedder=bow_embedder() if request.param else None, schema=fresh_schema(), pool_size=2
        )
        m = GuardedMemory(store)
        yield m
        await m.aclose()
