"""SQLite hybrid search, overlapped: the same hits and scores as the steps run one after the other.

A hybrid search runs its keyword half (and its candidates' neighbours and
times) while the question is embedded or while the vector half runs, and the
session step takes its times from the neighbour lookup instead of a statement
of its own. None of that may change a hit or a score: every search here is
compared with a reference that runs the steps in their plain order (vectors,
keywords, fusion, every candidate's neighbours, the session and date steps
reading their own rows), on data with created_at ties, sessions, agents,
expired records, filters, dates and speakers named in the query and a
question asking when, with an embedder that answers at once, one that takes
a while, and one that fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from memoryport import CallableEmbedder, GuardedMemory, MemoryRecord, MemoryScope, SQLiteMemory, ranking
from memoryport._records import utcnow
from memoryport.adapters.sqlite import SQLiteStore, _search
from memoryport.adapters.sqlite._keyword import keyword_ranking
from memoryport.adapters.sqlite._rows import us
from memoryport.adapters.sqlite._where import Where
from memoryport.storekit import embed_unit

from .support import bow_vectors

WORDS = [
    "tea",
    "green",
    "coffee",
    "walk",
    "river",
    "book",
    "piano",
    "garden",
    "storm",
    "lamp",
    "july",
    "paint",
    "yesterday",
]
QUERIES = [
    "tea river",
    "green storm lamp",
    "piano",
    "walk book garden coffee",
    "what did I paint on 7 July 2023",
    "garden in July 2023",
    "zebra",  # no keyword match: vectors alone
    "When did Ben paint the garden?",  # a speaker named, a question asking when
]
DIM = 32


def _embed(texts: list[str]) -> Any:
    return bow_vectors(texts, DIM)


def _unit(query: str) -> Any:
    """The query's vector as the store computes it."""
    return asyncio.run(embed_unit(CallableEmbedder(_embed, dim=DIM, name="bow"), [query]))[0]


def _records(seed: int) -> list[MemoryRecord]:
    rng = random.Random(seed)
    start = datetime(2023, 7, 1, tzinfo=timezone.utc)
    out = []
    for i in range(400):
        # Clustered timestamps over a few weeks: sessions minutes apart, ties, not in insertion order.
        day = rng.randrange(20)
        minute = rng.choice([rng.randrange(40), rng.randrange(600), 300])
        out.append(
            MemoryRecord(
                scope=MemoryScope(
                    user_id=rng.choice(["ann", "ann", "ann", "ben"]),
                    session_id=rng.choice([None, None, "s1", "s2"]),
                    agent_id=rng.choice([None, None, "bot"]),
                ),
                text=rng.choice(["", "Ann: ", "Ben: "]) + " ".join(rng.choices(WORDS, k=rng.randint(2, 6))),
                created_at=start + timedelta(days=day, minutes=minute),
                # Every 9th record expired long ago (its neighbours skip it).
                expires_at=None if i % 9 else datetime(2024, 1, 1, tzinfo=timezone.utc),
                metadata={"n": i % 4},
            )
        )
    return out


