"""The *_sync twins: repeated, from many threads, refused inside a running loop."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from memoryport import GuardedMemory, InvalidInput, MemoryHit, MemoryRecord, MemoryScope, UsageError

from .dictstore import DictStore

ANN = MemoryScope(user_id="ann")


def test_twins_work_repeatedly() -> None:
    memory = GuardedMemory(DictStore())
    ids = []
    for i in range(50):
        ids += memory.add_sync([MemoryRecord(scope=ANN, text=f"note {i}")])
        assert len(memory.search_sync("", scope=ANN, k=100)) == i + 1
    assert len(set(ids)) == 50
    assert memory.get_sync(ids[0], scope=ANN) is not None
    assert len(memory.export_sync(ANN)) == 50
    assert memory.delete_sync([ids[0]], scope=ANN) == 1
    assert memory.purge_sync() == 0
    memory.close()


def test_twins_from_many_threads() -> None:
    """Eight threads at once (a barrier holds them together) share the one background loop."""

    class LoopRecorder(DictStore):
        def __init__(self) -> None:
            super().__init__()
            self.loops: set[int] = set()

        async def add(self, records: Any) -> list[str]:
            self.loops.add(id(asyncio.get_running_loop()))
            return await super().add(records)

    port = LoopRecorder()
    memory = GuardedMemory(port)
    callers: set[int] = set()
    together = threading.Barrier(8, timeout=60)

    def work(n: int) -> list[str]:
        together.wait()
        callers.add(threading.get_ident())
        scope = MemoryScope(user_id=f"user-{n}")
        out: list[str] = []
        for i in range(10):
            out += memory.add_sync([MemoryRecord(scope=scope, text=f"t{i}")])
            hits = memory.search_sync("", scope=scope, k=50)
            assert {h.record.scope for h in hits} == {scope}
        return out

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(work, range(8)))
    ids = [i for r in results for i in r]
    assert len(ids) == 80 and len(set(ids)) == 80
    assert len(memory.export_sync(MemoryScope(user_id="user-3"))) == 10
    assert len(callers) == 8  # the calls really came from eight threads
    assert len(port.loops) == 1  # and all ran on one loop, not a loop per call or per thread


def test_errors_come_through_with_their_type() -> None:
    memory = GuardedMemory(DictStore())
    with pytest.raises(InvalidInput):
        memory.search_sync("q", scope=ANN, k=0)
    with pytest.raises(UsageError):
        memory.search_sync("q")


# (blocking name, async name, call)
TWINS: list[tuple[str, str, Any]] = [
    ("add_sync", "add", lambda m: m.add_sync([MemoryRecord(scope=ANN, text="x")])),
    ("search_sync", "search", lambda m: m.search_sync("x", scope=ANN)),
    ("get_sync", "get", lambda m: m.get_sync("x", scope=ANN)),
    ("delete_sync", "delete", lambda m: m.delete_sync(["x"], scope=ANN)),
    ("export_sync", "export", lambda m: m.export_sync(ANN)),
    ("purge_sync", "purge", lambda m: m.purge_sync()),
    ("close", "aclose", lambda m: m.close()),
]


@pytest.mark.filterwarnings("error")  # the refused coroutine is closed, never left un-awaited
@pytest.mark.parametrize(("blocking", "method", "call"), TWINS)
def test_inside_a_running_loop_the_twin_names_the_await_form(blocking: str, method: str, call: Any) -> None:
    port = DictStore()
    memory = GuardedMemory(port)

    async def main() -> None:
        with pytest.raises(UsageError, match=rf"`await memory\.{method}\(\.\.\.\)`") as info:
            call(memory)
        assert str(info.value).startswith(f"{blocking}() was called inside a running event loop")
        assert hasattr(memory, method) and hasattr(memory, blocking)  # both names the message gives exist

    asyncio.run(main())
    assert port.rows == {}


def test_a_twin_called_by_the_backend_itself_is_refused_not_deadlocked() -> None:
    class Reentrant(DictStore):
        memory: GuardedMemory

        async def search(self, query: str, *, scope: MemoryScope, k: int, filters: Any) -> list[MemoryHit]:
            self.memory.export_sync(scope)
            return []

    port = Reentrant()
    memory = port.memory = GuardedMemory(port)
    with pytest.raises(UsageError, match=r"await memory\.export"):
        memory.search_sync("x", scope=ANN)
