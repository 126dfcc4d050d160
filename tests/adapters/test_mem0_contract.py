"""The contract suite on Mem0Memory: the real mem0 ``Memory`` and ``AsyncMemory`` (see conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

pytest.importorskip("mem0")
contracts = pytest.importorskip("memoryport.contracts")
if not hasattr(contracts, "MemoryContract"):
    pytest.skip("the contract suite is not on this branch yet", allow_module_level=True)

from memoryport import GuardedMemory  # noqa: E402
from memoryport.adapters.mem0 import Mem0Store  # noqa: E402
from memoryport.contracts import MemoryContract  # noqa: E402


class TestMem0Memory(MemoryContract):  # type: ignore[misc,valid-type]
    """Runs once on a sync ``mem0.Memory`` and once on an ``AsyncMemory`` (qdrant in memory)."""

    # mem0's own SDK costs ~1 s per random sequence (its add runs its pipeline and qdrant per record):
    # 12 sequences per client keep the model check and halve the two slowest contract tests of the run.
    hypothesis_examples = 12

    @pytest.fixture
    async def memory(self, mem0_client: Any) -> AsyncIterator[GuardedMemory[Mem0Store]]:
        m = GuardedMemory(Mem0Store(mem0_client))  # certified exactly as a third party's store
        yield m
        await m.aclose()