def _reference(
    store: SQLiteStore, query: str, qvec: Any, scope: MemoryScope, k: int, filters: Any
) -> list[tuple[int, float]]:
    """The hybrid steps one after the other, as search ran them before they overlapped."""

    def read(conn: Any) -> list[tuple[int, float]]:
        now = us(utcnow())
        limit = max(k, store.candidates)
        pool = limit * ranking.PREVIOUS_POOL if store.previous_weight else limit
        vector = _search.vector_job(store, conn, qvec, scope, pool, filters, now)()
        idf: dict[str, float] = {}
        keyword = keyword_ranking(conn, store.keyword_index, query, scope, limit, filters, now, idf)
        words = {rid for rid, _ in keyword}
        if store.min_similarity > 0:
            vector = [(rid, cos) for rid, cos in vector if rid in words or cos >= store.min_similarity]
        if store.previous_weight:
            vector = _search.with_previous(
                conn, qvec, vector, filters, now, store.previous_weight, mode=store.previous_mode, gap=store.session_gap
            )[:limit]
        # The neighbours reach as far as the wider of the lift's and contextual keys' windows.
        weight, window = store.context_weight, store.context_window if store.context_weight else 0
        if store.context_key_weight:
            weight, window = max(weight, store.context_key_weight), max(window, store.context_key_window)
        if store.context_key_weight and idf:
            times: dict[int, Any] = {}
            candidates = list(dict.fromkeys(rid for rid, _ in [*keyword, *vector]))
            near = _search.neighbours(conn, candidates, filters, now, weight=weight, window=window, times=times)
            texts = {rid: t[3] for rid, t in times.items()}
            when = {rid: ((t[1], t[2]), t[0] / 1e6) for rid, t in times.items()}
            keyword = ranking.context_keys(
                keyword, near, texts, idf, weight=store.context_key_weight, window=store.context_key_window,
                when=when, gap=store.session_gap, others=[rid for rid, _ in vector],
            )  # fmt: skip
            if store.min_similarity > 0:
                passed = {rid for rid, _ in vector}
                keyword = [(rid, score) for rid, score in keyword if rid in words or rid in passed]
            keyword = keyword[:limit]
        scored = ranking.fuse(keyword, vector)
        near = _search.neighbours(conn, [rid for rid, _ in scored], filters, now, weight=weight, window=window)
        near = {rid: [(o, d) for o, d in found if d <= store.context_window] for rid, found in near.items()}
        ranked = ranking.spread_to_neighbours(scored, near, weight=store.context_weight)
        return _search.placed(conn, query, ranked, store)[:k]

    return store.db.read(read)


def _as_rids(store: SQLiteStore, hits: Sequence[Any]) -> list[tuple[int, float]]:
    conn = store.db.conn()
    rid = {str(i): int(r) for r, i in conn.execute("SELECT rid, id FROM records")}
    return [(rid[str(h.record.id)], float(h.score)) for h in hits]


def _cases() -> list[tuple[str, MemoryScope, Any]]:
    scopes = [MemoryScope(user_id="ann"), MemoryScope(user_id="ann", session_id="s1"), MemoryScope(user_id="ben")]
    filters = [None, {"n": 2}]
    return [(q, s, f) for q in QUERIES for s in scopes for f in filters]


