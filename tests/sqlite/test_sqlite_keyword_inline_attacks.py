"""Keyword search on the caller's thread under another store's writes in the same process (session 13's review).

``SQLiteStore._keyword_inline`` answers from the user's timeline and word index in
RAM. Here another store's write-behind log holds adds for the user, and an expiry
passes exactly between two searches: the next search, tried here first, equals
what the worker reads. (Erasures, deletes and purges by another store in the same
process were tried too and held: hits are read from the snapshot and the FTS
rowids are per-user slots, so even a stale timeline shows nothing erased; those
tests stayed green with the generation checks removed, so they are not kept.)
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
from memoryport._records import utcnow
from memoryport.adapters.sqlite import _search

from .test_sqlite_keyword_inline import ANN, BO, calls, texts  # noqa: F401  (calls: the fixture)


def worker_ids(memory: Any, query: str, scope: MemoryScope, k: int) -> list[tuple[str | None, float]]:
    store = memory.store
    return [
        (h.record.id, h.score)
        for h in store.db.read(lambda conn: _search.search_hits(store, conn, query, None, "keyword", scope, k, None))
    ]


def here_ids(memory: Any, query: str, scope: MemoryScope, k: int) -> list[tuple[str | None, float]]:
    return [(h.record.id, h.score) for h in memory.search_sync(query, scope=scope, k=k)]


def add_through_log(other: Any) -> None:
    other.add_sync([MemoryRecord(scope=ANN, text=f"a zebra in the log {i}") for i in range(3)])


def test_another_stores_write_behind_log_is_seen_by_the_next_search_here(
    db_path: str,
    driver: str,
    calls: list[Any],  # noqa: F811
) -> None:
    """Another store's adds waiting in the write-behind log: drained (or left to the worker), never missed."""
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    other = SQLiteMemory(db_path, search_mode="keyword", driver=driver, write_behind=True)
    memory.add_sync([MemoryRecord(scope=ANN, text=f"a zebra crossed {i}") for i in range(5)])
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in texts(30)])
    memory.add_sync([MemoryRecord(scope=BO, text=f"bo's zebra {i}") for i in range(5)])
    for _ in range(4):
        here_ids(memory, "zebra", ANN, 50)
        here_ids(memory, "zebra", BO, 50)
    assert calls[-1] == (False, False)  # warm: tried here
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memory.store.ann.words.users, "clear", lambda: None)
        patch.setattr(memory.store.ann.words, "clear", lambda: None)
        add_through_log(other)
    for scope in (ANN, BO):
        for _ in range(3):
            got = here_ids(memory, "zebra", scope, 50)
            assert got == worker_ids(memory, "zebra", scope, 50)
            assert got == here_ids(other, "zebra", scope, 50)
    assert len(here_ids(memory, "zebra", ANN, 50)) == 8
    memory.close()
    other.close()


def test_expiry_passing_between_two_searches_here(db_path: str, driver: str, calls: list[Any]) -> None:  # noqa: F811
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    soon = utcnow() + timedelta(seconds=30)
    [zebra] = memory.add_sync([MemoryRecord(scope=ANN, text="a zebra crossed", expires_at=soon)])
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in texts(30)])
    for _ in range(4):
        assert [i for i, _ in here_ids(memory, "zebra", ANN, 5)] == [zebra]
    calls.clear()
    with pytest.MonkeyPatch.context() as patch:
        later = soon  # exactly at expiry: expired (expires_at <= now)
        patch.setattr(_search, "utcnow", lambda: later)
        assert here_ids(memory, "zebra", ANN, 5) == [] == worker_ids(memory, "zebra", ANN, 5)
    assert calls[0] == (False, False)
    memory.close()
