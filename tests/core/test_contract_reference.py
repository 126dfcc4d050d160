"""The contract suite on the reference stores: GuardedMemory[CallableStore] (sync and async) and a plain port."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from memoryport import CallableMemory, Capability, GuardedMemory
from memoryport.adapters.callable import CallableStore
from memoryport.contracts import MemoryContract

from .dictstore import CALLABLE, DictStore, functions


class TestCallableSync(MemoryContract):
    @pytest.fixture
    async def memory(self) -> AsyncIterator[GuardedMemory]:
        # The built-in store certified exactly as a third party's: GuardedMemory(store).
        store = CallableStore(**functions(DictStore(), asynchronous=False), capabilities=CALLABLE, name="dict-sync")
        yield GuardedMemory(store)


class TestCallableAsync(MemoryContract):
    @pytest.fixture
    async def memory(self) -> AsyncIterator[GuardedMemory]:
        m = CallableMemory(**functions(DictStore(), asynchronous=True), capabilities=CALLABLE, name="dict-async")
        yield m
        await m.aclose()


class TestDictPort(MemoryContract):
    """The port written as a class and wrapped by the guard, as a third party would."""

    @pytest.fixture
    async def memory(self) -> AsyncIterator[GuardedMemory]:
        yield GuardedMemory(DictStore())


class TestBareCallable(MemoryContract):
    """Only add and search, no capabilities at all: every refusal branch runs."""

    @pytest.fixture
    async def memory(self) -> AsyncIterator[GuardedMemory]:
        fns = functions(DictStore(), asynchronous=False)
        yield CallableMemory(add=fns["add"], search=fns["search"], capabilities=[], name="bare")


class TestUserOnly(MemoryContract):
    """A user_only store (like Zep or Graphiti) with get, delete and export."""

    @pytest.fixture
    async def memory(self) -> AsyncIterator[GuardedMemory]:
        caps = frozenset({Capability.GET, Capability.DELETE, Capability.EXPORT, Capability.KEYWORD_SEARCH})
        yield GuardedMemory(DictStore(caps))