@pytest.mark.parametrize(
    ("options", "slow"),
    [
        ({}, False),
        ({}, True),
        ({"session_weight": 0.0, "date_weight": 0.0}, True),
        ({"previous_weight": 0.3, "min_similarity": 0.2}, False),
        ({"previous_weight": 0.3, "min_similarity": 0.2}, True),
        ({"context_window": 3, "candidates": 20}, True),
        ({"context_weight": 0.0}, False),
    ],
    ids=[
        "default",
        "default-slow",
        "no-session-date-slow",
        "previous-floor",
        "previous-floor-slow",
        "window3-slow",
        "no-neighbours",
    ],
)
def test_hybrid_equals_the_steps_one_after_the_other(
    db_path: str, driver: str, options: dict[str, Any], slow: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    waited: list[bool] = []
    hybrid = _search._hybrid

    def spy(*args: Any, **kwargs: Any) -> Any:
        pending = args[4]
        waited.append(pending is not None and not pending.done())
        return hybrid(*args, **kwargs)

    monkeypatch.setattr(_search, "_hybrid", spy)

    async def later(texts: list[str]) -> Any:
        await asyncio.sleep(0.003)  # long enough for the worker to start on the keyword half
        return _embed(texts)

    embedder = CallableEmbedder(later if slow else _embed, dim=DIM, name="bow")
    memory: GuardedMemory[SQLiteStore] = SQLiteMemory(db_path, embedder=embedder, driver=driver, **options)
    try:
        memory.add_sync(_records(len(options) + slow))
        store = memory.store
        for query, scope, filters in _cases():
            hits = memory.search_sync(query, scope=scope, k=10, filters=filters)
            assert hits.mode == "hybrid"
            qvec = _unit(query)
            assert _as_rids(store, hits) == _reference(store, query, qvec, scope, 10, filters), (query, scope, filters)
        # A time range goes through the port as a Where; compare the port's own path with the reference.
        since = datetime(2023, 7, 5, tzinfo=timezone.utc)
        where = Where.of(None, since, None)
        for query in QUERIES:
            ann = MemoryScope(user_id="ann")
            hits = asyncio.run(store.search(query, scope=ann, k=10, filters=None, since=since))
            assert _as_rids(store, hits) == _reference(store, query, _unit(query), ann, 10, where)
        # The slow embedder was still at work when the keyword half started; the instant one never.
        assert any(waited) if slow else not any(waited)
    finally:
        memory.close()


def test_failing_embedder_ranks_like_keyword_search(
    db_path: str, driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The embedder fails while the keyword half runs: the hits are keyword search's, mode ``keyword``, logged."""

    async def broken(texts: list[str]) -> Any:
        await asyncio.sleep(0.002)
        raise RuntimeError("model gone")

    # Both named alike: one file remembers one embedder.
    hybrid = SQLiteMemory(db_path, embedder=CallableEmbedder(broken, dim=DIM, name="bow"), driver=driver)
    working = CallableEmbedder(_embed, dim=DIM, name="bow")
    keyword = SQLiteMemory(db_path, driver=driver, search_mode="keyword", embedder=working)
    try:
        keyword.add_sync(_records(9))  # the broken one cannot add
        for query, scope, filters in _cases():
            got = hybrid.search_sync(query, scope=scope, k=10, filters=filters)
            want = keyword.search_sync(query, scope=scope, k=10, filters=filters)
            assert got.mode == "keyword"
            assert [(h.record.id, h.score, h.signal) for h in got] == [(h.record.id, h.score, h.signal) for h in want]
        assert "the embedder failed during search (EmbeddingError)" in caplog.text
    finally:
        hybrid.close()
        keyword.close()


def test_cancelled_search_never_leaves_a_worker_waiting(db_path: str, driver: str) -> None:
    """A search cancelled while its question is embedded releases the worker that waits for the vector."""
    release = asyncio.Event()

    async def stuck(texts: list[str]) -> Any:
        if texts == ["tea river"]:  # the question, not the records added
            await release.wait()
        return _embed(texts)

    async def main() -> None:
        memory = SQLiteMemory(
            db_path, embedder=CallableEmbedder(stuck, dim=DIM, name="stuck"), driver=driver, workers=1
        )
        try:
            await memory.add(_records(3)[:50])
            ann = MemoryScope(user_id="ann")
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(memory.search("tea river", scope=ann, k=5), 0.2)
            # The only worker is free again: a count (no embedding) answers at once.
            start = time.perf_counter()
            assert await asyncio.wait_for(memory.count(scope=ann), 10) > 0
            assert time.perf_counter() - start < 10
            release.set()
            hits = await asyncio.wait_for(memory.search("tea river", scope=ann, k=5), 10)
            assert hits.mode == "hybrid"
        finally:
            await memory.aclose()

    asyncio.run(main())


@pytest.mark.parametrize(
    "options",
    [{}, {"speaker_weight": 0.9, "time_weight": 0.6, "date_weight": 1.0}, {"session_weight": 0.0}],
    ids=["default", "heavy-lifts", "no-sessions"],
)
def test_later_steps_on_the_head_only_give_the_same_k_best(
    db_path: str, driver: str, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The date, speaker and time steps run only on the candidates that can still reach the k best.

    Asked for 1, 3, 10 and 60 hits, every search equals the reference (every step on every
    candidate, then the k best), and the head left to those steps is shorter than the whole
    ranking in some searches: the comparison is not vacuous.
    """
    cuts: list[tuple[int, int]] = []
    within = ranking.within_reach

    def spy(scored: Any, k: int, lift: float, **options: Any) -> Any:
        head = within(scored, k, lift, **options)
        cuts.append((len(scored), len(head)))
        return head

    monkeypatch.setattr(ranking, "within_reach", spy)
    sessions: list[tuple[int, int]] = []
    boost = ranking.session_boost

    def session_spy(scored: Any, when: Any, **options: Any) -> Any:
        head = boost(scored, when, **options)
        sessions.append((len(scored), len(head)))
        return head

    monkeypatch.setattr(ranking, "session_boost", session_spy)
    embedder = CallableEmbedder(_embed, dim=DIM, name="bow")
    memory: GuardedMemory[SQLiteStore] = SQLiteMemory(db_path, embedder=embedder, driver=driver, **options)
    try:
        memory.add_sync(_records(21))
        store = memory.store
        for k in (1, 3, 10, 60):
            for query, scope, filters in _cases():
                hits = memory.search_sync(query, scope=scope, k=k, filters=filters)
                want = _reference(store, query, _unit(query), scope, k, filters)
                assert _as_rids(store, hits) == want, (k, query, scope, filters)
        assert cuts and any(head < whole for whole, head in cuts)
        assert all(head >= 1 for _, head in cuts)
        if options.get("session_weight", 1.0):
            # the session step too runs on the head only in some searches (and on all in others)
            assert any(head < whole for whole, head in sessions) and any(head == whole for whole, head in sessions)
    finally:
        memory.close()


class Blocking:
    """An embedder with a blocking ``embed_sync`` beside ``embed``, as LocalEmbedder has: hybrid search runs
    ``embed_sync`` in a thread that hands the vector to the worker itself (no hop through the event loop)."""

    name = "bow"
    dim = DIM

    def __init__(self, *, fail: bool = False, gate: threading.Event | None = None) -> None:
        self.fail, self.gate, self.calls = fail, gate, 0

    async def embed(self, texts: Sequence[str]) -> Any:
        return _embed(list(texts))

    def embed_sync(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        if self.gate is not None:
            self.gate.wait(10)
        time.sleep(0.003)  # long enough for the worker to start on the keyword half
        if self.fail:
            raise RuntimeError("model gone")
        return _embed(list(texts))


def test_blocking_embedder_gives_the_same_hits(db_path: str, driver: str, monkeypatch: pytest.MonkeyPatch) -> None:
    waited: list[bool] = []
    hybrid = _search._hybrid

    def spy(*args: Any, **kwargs: Any) -> Any:
        pending = args[4]
        waited.append(pending is not None and not pending.done())
        return hybrid(*args, **kwargs)

    monkeypatch.setattr(_search, "_hybrid", spy)
    embedder = Blocking()
    memory: GuardedMemory[SQLiteStore] = SQLiteMemory(db_path, embedder=embedder, driver=driver)
    try:
        memory.add_sync(_records(11))
        assert embedder.calls == 0  # adds embed through the port's async embed
        for query, scope, filters in _cases():
            hits = memory.search_sync(query, scope=scope, k=10, filters=filters)
            assert hits.mode == "hybrid"
            want = _reference(memory.store, query, _unit(query), scope, 10, filters)
            assert _as_rids(memory.store, hits) == want, (query, scope, filters)
        assert embedder.calls == len(_cases()) and any(waited)
    finally:
        memory.close()


def test_blocking_embedder_that_fails_ranks_like_keyword_search(
    db_path: str, driver: str, caplog: pytest.LogCaptureFixture
) -> None:
    hybrid = SQLiteMemory(db_path, embedder=Blocking(fail=True), driver=driver)
    keyword = SQLiteMemory(db_path, driver=driver, search_mode="keyword", embedder=Blocking())
    try:
        keyword.add_sync(_records(12))
        for query, scope, filters in _cases():
            got = hybrid.search_sync(query, scope=scope, k=10, filters=filters)
            want = keyword.search_sync(query, scope=scope, k=10, filters=filters)
            assert got.mode == "keyword"
            assert [(h.record.id, h.score, h.signal) for h in got] == [(h.record.id, h.score, h.signal) for h in want]
        assert "the embedder failed during search (EmbeddingError)" in caplog.text
    finally:
        hybrid.close()
        keyword.close()


def test_cancelled_search_with_a_blocking_embedder_never_leaves_a_worker_waiting(db_path: str, driver: str) -> None:
    gate = threading.Event()
    embedder = Blocking(gate=gate)

    async def main() -> None:
        memory = SQLiteMemory(db_path, embedder=embedder, driver=driver, workers=1)
        try:
            await memory.add(_records(3)[:50])
            ann = MemoryScope(user_id="ann")
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(memory.search("tea river", scope=ann, k=5), 0.2)
            start = time.perf_counter()
            assert await asyncio.wait_for(memory.count(scope=ann), 10) > 0
            assert time.perf_counter() - start < 10
            gate.set()  # the embedding thread finishes: its late vector goes nowhere, without an error
            hits = await asyncio.wait_for(memory.search("tea river", scope=ann, k=5), 10)
            assert hits.mode == "hybrid"
        finally:
            gate.set()
            await memory.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("slow", [False, True], ids=["vector-first", "vector-late"])
def test_hybrid_with_the_product_in_two_parts_gives_the_same_hits(
    db_path: str, driver: str, slow: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every product split in two (SPLIT_FROM lowered): on the numpy threads beside the keyword half (the vector
    is there first), or here and on a numpy thread (it comes after the keyword half): the reference's hits."""
    from memoryport.adapters.sqlite import _vectors

    monkeypatch.setattr(_search, "SPLIT_FROM", 0)
    monkeypatch.setattr(_search, "_ALONE_BELOW", 0)  # (the test's products are small)
    split: list[int] = []
    products = _vectors.Ranking.products

    def spy(self: Any, parts: int) -> Any:
        found = products(self, parts)
        split.append(len(found))
        return found

    monkeypatch.setattr(_vectors.Ranking, "products", spy)

    async def later(texts: list[str]) -> Any:
        await asyncio.sleep(0.003)
        return _embed(texts)

    embedder = CallableEmbedder(later if slow else _embed, dim=DIM, name="bow")
    memory: GuardedMemory[SQLiteStore] = SQLiteMemory(db_path, embedder=embedder, driver=driver)
    try:
        memory.add_sync(_records(4))
        store = memory.store
        for query, scope, filters in list(_cases())[::3]:  # a third of them: under a second
            hits = memory.search_sync(query, scope=scope, k=10, filters=filters)
            assert _as_rids(store, hits) == _reference(store, query, _unit(query), scope, 10, filters), (query, scope)
        assert split and all(n == 2 for n in split)
    finally:
        memory.close()


@pytest.mark.parametrize("how", ["at-once", "suspends", "fails-at-once", "fails-later", "timeout-scope"])
def test_the_query_is_embedded_in_the_searchs_own_task(db_path: str, driver: str, how: str) -> None:
    """An async embedder's coroutine runs in the search's own task, from its first step to its end: one that
    answers at once costs no task (nor an event-loop cycle); one that waits goes on in the same task (an
    ``asyncio.timeout`` it enters is left in the task that entered it); one that fails leaves keyword search's
    hits, mode ``keyword``. The hits equal the reference's (or keyword search's) whichever it is."""
    tasks: list[Any] = []

    async def embedder_fn(texts: list[str]) -> Any:
        if texts != ["tea river"] and not texts[0].startswith("what"):
            return _embed(texts)  # (the records added)
        tasks.append(asyncio.current_task())
        if how in ("suspends", "fails-later"):
            await asyncio.sleep(0.003)
            tasks.append(asyncio.current_task())
        if how == "timeout-scope":
            async with asyncio.timeout(5):  # bound to the task that enters it
                await asyncio.sleep(0.002)
            tasks.append(asyncio.current_task())
        if how.startswith("fails"):
            raise RuntimeError("model gone")
        return _embed(texts)

    async def main() -> None:
        memory = SQLiteMemory(db_path, embedder=CallableEmbedder(embedder_fn, dim=DIM, name="bow"), driver=driver)
        keyword = SQLiteMemory(
            db_path, embedder=CallableEmbedder(embedder_fn, dim=DIM, name="bow"), driver=driver, search_mode="keyword"
        )
        try:
            await memory.add(_records(5))
            store = memory.store
            for query in ["tea river", "what about the garden"]:
                ann = MemoryScope(user_id="ann")
                tasks.clear()
                hits = await memory.search(query, scope=ann, k=10)
                assert tasks and all(task is asyncio.current_task() for task in tasks), how
                if how.startswith("fails"):
                    want = await keyword.search(query, scope=ann, k=10)
                    assert hits.mode == "keyword"
                    assert [(h.record.id, h.score) for h in hits] == [(h.record.id, h.score) for h in want]
                else:
                    assert hits.mode == "hybrid"
                    qvec = await asyncio.to_thread(_unit, query)
                    want_rids = await asyncio.to_thread(_reference, store, query, qvec, ann, 10, None)
                    assert _as_rids(store, hits) == want_rids
        finally:
            await memory.aclose()
            await keyword.aclose()

    if how == "timeout-scope" and not hasattr(asyncio, "timeout"):
        pytest.skip("asyncio.timeout: Python 3.11+")
    asyncio.run(main())


class _SlowPool:
    """A numpy pool whose threads take each job ``delay`` seconds late (a busy or slow-waking pool), recording
    in ``events`` when a job is taken."""

    def __init__(self, pool: Any, delay: float, events: list[str]) -> None:
        self.pool, self.delay, self.events = pool, delay, events

    def submit(self, fn: Any, *args: Any) -> Any:
        def late() -> Any:
            time.sleep(self.delay)
            self.events.append("taken")
            return fn(*args)

        return self.pool.submit(late)

    def shutdown(self, wait: bool = True) -> None:
        self.pool.shutdown(wait=wait)


@contextlib.contextmanager
def _behind_a_pool(
    db_path: str, driver: str, seed: int, delay: float, events: list[str]
) -> Iterator[tuple[GuardedMemory[SQLiteStore], SQLiteStore]]:
    """A hybrid memory holding ``_records(seed)`` whose numpy pool takes each job ``delay`` seconds late."""
    memory: GuardedMemory[SQLiteStore] = SQLiteMemory(
        db_path, embedder=CallableEmbedder(_embed, dim=DIM, name="bow"), driver=driver
    )
    try:
        memory.add_sync(_records(seed))
        store = memory.store
        store.numpy = _SlowPool(store.numpy, delay, events)  # type: ignore[assignment]
        yield memory, store
    finally:
        memory.close()


@pytest.mark.parametrize("busy", [False, True], ids=["taken", "busy-pool"])
def test_the_product_is_taken_before_the_keyword_half_unless_the_pool_is_busy(
    db_path: str, driver: str, busy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hybrid search waits until a numpy thread has taken its product before it runs its keyword half (pure
    Python, which holds the GIL the thread needs to start), at most ``_BEGIN_WAIT``: with a thread that comes
    late, the keyword half starts after it when the wait is long enough, before it when it is not (a busy pool:
    the search goes on). Either way the reference's hits, and the scores are ranked on the search's own
    thread."""
    monkeypatch.setattr(_search, "_ALONE_BELOW", 0)  # the test's small products on a numpy thread too
    monkeypatch.setattr(_search, "_BEGIN_WAIT", 0.001 if busy else 30.0)
    events: list[str] = []
    ranked_on: list[str] = []
    real_ranking = _search.keyword_ranking

    def keyword_half(*args: Any, **kwargs: Any) -> Any:
        events.append("keyword")
        return real_ranking(*args, **kwargs)

    monkeypatch.setattr(_search, "keyword_ranking", keyword_half)
    real_call = _search.Ranking.__call__

    def ranked(self: Any) -> Any:
        ranked_on.append(threading.current_thread().name)
        return real_call(self)

    monkeypatch.setattr(_search.Ranking, "__call__", ranked)
    # (busy: the thread comes 0.15 s late, 150 times the search's wait: the order cannot flip on a slow machine)
    with _behind_a_pool(db_path, driver, 5, 0.15 if busy else 0.03, events) as (memory, store):
        for query, scope, filters in list(_cases())[::4]:
            events.clear()
            hits = memory.search_sync(query, scope=scope, k=10, filters=filters)
            expected = ["keyword", "taken"] if busy else ["taken", "keyword"]
            assert events[:2] == expected, (query, events)
            events.clear()
            assert _as_rids(store, hits) == _reference(store, query, _unit(query), scope, 10, filters), (query, scope)
    assert ranked_on and not any(name.startswith("memoryport-sqlite-numpy") for name in ranked_on)


def test_a_small_product_runs_on_the_searchs_own_thread(db_path: str, driver: str) -> None:
    """Below ``_ALONE_BELOW`` floats the product takes less than a hop to a numpy thread: none is asked."""
    events: list[str] = []
    with _behind_a_pool(db_path, driver, 6, 0.0, events) as (memory, store):
        for query, scope, filters in list(_cases())[::4]:
            hits = memory.search_sync(query, scope=scope, k=10, filters=filters)
            assert _as_rids(store, hits) == _reference(store, query, _unit(query), scope, 10, filters), (query, scope)
    assert events == []
