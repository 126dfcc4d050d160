"""A keyword search whose user's timeline and word index are in RAM and current runs on the caller's thread.

``SQLiteStore._keyword_inline``: the same ``search_hits`` in one read transaction on the
thread's own connection (``load=False``), with the same hits as the worker's; anything
else (nothing kept yet, filters or a time range, another store's write, this store's own
add to append first) goes to the worker. ``BUY`` is 0 so that a user's words are indexed
at its second keyword search of a generation.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from memoryport import MemoryRecord, MemoryScope, MemoryUpdate, SQLiteMemory
from memoryport._records import utcnow
from memoryport.adapters.sqlite import _keyword_user, _search, _store

ANN = MemoryScope(user_id="ann")
BO = MemoryScope(user_id="bo")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[bool, bool]]]:
    """Each search_hits call of the store as (ran on a worker thread, load)."""
    monkeypatch.setattr(_keyword_user, "BUY", 0.0)
    seen: list[tuple[bool, bool]] = []
    real = _search.search_hits

    def spy(*args: Any, **kwargs: Any) -> Any:
        worker = threading.current_thread().name.startswith("memoryport-sqlite")
        seen.append((worker, kwargs.get("load", True)))
        return real(*args, **kwargs)

    monkeypatch.setattr(_store, "search_hits", spy)
    yield seen


def texts(n: int) -> list[str]:
    words = ["tea", "walk", "garden", "book", "river", "stone", "lamp", "quiet"]
    return [f"{words[i % 8]} {words[(i * 3) % 8]} note {i}" for i in range(n)]


def ids(memory: Any, query: str, scope: MemoryScope = ANN, k: int = 5, **kwargs: Any) -> list[str]:
    return [h.record.id for h in memory.search_sync(query, scope=scope, k=k, **kwargs)]


def test_a_warm_search_runs_here_with_the_workers_hits(db_path: str, driver: str, calls: list[Any]) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in texts(60)])
    first = ids(memory, "tea garden")
    assert calls == [(True, True)]  # nothing kept yet: the worker (and no transaction here)
    for _ in range(3):  # the timeline at the 2nd search, its index (rent paid at the 2nd) at the 3rd
        ids(memory, "tea garden")
    assert calls[-1] == (False, False) and "ann" in memory.store.ann.words.users.users
    store = memory.store
    for query in ["tea garden", "river stone lamp", "quiet walk", "note 7", "zebra"]:
        calls.clear()
        here = [(h.record.id, h.score) for h in memory.search_sync(query, scope=ANN, k=10)]
        assert calls == [(False, False)]
        worker = store.db.read(
            lambda conn, q=query: _search.search_hits(store, conn, q, None, "keyword", ANN, 10, None)
        )
        assert here == [(h.record.id, h.score) for h in worker]
    assert ids(memory, "tea garden") == first
    memory.close()


def test_what_is_not_in_ram_goes_to_the_worker(db_path: str, driver: str, calls: list[Any]) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    other = SQLiteMemory(db_path, search_mode="keyword", driver=driver, write_behind=False)
    [okapi] = memory.add_sync([MemoryRecord(scope=ANN, text="the okapi crossed the river")])
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in texts(40)])
    for _ in range(4):
        assert ids(memory, "okapi") == [okapi]
    assert calls[-1] == (False, False)
    calls.clear()
    ids(memory, "okapi", filters={"kind": "x"})
    ids(memory, "okapi", since=utcnow() - timedelta(days=1))
    assert calls == [(True, True), (True, True)]  # filters and time ranges: the worker
    # Another process's write (its erasure of caches does not reach this one): the snapshot's generation is
    # not the timeline's nor the index's; tried here, then the worker reads again.
    calls.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memory.store.ann.words.users, "clear", lambda: None)
        patch.setattr(memory.store.ann.words, "clear", lambda: None)
        other.update_sync([MemoryUpdate(id=okapi, text="the giraffe crossed the river")], scope=ANN)
    assert ids(memory, "okapi") == [] and ids(memory, "giraffe") == [okapi]
    assert calls[0] == (False, False) and calls[1] == (True, True)  # tried here, NotCached, then the worker
    # This store's own add waits for its timeline's next search (appended there, on the worker).
    for _ in range(4):
        ids(memory, "giraffe")
    assert calls[-1] == (False, False)
    calls.clear()
    [gnu] = memory.add_sync([MemoryRecord(scope=ANN, text="a gnu by the river")])
    assert ids(memory, "gnu") == [gnu]
    assert (True, True) in calls
    memory.close()
    other.close()


def test_expiry_erasure_and_other_users_stay_exact_here(db_path: str, driver: str, calls: list[Any]) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    [zebra] = memory.add_sync(
        [MemoryRecord(scope=ANN, text="a zebra crossed", expires_at=utcnow() + timedelta(seconds=3))]
    )
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in texts(30)])
    memory.add_sync([MemoryRecord(scope=BO, text=f"bo's tea zebra {i}") for i in range(20)])
    for _ in range(4):
        assert ids(memory, "zebra") == [zebra]
        ids(memory, "tea", scope=BO)
    calls.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_search, "utcnow", lambda: utcnow() + timedelta(seconds=5))
        assert ids(memory, "zebra") == []  # expired: checked against the search's clock, here too
    assert calls == [(False, False)]
    assert ids(memory, "zebra", k=50) == [zebra]
    bo = memory.search_sync("zebra crossed tea", scope=BO, k=50)
    assert bo and all(h.record.scope.user_id == "bo" for h in bo)
    assert calls[-1] == (False, False)
    memory.delete_sync([zebra], scope=ANN)
    assert ids(memory, "zebra", k=50) == []
    memory.close()


def test_a_large_user_goes_to_the_worker(
    db_path: str, driver: str, calls: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in texts(30)])
    for _ in range(4):
        found = ids(memory, "tea garden")
    assert calls[-1] == (False, False)
    monkeypatch.setattr(_search, "INLINE_KEYWORD", 29)  # more records than that: not on the caller's thread
    calls.clear()
    assert ids(memory, "tea garden") == found
    assert calls == [(False, False), (True, True)]
    memory.close()
