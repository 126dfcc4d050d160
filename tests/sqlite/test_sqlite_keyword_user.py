"""A user's words in RAM (``_keyword_user.py``): the same keyword hits as asking FTS5, and gone when they must go.

``BUY`` is set to 0 so that a user is indexed at its second keyword search of a
generation; every ranking is compared with the same search through FTS5
(record, exact score) on random corpora: repeated words, words sharing a stem,
accents, ties, filters, sessions, a user alone in its file (FTS5's ``bm25()``
order) and a user among others (the per-user BM25).
"""

from __future__ import annotations

import importlib
import random
import sys
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from memoryport import MemoryRecord, MemoryScope, MemoryUpdate, SQLiteMemory
from memoryport._records import utcnow
from memoryport.adapters.sqlite import _keyword, _keyword_large, _keyword_user, _search
from memoryport.adapters.sqlite._rows import us
from memoryport.adapters.sqlite._where import Where

ANN = MemoryScope(user_id="ann")
VOCAB = [
    "tea", "walk", "walking", "walked", "garden", "book", "books", "read", "river", "stone", "lamp",
    "café", "cafe", "naïve", "straße", "über", "42", "x7", "quiet", "bright", "the", "a",
]  # fmt: skip


@pytest.fixture
def buy_now(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(_keyword_user, "BUY", 0.0)
    yield


def corpus(n: int, seed: int, vocab: int = len(VOCAB)) -> list[str]:
    rng = random.Random(seed)
    words = VOCAB[:vocab]
    out = []
    for i in range(n):
        text = [rng.choice(words) for _ in range(rng.randint(1, 6))]
        if i % 7 == 0:
            text += [text[0]] * rng.randint(1, 3)  # term frequencies above one
        out.append(" ".join(text).capitalize())
    return out


def queries(seed: int, n: int = 12) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample([*VOCAB, "zebra", "Walks"], rng.randint(1, 5))) for _ in range(n)]


def ranking_of(memory: Any, query: str, scope: MemoryScope, limit: int, filters: Any, *, ram: bool) -> Any:
    """keyword_ranking's (rid, score) and IDFs, with the user's words in RAM (indexed first) or through FTS5."""
    store = memory.store
    users = store.ann.words.users
    now = us(utcnow())

    def run(conn: Any) -> Any:
        line = store.timelines.of(conn, scope.user_id) or store.timelines.of(conn, scope.user_id)
        assert line is not None
        idf: dict[str, float] = {}
        if ram:
            users.paid(scope.user_id, line.gen, 1.0)  # the rent is paid: indexed at this search
        else:
            users.clear()
        got = _keyword.keyword_ranking(conn, "fts5", query, scope, limit, filters, now, idf, line, store.ann.words)
        if ram:
            assert scope.user_id in users.users
        return got, idf

    return store.db.read(run)


def same(memory: Any, scope: MemoryScope, seed: int, filters: Any = None, n: int = 12) -> None:
    for query in queries(seed, n):
        for limit in (1, 5, 50):
            assert ranking_of(memory, query, scope, limit, filters, ram=True) == ranking_of(
                memory, query, scope, limit, filters, ram=False
            ), query


@pytest.mark.parametrize("seed", [1, 2])
def test_a_user_alone_ranks_as_fts5_bm25(db_path: str, driver: str, buy_now: None, seed: int) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    # Few words: many records tie on their score (FTS5's order: rowid) and hold a word several times.
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in corpus(400, seed, vocab=6 + 8 * seed)])
    memory.add_sync([MemoryRecord(scope=ANN, text=" ".join(["tea lamp"] * 70 + ["river"] * 140))])  # 2-byte sizes
    ran: list[Any] = []
    real = _keyword.file_ranking

    def spy(*args: Any, **kwargs: Any) -> Any:
        ran.append(real(*args, **kwargs))
        return ran[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_keyword, "file_ranking", spy)
        same(memory, ANN, seed)
    assert ran and all(r is not None for r in ran)  # every search above took the index
    memory.close()


