"""A hybrid search whose query vector comes at once and whose inputs are in RAM runs on the caller's thread.

``SQLiteStore._hybrid_inline``: the same ``search_hits`` in one read transaction on the
thread's own connection (``load=False``), the product on a numpy thread, with the same hits
as the worker's; anything else (nothing kept yet, filters, another store's write, more
vectors than ``INLINE_VECTORS``, an embedder still at work or a blocking one) goes to the
worker, and ``NotCached`` comes before any work is handed to a numpy thread. ``BUY`` is 0
so that a user's words are indexed at its second keyword search of a generation.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from memoryport import CallableEmbedder, MemoryRecord, MemoryScope, MemoryUpdate, SQLiteMemory
from memoryport._records import utcnow
from memoryport.adapters.sqlite import _keyword_user, _search, _store
from memoryport.adapters.sqlite._vectors import NotCached
from memoryport.storekit import embed_unit

from .support import bow_vectors

ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")
S1 = MemoryScope(user_id="ann", session_id="s1")
DIM = 32
WORDS = ["tea", "green", "walk", "river", "book", "piano", "garden", "storm", "lamp", "paint"]
QUERIES = ["tea river", "green storm lamp", "piano", "walk book garden", "When did Ben paint the garden?", "zebra"]


def _embed(texts: list[str]) -> Any:
    return bow_vectors(texts, DIM)


def _unit(query: str) -> Any:
    return asyncio.run(embed_unit(CallableEmbedder(_embed, dim=DIM, name="bow"), [query]))[0]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[bool, bool, str]]]:
    """Each search_hits call of the store as (ran on a worker thread, load, mode)."""
    monkeypatch.setattr(_keyword_user, "BUY", 0.0)
    seen: list[tuple[bool, bool, str]] = []
    real = _search.search_hits

    def spy(*args: Any, **kwargs: Any) -> Any:
        worker = threading.current_thread().name.startswith("memoryport-sqlite")
        seen.append((worker, kwargs.get("load", True), args[4]))
        return real(*args, **kwargs)

    monkeypatch.setattr(_store, "search_hits", spy)
    yield seen


def _records(seed: int, n: int = 200) -> list[MemoryRecord]:
    """Turns of two users in sessions minutes or hours apart, speaker prefixes, some expired, some expiring."""
    rng = random.Random(seed)
    start = datetime(2023, 7, 1, tzinfo=timezone.utc)
    return [
        MemoryRecord(
            scope=MemoryScope(user_id=rng.choice(["ann", "ann", "ben"]), session_id=rng.choice([None, "s1"])),
            text=rng.choice(["", "Ann: ", "Ben: "]) + " ".join(rng.choices(WORDS, k=rng.randint(2, 6))),
            created_at=start + timedelta(days=rng.randrange(10), minutes=rng.choice([rng.randrange(40), 300])),
            expires_at=None if i % 7 else datetime(2024, 1, 1, tzinfo=timezone.utc),
            metadata={"n": i % 3},
        )
        for i in range(n)
    ]


def _warm(memory: Any, scopes: tuple[MemoryScope, ...]) -> None:
    """Searches until each user's timeline and word index are kept (and its vectors are in RAM)."""
    for _ in range(4):
        for scope in scopes:
            memory.search_sync("tea garden", scope=scope, k=5)


def _pairs(hits: Any) -> list[tuple[str, float, str]]:
    return [(h.record.id, h.score, h.signal) for h in hits]


@pytest.mark.parametrize(
    "options",
    [{}, {"previous_weight": 0.3, "min_similarity": 0.1}, {"context_window": 3, "candidates": 20}],
    ids=["default", "previous-floor", "window3"],
)
def test_a_warm_search_runs_here_with_the_workers_hits(
    db_path: str, driver: str, calls: list[Any], options: dict[str, Any]
) -> None:
    embedder = CallableEmbedder(_embed, dim=DIM, name="bow")
    memory = SQLiteMemory(db_path, embedder=embedder, driver=driver, **options)
    try:
        memory.add_sync(_records(len(options)))
        assert memory.search_sync("tea", scope=ANN, k=5).mode == "hybrid"
        assert calls[0] == (True, True, "hybrid")  # nothing kept yet: the worker
        _warm(memory, (ANN, BEN, S1))
        store = memory.store
        for query in QUERIES:
            for scope in (ANN, BEN, S1):
                for k in (1, 5, 12):
                    calls.clear()
                    hits = memory.search_sync(query, scope=scope, k=k)
                    assert hits.mode == "hybrid"
                    assert calls == [(False, False, "hybrid")], (query, scope)
                    qvec = _unit(query)
                    worker = store.db.read(
                        lambda conn, q=query, v=qvec, s=scope, k=k: _search.search_hits(
                            store, conn, q, v, "hybrid", s, k, None
                        )
                    )
                    assert _pairs(hits) == _pairs(worker), (query, scope, k)
    finally:
        memory.close()


