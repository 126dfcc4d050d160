"""The dict store the tools tests stand on keeps the contract, so their results mean something."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from tools_support import DictStore

from memoryport import GuardedMemory
from memoryport.contracts import MemoryContract


class TestToolsDictStore(MemoryContract):
    @pytest.fixture
    async def memory(self) -> AsyncIterator[GuardedMemory[DictStore]]:
        m = DictStore().memory()
        yield m
        await m.aclose()


class TestToolsDictStoreUserOnly(MemoryContract):
    @pytest.fixture
    async def memory(self) -> AsyncIterator[GuardedMemory[DictStore]]:
        m = DictStore().user_only_memory()
        yield m
        await m.aclose()