def test_a_user_among_others_ranks_as_its_per_user_bm25(db_path: str, driver: str, buy_now: None) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    rng = random.Random(3)
    records = [
        MemoryRecord(scope=MemoryScope(user_id="ann", session_id=f"s{i % 12}"), text=t)
        for i, t in enumerate(corpus(240, 3))
    ]
    records += [MemoryRecord(scope=MemoryScope(user_id=f"u{i % 3}"), text=t) for i, t in enumerate(corpus(600, 4))]
    rng.shuffle(records)
    memory.add_sync(records)
    ran: list[Any] = []
    real = _keyword.user_lists

    def spy(*args: Any, **kwargs: Any) -> Any:
        ran.append(real(*args, **kwargs))
        return ran[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_keyword, "user_lists", spy)
        same(memory, ANN, 5)
        same(memory, MemoryScope(user_id="u1"), 6)
        same(memory, MemoryScope(user_id="ann", session_id="s2"), 7, n=6)  # most candidates fail: all are sorted
    assert ran and all(r is not None for r in ran)
    memory.close()


def test_filters_sessions_time_ranges_and_a_larger_share_stay_exact(db_path: str, driver: str, buy_now: None) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    start = utcnow() - timedelta(days=10)
    memory.add_sync(
        [
            MemoryRecord(
                scope=MemoryScope(user_id="ann", session_id=f"s{i % 4}"),
                text=t,
                metadata={"n": i % 5},
                created_at=start + timedelta(minutes=i),
            )
            for i, t in enumerate(corpus(240, 8))
        ]
    )
    same(memory, ANN, 9, Where.of({"n": 2}, None, None), n=5)  # a filter: more of the best checked, then the rows
    same(memory, MemoryScope(user_id="ann", session_id="s1"), 10, n=5)
    same(memory, ANN, 11, Where.of(None, start + timedelta(minutes=200), None), n=5)  # a narrow range: FTS5 itself
    # Another user (ann still holds most of the file): ann's statistics are no longer the file's (FTS5 ranks).
    memory.add_sync([MemoryRecord(scope=MemoryScope(user_id="bo"), text=t) for t in corpus(60, 12)])
    same(memory, ANN, 13, n=5)
    memory.close()


def test_public_searches_are_unchanged_and_the_index_is_bought(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in corpus(300, 14)])
    users = memory.store.ann.words.users
    before = [[(h.record.id, h.score) for h in memory.search_sync(q, scope=ANN, k=10)] for q in queries(15)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_keyword_user, "BUY", 0.0)
        memory.search_sync("tea", scope=ANN, k=3)
        after = [[(h.record.id, h.score) for h in memory.search_sync(q, scope=ANN, k=10)] for q in queries(15)]
    assert "ann" in users.users
    assert after == before
    # Rent or buy: with the default share, searches pay first; a write at every search never builds.
    users.clear()
    for i in range(5):
        memory.add_sync([MemoryRecord(scope=ANN, text=f"note {i} tea")])
        memory.search_sync("tea", scope=ANN, k=3)
    assert not users.users
    memory.close()