def test_what_is_not_in_ram_goes_to_the_worker(
    db_path: str, driver: str, calls: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = CallableEmbedder(_embed, dim=DIM, name="bow")
    memory = SQLiteMemory(db_path, embedder=embedder, driver=driver)
    other = SQLiteMemory(db_path, embedder=embedder, driver=driver, write_behind=False)
    try:
        [okapi] = memory.add_sync([MemoryRecord(scope=ANN, text="the okapi crossed the river")])
        memory.add_sync(_records(3, 60))
        _warm(memory, (ANN,))
        calls.clear()
        assert memory.search_sync("okapi", scope=ANN, k=3)[0].record.id == okapi
        assert calls == [(False, False, "hybrid")]
        # Filters and time ranges: the worker, as for keyword search.
        calls.clear()
        memory.search_sync("okapi", scope=ANN, k=3, filters={"n": 1})
        memory.search_sync("okapi", scope=ANN, k=3, since=utcnow() - timedelta(days=1))
        assert calls == [(True, True, "hybrid"), (True, True, "hybrid")]
        # Another process's write: tried here, NotCached, then the worker reads again (and sees it).
        calls.clear()
        with monkeypatch.context() as patch:
            patch.setattr(memory.store.ann.words.users, "clear", lambda: None)
            patch.setattr(memory.store.ann.words, "clear", lambda: None)
            other.update_sync([MemoryUpdate(id=okapi, text="the giraffe crossed the river")], scope=ANN)
        hits = memory.search_sync("giraffe", scope=ANN, k=3)
        assert hits[0].record.id == okapi and hits[0].record.text == "the giraffe crossed the river"
        assert calls[0] == (False, False, "hybrid") and calls[-1] == (True, True, "hybrid")
        # More vectors than may be ranked here: the worker, without a transaction here.
        _warm(memory, (ANN,))
        calls.clear()
        with monkeypatch.context() as patch:
            patch.setattr(_store, "INLINE_VECTORS", 10)
            memory.search_sync("giraffe", scope=ANN, k=3)
        assert calls == [(True, True, "hybrid")]
    finally:
        memory.close()
        other.close()


def test_an_embedder_at_work_or_blocking_goes_to_the_worker(db_path: str, driver: str, calls: list[Any]) -> None:
    async def later(texts: list[str]) -> Any:
        await asyncio.sleep(0.002)
        return _embed(texts)

    class Blocking:
        name, dim = "bow", DIM

        async def embed(self, texts: list[str]) -> Any:
            return _embed(texts)

        def embed_sync(self, texts: list[str]) -> Any:
            return _embed(texts)

    instant = SQLiteMemory(db_path, embedder=CallableEmbedder(_embed, dim=DIM, name="bow"), driver=driver)
    slow = SQLiteMemory(db_path, embedder=CallableEmbedder(later, dim=DIM, name="bow"), driver=driver)
    blocking = SQLiteMemory(db_path, embedder=Blocking(), driver=driver)
    try:
        instant.add_sync(_records(5, 80))
        for memory in (instant, slow, blocking):
            _warm(memory, (ANN,))
        expected = _pairs(instant.search_sync("tea river", scope=ANN, k=8))
        for memory in (slow, blocking):
            calls.clear()
            assert _pairs(memory.search_sync("tea river", scope=ANN, k=8)) == expected
            assert calls == [(True, True, "hybrid")]
    finally:
        for memory in (instant, slow, blocking):
            memory.close()


def test_expiry_is_checked_against_the_searchs_clock_here(db_path: str, driver: str, calls: list[Any]) -> None:
    memory = SQLiteMemory(db_path, embedder=CallableEmbedder(_embed, dim=DIM, name="bow"), driver=driver)
    try:
        [zebra] = memory.add_sync(
            [MemoryRecord(scope=ANN, text="a zebra crossed", expires_at=utcnow() + timedelta(seconds=3))]
        )
        memory.add_sync(_records(7, 60))
        _warm(memory, (ANN,))
        assert zebra in [h.record.id for h in memory.search_sync("zebra", scope=ANN, k=5)]
        calls.clear()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_search, "utcnow", lambda: utcnow() + timedelta(seconds=5))
            assert zebra not in [h.record.id for h in memory.search_sync("zebra", scope=ANN, k=5)]
        assert calls == [(False, False, "hybrid")]
    finally:
        memory.close()


def test_not_cached_comes_before_any_work_on_a_numpy_thread(
    db_path: str, driver: str, calls: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = SQLiteMemory(db_path, embedder=CallableEmbedder(_embed, dim=DIM, name="bow"), driver=driver)
    try:
        memory.add_sync(_records(9, 80))
        _warm(memory, (ANN,))
        store = memory.store
        submitted: list[Any] = []
        real = store.numpy.submit
        monkeypatch.setattr(store.numpy, "submit", lambda *a, **k: submitted.append(a) or real(*a, **k))
        monkeypatch.setattr(_search, "_ALONE_BELOW", 0)  # (the test's small product, too, on a numpy thread)
        qvec = np.asarray(_unit("tea river"))

        def here(conn: Any) -> Any:
            return _search.search_hits(store, conn, "tea river", qvec, "hybrid", ANN, 5, None, load=False)

        assert store.db.read_nowait(here)  # in RAM: runs, the product on a numpy thread
        assert len(submitted) == 1
        submitted.clear()
        with monkeypatch.context() as patch:
            patch.setattr(_search, "INLINE_VECTORS", 10)  # too many vectors to rank here
            with pytest.raises(NotCached):
                store.db.read_nowait(here)
            patch.setattr(_search, "INLINE_KEYWORD", 10)  # too many records
            with pytest.raises(NotCached):
                store.db.read_nowait(here)
        assert submitted == []
        with pytest.raises(NotCached):  # a user whose timeline nobody keeps
            store.db.read_nowait(
                lambda conn: _search.search_hits(store, conn, "tea", qvec, "hybrid", BEN, 5, None, load=False)
            )
        assert submitted == []
    finally:
        memory.close()