def test_the_rent_is_timed_only_through_fts5(db_path: str, driver: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search through FTS5 pays its thread CPU time as rent; one answered by the index reads no clock (a system
    call); one the index cannot answer (a time range) pays again."""
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in corpus(200, 16)])
    users = memory.store.ann.words.users
    clock = _keyword.time.thread_time
    reads: list[float] = []

    def counted() -> float:
        reads.append(clock())
        return reads[-1]

    monkeypatch.setattr(_keyword.time, "thread_time", counted)
    monkeypatch.setattr(_keyword_user, "BUY", 1e9)  # never bought, however long the searches take
    for _ in range(3):  # (the timeline is kept from about the second search on)
        memory.search_sync("tea walk", scope=ANN, k=3)
    assert len(reads) >= 2 and "ann" not in users.users
    assert users.rent["ann"][1] == pytest.approx(sum(reads[1::2]) - sum(reads[0::2]), abs=1e-12)
    monkeypatch.setattr(_keyword_user, "BUY", 0.0)
    memory.search_sync("tea walk", scope=ANN, k=3)  # bought here
    assert "ann" in users.users
    reads.clear()
    for query in queries(17, 6):
        memory.search_sync(query, scope=ANN, k=3)
    assert reads == []
    memory.search_sync("tea", scope=ANN, k=3, since=timedelta(days=1))  # a time range: FTS5, no rent
    assert reads == []
    memory.add_sync([MemoryRecord(scope=MemoryScope(user_id="bob"), text="tea")])
    memory.search_sync("tea walk", scope=ANN, k=3)  # the file's statistics are no longer ann's: FTS5, rent
    assert "ann" in users.users and len(reads) == 2
    assert users.rent["ann"][1] == pytest.approx(reads[1] - reads[0], abs=1e-12)
    memory.close()


def test_erasure_updates_deletes_expiry_and_other_stores_writes(db_path: str, driver: str, buy_now: None) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    # Another store on the file: its writes reach this one as another process's do (the generation moves);
    # it shares no timeline with it.
    other = SQLiteMemory(db_path, search_mode="keyword", driver=driver, write_behind=False)  # its writes: the tables
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in corpus(80, 16)])
    [okapi] = memory.add_sync([MemoryRecord(scope=ANN, text="the okapi crossed the river")])
    users = memory.store.ann.words.users

    def search(query: str) -> list[str]:
        for _ in range(3):  # the timeline, then the index
            hits = memory.search_sync(query, scope=ANN, k=5)
        return [h.record.id for h in hits]

    assert search("okapi") == [okapi] and "ann" in users.users
    other.update_sync([MemoryUpdate(id=okapi, text="the giraffe crossed the river")], scope=ANN)
    assert search("okapi") == [] and search("giraffe") == [okapi]
    [zebra] = other.add_sync([MemoryRecord(scope=ANN, text="a zebra", expires_at=utcnow() + timedelta(seconds=3))])
    assert search("zebra") == [zebra]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_search, "utcnow", lambda: utcnow() + timedelta(seconds=5))
        assert memory.search_sync("zebra", scope=ANN, k=5) == []  # expired: checked at every search
    # An update of this store and an erasure empty the indexes at once (other processes': the generation).
    assert search("giraffe") == [okapi] and users.users
    memory.update_sync([MemoryUpdate(id=okapi, text="the gnu crossed the river")], scope=ANN)
    assert not users.users and not users.tokens
    assert search("gnu") == [okapi] and users.users
    memory.delete_sync([okapi], scope=ANN)
    assert not users.users and not users.rent
    assert search("gnu") == []
    memory.delete_sync(scope=ANN)
    assert not users.users
    assert search("tea") == []
    memory.close()
    other.close()


def test_another_process_write_drops_the_index_at_the_next_search(db_path: str, driver: str, buy_now: None) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    other = SQLiteMemory(db_path, search_mode="keyword", driver=driver, write_behind=False)  # its writes: the tables
    bo = MemoryScope(user_id="bo")
    [okapi] = memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in ["the okapi", *corpus(40, 18)]])[:1]
    memory.add_sync([MemoryRecord(scope=bo, text=t) for t in corpus(40, 19)])
    users = memory.store.ann.words.users
    for scope in (ANN, bo, ANN, bo, ANN, bo):
        memory.search_sync("okapi tea", scope=scope, k=3)
    assert set(users.users) == {"ann", "bo"}
    with pytest.MonkeyPatch.context() as patch:
        # Another process: its erasure does not empty this process's RAM (it shares no caches with it).
        patch.setattr(users, "clear", lambda: None)
        patch.setattr(memory.store.ann.words, "clear", lambda: None)
        other.delete_sync([okapi], scope=ANN)
    assert "ann" in users.users
    memory.search_sync("tea", scope=bo, k=3)  # another user's search: ann's words go (the file's generation moved)
    assert set(users.users) == {"bo"} and users.nbytes == users.users["bo"].nbytes
    assert [h.record.id for h in memory.search_sync("okapi", scope=ANN, k=3)] == []
    memory.close()
    other.close()


def test_the_index_is_bounded(db_path: str, driver: str, buy_now: None) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    users = memory.store.ann.words.users
    for name in ("a", "b", "c"):
        memory.add_sync([MemoryRecord(scope=MemoryScope(user_id=name), text=t) for t in corpus(50, 17)])

    def index(name: str) -> int:
        for _ in range(3):
            memory.search_sync("tea walk", scope=MemoryScope(user_id=name), k=3)
        return users.users[name].nbytes

    a, b = index("a"), index("b")
    assert users.nbytes == a + b
    users.max_bytes = a + b  # room for two: the least recently used goes
    c = index("c")
    assert list(users.users) == ["b", "c"] and users.nbytes == b + c
    memory.close()


def test_a_users_index_never_answers_for_another_user(db_path: str, driver: str, buy_now: None) -> None:
    """Both users indexed in RAM: each search finds its own user's records only, whatever the words."""
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    bo = MemoryScope(user_id="bo")
    memory.add_sync([MemoryRecord(scope=ANN, text=f"ann's secret zebra code {i}") for i in range(30)])
    memory.add_sync([MemoryRecord(scope=bo, text=f"bo likes tea number {i}") for i in range(20)])
    for _ in range(3):  # warm both users' indexes (bought at once here)
        memory.search_sync("tea", scope=bo, k=5)
        memory.search_sync("zebra", scope=ANN, k=5)
    assert {ANN.user_id, bo.user_id} <= set(memory.store.ann.words.users.users)
    assert memory.search_sync("secret zebra code", scope=bo, k=50) == []
    assert memory.search_sync("tea number", scope=ANN, k=50) == []
    mine = memory.search_sync("zebra tea secret likes", scope=bo, k=50)
    assert mine and all(hit.record.scope.user_id == "bo" and "tea" in hit.record.text for hit in mine)
    memory.close()


BUILD = _keyword_user.build  # (the real one: tests count the store's calls)


def same_as_built(memory: Any, scope: MemoryScope) -> Any:
    """The user's index kept in RAM equals one built from its timeline now (postings, exact BM25 terms, lengths)."""
    store = memory.store

    def run(conn: Any) -> Any:
        line = store.timelines.of(conn, scope.user_id)
        kept = store.ann.words.users.users[scope.user_id]
        fresh = BUILD(conn, line)
        assert kept.gen == fresh.gen == line.gen
        assert kept.rids.tolist() == fresh.rids.tolist() and kept.lengths.tolist() == fresh.lengths.tolist()
        assert kept.tokens == fresh.tokens
        for token in {*fresh.terms, *kept.terms, *kept.added}:
            (docs, terms), (want, exact) = kept.postings(token), fresh.postings(token)
            assert docs.tolist() == want.tolist() and terms.tobytes() == exact.tobytes(), token
            assert kept.count(token) == len(want)
        return kept

    return store.db.read(run)


def fts5_hits(memory: Any, query: str, scope: MemoryScope, limit: int) -> Any:
    """keyword_ranking through FTS5 (no word lists: no index), in the same store and snapshot kind."""
    store = memory.store
    now = us(utcnow())

    def run(conn: Any) -> Any:
        idf: dict[str, float] = {}
        line = store.timelines.of(conn, scope.user_id)
        got = _keyword.keyword_ranking(conn, "fts5", query, scope, limit, Where.of(None, None, None), now, idf, line)
        return got, idf

    return store.db.read(run)


def ram_hits(memory: Any, query: str, scope: MemoryScope, limit: int) -> Any:
    store = memory.store
    now = us(utcnow())

    def run(conn: Any) -> Any:
        idf: dict[str, float] = {}
        line = store.timelines.of(conn, scope.user_id)
        words = store.ann.words
        got = _keyword.keyword_ranking(
            conn, "fts5", query, scope, limit, Where.of(None, None, None), now, idf, line, words
        )
        return got, idf

    return store.db.read(run)


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    built: list[int] = []
    real = _keyword_user.build

    def counted(conn: Any, line: Any) -> Any:
        built.append(len(line.rids))
        return real(conn, line)

    monkeypatch.setattr(_keyword_user, "build", counted)
    return built


def test_own_adds_extend_the_users_index(db_path: str, driver: str, buy_now: None, builds: list[int]) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    start = utcnow() - timedelta(days=1)
    texts = corpus(150, 21, vocab=10)
    memory.add_sync(
        [MemoryRecord(scope=ANN, text=t, created_at=start + timedelta(seconds=i)) for i, t in enumerate(texts)]
    )
    users = memory.store.ann.words.users
    for _ in range(3):  # the timeline, then the index
        memory.search_sync("tea walk", scope=ANN, k=5)
    assert builds == [150]
    rounds = [
        ["zebra okapi tea"],  # words new to the file
        ["Tea tea TEA walk", "the quokka walked to the river"],  # a batch; a word held three times
        ["naïve café über straße", "", "42 x7 42"],
        ["books book reading"],
    ]
    at = len(texts)
    for r, batch in enumerate(rounds):
        memory.add_sync(
            [
                MemoryRecord(scope=ANN, text=t or "-", created_at=start + timedelta(seconds=at + i))
                for i, t in enumerate(batch)
            ]
        )
        at += len(batch)
        if r == 2:  # two adds before the next search
            memory.add_sync(
                [MemoryRecord(scope=ANN, text="river stone lamp", created_at=start + timedelta(seconds=at))]
            )
            at += 1
        for query in ["tea", "zebra quokka walk", "café 42", "river books tea walking", "absent"]:
            assert ram_hits(memory, query, ANN, 10) == fts5_hits(memory, query, ANN, 10), query
        kept = same_as_built(memory, ANN)
        assert kept.grown == at - 150
    assert builds == [150]  # extended at each search after an add, never built again
    assert set(users.users) == {"ann"}
    memory.close()


def test_only_own_adds_after_the_users_records_extend_it(
    db_path: str, driver: str, buy_now: None, builds: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    other = SQLiteMemory(db_path, search_mode="keyword", driver=driver, write_behind=False)  # its writes: the tables
    start = utcnow() - timedelta(days=1)
    [okapi, *_] = memory.add_sync(
        [
            MemoryRecord(scope=ANN, text=t, created_at=start + timedelta(seconds=i))
            for i, t in enumerate(["the okapi", *corpus(60, 22)])
        ]
    )
    users = memory.store.ann.words.users

    def search(query: str) -> list[str]:
        for _ in range(3):  # the timeline, then the index (after any write that drops them)
            hits = memory.search_sync(query, scope=ANN, k=5)
        return [h.record.id for h in hits]

    assert search("okapi") == [okapi] and len(builds) == 1
    # Another store's update and add: its records are not this store's adds (the timeline is read again).
    other.update_sync([MemoryUpdate(id=okapi, text="the giraffe")], scope=ANN)
    other.add_sync([MemoryRecord(scope=ANN, text="a gnu", created_at=start + timedelta(hours=1))])
    assert memory.search_sync("okapi", scope=ANN, k=5) == []
    assert search("giraffe") == [okapi] and len(builds) == 2
    same_as_built(memory, ANN)
    # An own add before the user's last record: the timeline is read again, the index built again.
    memory.add_sync([MemoryRecord(scope=ANN, text="an early okapi", created_at=start - timedelta(hours=1))])
    assert len(search("okapi")) == 1 and len(builds) == 3
    same_as_built(memory, ANN)
    # More than GROW_MAX records added since the build: built again.
    monkeypatch.setattr(_keyword_user, "GROW_MAX", 2)
    for i in range(2):
        memory.add_sync([MemoryRecord(scope=ANN, text=f"late okapi {i}", created_at=start + timedelta(hours=2 + i))])
        memory.search_sync("okapi", scope=ANN, k=5)
    assert len(builds) == 3 and users.users["ann"].grown == 2
    memory.add_sync([MemoryRecord(scope=ANN, text="last okapi", created_at=start + timedelta(hours=9))])
    assert len(search("okapi")) == 4 and len(builds) == 4 and users.users["ann"].grown == 0
    same_as_built(memory, ANN)
    # An erasure empties the indexes at once, extended or not.
    memory.add_sync([MemoryRecord(scope=ANN, text="one more okapi", created_at=start + timedelta(hours=10))])
    memory.search_sync("okapi", scope=ANN, k=5)
    assert users.users["ann"].grown == 1
    memory.delete_sync([okapi], scope=ANN)
    assert not users.users
    memory.close()
    other.close()


def test_an_index_grows_only_with_its_own_timeline(db_path: str, driver: str, buy_now: None, builds: list[int]) -> None:
    """Another process's update then add (its writes leave this process's RAM as it is, and the sweep of
    the indexes is left out here): the timeline read again has more records, but not after the same ones."""
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    other = SQLiteMemory(db_path, search_mode="keyword", driver=driver, write_behind=False)  # its writes: the tables
    start = utcnow() - timedelta(days=1)
    texts = ["the okapi", *corpus(40, 23)]
    [okapi, *_] = memory.add_sync(
        [MemoryRecord(scope=ANN, text=t, created_at=start + timedelta(seconds=i)) for i, t in enumerate(texts)]
    )
    users = memory.store.ann.words.users
    for _ in range(3):
        memory.search_sync("okapi", scope=ANN, k=5)
    assert builds == [41]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memory.store.ann.words, "clear", lambda: None)
        patch.setattr(users, "sweep", lambda *args: None)
        other.update_sync([MemoryUpdate(id=okapi, text="the giraffe")], scope=ANN)
        other.add_sync([MemoryRecord(scope=ANN, text="a gnu", created_at=start + timedelta(hours=1))])
        for _ in range(3):
            hits = memory.search_sync("okapi giraffe", scope=ANN, k=5)
    assert [h.record.text for h in hits] == ["the giraffe"] and builds == [41, 42]
    same_as_built(memory, ANN)
    memory.close()
    other.close()


def test_contextual_keys_pay_rent_until_the_index_is_bought(
    db_path: str, driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the user's index (and the whole-word dictionary it brings) is bought, contextual keys search the
    texts: their thread CPU time is rent towards the index, the user's, like a ranking through FTS5; once it is
    bought, neither pays (a clock advancing one second per read makes each step's rent exactly 1.0)."""
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in corpus(200, 21)])
    store = memory.store
    assert _search._keys_on(store)
    users = store.ann.words.users
    ticks = iter(range(1_000_000))
    monkeypatch.setattr(_keyword.time, "thread_time", lambda: float(next(ticks)))
    payers: list[tuple[str, str | None, float]] = []
    pay = users.paid

    def paid(user: str | None, gen: int, seconds: float) -> None:
        payers.append((sys._getframe(1).f_code.co_name, user, seconds))
        pay(user, gen, seconds)

    monkeypatch.setattr(users, "paid", paid)
    monkeypatch.setattr(_keyword_user, "BUY", 1e9)  # never bought
    for query in queries(23, 6):
        memory.search_sync(query, scope=ANN, k=3)
    ranked = [p for p in payers if p[0] == "keyword_ranking"]
    context = [p for p in payers if p[0] == "_context"]
    assert ranked and len(context) == len(ranked) and len(payers) == 2 * len(ranked)
    assert all(user == "ann" and seconds == 1.0 for _, user, seconds in payers)
    assert users.rent["ann"][1] == float(len(payers))
    monkeypatch.setattr(_keyword_user, "BUY", 0.0)
    memory.search_sync("tea walk", scope=ANN, k=3)  # bought here
    assert "ann" in users.users
    payers.clear()
    for query in queries(29, 6):
        memory.search_sync(query, scope=ANN, k=3)
    assert payers == []
    memory.close()


def test_building_an_index_keeps_its_words_tokens(
    db_path: str, driver: str, buy_now: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building a user's index keeps the FTS5 token of each of its whole words (``UserIndexes.warm``): the user's
    next searches tokenize none of their words (none is new), with the same hits and tokens as tokenizing each."""
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in corpus(300, 21)])
    users = memory.store.ann.words.users
    before = [[(h.record.id, h.score) for h in memory.search_sync(q, scope=ANN, k=10)] for q in queries(22)]
    users.clear()
    memory.search_sync("tea", scope=ANN, k=3)  # (BUY 0: rent paid at the first search, indexed at the second)
    memory.search_sync("tea", scope=ANN, k=3)
    assert "ann" in users.users
    kept = dict(users.tokens)
    words = {w.lower() for t in corpus(300, 21) for w in t.split()}
    assert words <= kept.keys()
    each = importlib.import_module(driver).connect(":memory:")
    assert [kept[w] for w in sorted(words)] == [_keyword_large.tokens(each, [w])[0] for w in sorted(words)]
    asked: list[list[str]] = []
    real = _keyword_user.tokens

    def spy(conn: Any, terms: Any) -> Any:
        asked.append(list(terms))
        return real(conn, terms)

    monkeypatch.setattr(_keyword_user, "tokens", spy)
    after = [[(h.record.id, h.score) for h in memory.search_sync(q, scope=ANN, k=10)] for q in queries(22)]
    assert after == before
    assert all(set(terms) <= {"zebra", "walks"} for terms in asked), asked  # only words no record holds
    memory.close()
