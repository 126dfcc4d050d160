"""SQLite timelines: each user's records in RAM answer the neighbour lookups exactly as the statements do.

A timeline (``_timeline.py``) holds one user's records in time order for one
generation. It must give the same neighbour lists, in the same order, and fill
the same times as :func:`_search.sides`' statement (ties, sessions, agents,
expiry, users without an id), leave filters and time ranges to the statement,
answer nothing for rids it does not hold, and never outlive a write of any
kind, from this store, another store on the file, or another process: an
expired, deleted, updated or another user's record never shows.
"""

from __future__ import annotations

import random
import subprocess
import time
from datetime import datetime, timedelta
from typing import Any

import pytest

from memoryport import CallableEmbedder, GuardedMemory, MemoryRecord, MemoryScope, MemoryUpdate, SQLiteMemory
from memoryport._records import utcnow
from memoryport.adapters.sqlite import SQLiteStore, _search
from memoryport.adapters.sqlite._rows import tenant_token, us
from memoryport.adapters.sqlite._timeline import Timelines
from memoryport.adapters.sqlite._where import Where

from .support import WORKER, bow_vectors, python

WORDS = ["tea", "green", "coffee", "walk", "river", "book", "piano", "garden", "storm", "lamp"]
USERS = ["ann", "ann", "ann", "ben", None]


def _records(seed: int, n: int = 500) -> list[MemoryRecord]:
    rng = random.Random(seed)
    now = utcnow()
    out = []
    for i in range(n):
        age = rng.choice([rng.randrange(50), rng.randrange(5_000), 777])  # ties, not in insertion order
        user = rng.choice(USERS)
        out.append(
            MemoryRecord(
                scope=MemoryScope(
                    user_id=user,
                    session_id=rng.choice(["s1", "s2"] if user is None else [None, "s1", "s2"]),
                    agent_id=rng.choice([None, None, "bot"]),
                ),
                text=" ".join(rng.choices(WORDS, k=rng.randint(2, 6))),
                created_at=now - timedelta(seconds=age),
                expires_at=None if i % 7 or user == "ben" else now + timedelta(days=1),  # ben: none
                metadata={"n": i % 4},
            )
        )
    return out


def _line(store: SQLiteStore, conn: Any, user: str | None) -> Any:
    """The user's timeline, built (the second call at a generation builds it)."""
    store.timelines.of(conn, user)
    line = store.timelines.of(conn, user)
    assert line is not None
    return line


@pytest.mark.parametrize("seed", [1, 2])
def test_sides_from_the_timeline_equal_the_statement(db_path: str, driver: str, seed: int) -> None:
    memory = SQLiteMemory(db_path, driver=driver)
    memory.add_sync(_records(seed))
    store, conn = memory.store, memory.store.db.conn()
    rng = random.Random(seed)
    for user in ("ann", "ben", None):
        line = _line(store, conn, user)
        mine = [int(r[0]) for r in conn.execute("SELECT rid FROM records WHERE user_id IS ?", (user,))]
        assert sorted(line.rids) == sorted(mine)
        for now in (us(utcnow()), us(utcnow() + timedelta(days=2))):
            for size, window, after in (
                (1, 1, True),
                (7, 2, True),
                (40, 3, True),
                (len(mine), 2, True),
                (30, 1, False),
            ):
                rids = rng.sample(mine, min(size, len(mine))) * 2  # repeated rids come out once
                expected_times: _search.Times = {}
                expected = _search.sides(conn, rids, None, now, window=window, after=after, times=expected_times)
                times: _search.Times = {}
                found = _search.sides(conn, rids, None, now, window=window, after=after, times=times, line=line)
                assert list(found.items()) == list(expected.items())  # same lists, same order
                assert list(times.items()) == list(expected_times.items())
                assert _search.sides(conn, rids, None, now, window=window, after=after, line=line) == expected
    memory.close()


@pytest.mark.parametrize(("mortal", "later"), [(False, ("s2", "bot")), (True, ("s1", None))])
def test_sides_of_a_user_in_one_scope_equal_the_statement(
    db_path: str, driver: str, mortal: bool, later: tuple[str, str | None]
) -> None:
    """A user whose records all share one session and agent (``Timeline.uniform``): the nearest records are the
    neighbours, with or without expiry; a record of another scope appended makes it an ordinary timeline."""
    memory = SQLiteMemory(db_path, driver=driver)
    rng = random.Random(5)
    start = utcnow()
    scope = MemoryScope(user_id="una", session_id="s1", agent_id="bot")
    memory.add_sync(
        [
            MemoryRecord(
                scope=scope,
                text=f"turn {i}",
                created_at=start - timedelta(seconds=rng.choice([rng.randrange(40), 20])),  # ties
                expires_at=start + timedelta(days=1) if mortal and i % 3 == 0 else None,
            )
            for i in range(90)
        ]
        + [MemoryRecord(scope=MemoryScope(user_id="ben", session_id="s1"), text="other user") for _ in range(5)]
    )
    store = memory.store
    for step in range(2):
        conn = store.db.conn()
        line = _line(store, conn, "una")
        assert line.uniform == (step == 0) and line.mortal == mortal
        mine = list(line.rids)
        for now in (us(start), us(start + timedelta(days=2))):
            for size, window, after in (
                (1, 1, True),
                (9, 2, True),
                (30, 3, True),
                (len(mine), 2, True),
                (20, 1, False),
            ):
                rids = rng.sample(mine, min(size, len(mine)))
                expected_times: _search.Times = {}
                expected = _search.sides(conn, rids, None, now, window=window, after=after, times=expected_times)
                times: _search.Times = {}
                found = _search.sides(conn, rids, None, now, window=window, after=after, times=times, line=line)
                assert list(found.items()) == list(expected.items())
                assert list(times.items()) == list(expected_times.items())
        # A record of another session or agent, after the others (this store's own add): the timeline takes it,
        # no longer in one scope.
        other = MemoryScope(user_id="una", session_id=later[0], agent_id=later[1])
        memory.add_sync([MemoryRecord(scope=other, text="elsewhere")])
        store.db.drain_now()  # the add waits in the write-behind log (the default): into the tables, as a read would
    memory.close()


def test_filters_time_ranges_and_other_users_rids_go_to_the_statement(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver)
    memory.add_sync(_records(3))
    store, conn = memory.store, memory.store.db.conn()
    line = _line(store, conn, "ann")
    ann = [int(r[0]) for r in conn.execute("SELECT rid FROM records WHERE user_id = 'ann'")]
    ben = [int(r[0]) for r in conn.execute("SELECT rid FROM records WHERE user_id = 'ben'")]
    now = us(utcnow() + timedelta(days=2))
    middle = utcnow() - timedelta(seconds=600)
    for filters in (
        Where.of({"n": 1}, None, None),
        Where.of({"n": {"$gte": 2}}, None, None),
        Where.of(None, middle, None),
        Where.of(None, None, middle),
        {"n": 3},
    ):
        rids = ann[:60]
        assert _search.sides(conn, rids, filters, now, window=2, line=line) == _search.sides(
            conn, rids, filters, now, window=2
        )
    # A rid the timeline does not hold (another user's): the statement answers, for every rid.
    mixed = [*ann[:5], *ben[:5]]
    assert _search.sides(conn, mixed, None, now, window=2, line=line) == _search.sides(conn, mixed, None, now, window=2)
    memory.close()


def test_a_timeline_is_built_on_the_second_search_and_dropped_by_any_write(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver, write_behind=False)
    ann = MemoryScope(user_id="ann")
    ids = memory.add_sync([MemoryRecord(scope=ann, text=f"tea {i}") for i in range(5)])
    store = memory.store
    conn = store.db.conn()

    def of() -> Any:
        return store.db.read(lambda c: store.timelines.of(c, "ann"))

    assert of() is None  # the first search at this generation: SQL
    line = of()
    assert line is not None and len(line.rids) == 5
    assert of() is line
    writes = [
        # (backdated: a new last turn is appended instead, see test_own_adds_extend_the_timeline)
        lambda: memory.add_sync([MemoryRecord(scope=ann, text="more tea", created_at=utcnow() - timedelta(days=1))]),
        lambda: memory.update_sync([MemoryUpdate(id=ids[0], text="green tea")], scope=ann),  # no embedder
        lambda: memory.update_sync([MemoryUpdate(id=ids[1], expires_at=utcnow() + timedelta(hours=1))], scope=ann),
        lambda: memory.delete_sync([ids[2]], scope=ann),
        lambda: SQLiteMemory(db_path, driver=driver, write_behind=False).add_sync(
            [MemoryRecord(scope=ann, text="another store")]
        ),
        lambda: subprocess.run(
            [python(), str(WORKER), "add", db_path, driver, "ann", "another process", "0"], check=True
        ),
    ]
    for write in writes:
        gen = int(conn.execute("SELECT gen FROM generations WHERE tenant IS NOT NULL").fetchone()[0])
        write()
        assert int(conn.execute("SELECT gen FROM generations WHERE tenant IS NOT NULL").fetchone()[0]) != gen
        assert of() is None
        line = of()
        texts = {text for (text,) in conn.execute("SELECT text FROM records WHERE user_id = 'ann'")}
        assert line is not None and set(line.texts) == texts
    # Nothing of the user left: its generation row goes, and so does any timeline.
    memory.delete_sync(None, scope=ann)
    assert of() is None and of() is None
    memory.close()


def test_large_users_are_left_to_sql(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver)
    memory.add_sync([MemoryRecord(scope=MemoryScope(user_id="ann"), text=f"tea {i}") for i in range(30)])
    store = memory.store
    store.timelines = Timelines(max_records=29)
    assert store.db.read(lambda c: [store.timelines.of(c, "ann") for _ in range(3)]) == [None, None, None]
    store.timelines = Timelines(max_bytes=10)  # too big to keep: used once, not cached
    lines = store.db.read(lambda c: [store.timelines.of(c, "ann") for _ in range(3)])
    assert lines[0] is None and lines[1] is not None and lines[2] is not None and lines[1] is not lines[2]
    memory.close()


DIM = 32


def _searches(
    memory: GuardedMemory[SQLiteStore], queries: list[str], since: datetime
) -> list[list[tuple[str, float, str]]]:
    out = []
    for scope in (MemoryScope(user_id="ann"), MemoryScope(user_id="ann", session_id="s1"), MemoryScope(user_id="ben")):
        for q in queries:
            for kwargs in ({}, {"filters": {"n": 2}}, {"since": since}):
                hits = memory.search_sync(q, scope=scope, k=10, **kwargs)  # type: ignore[arg-type]
                assert all(scope.covers(h.record.scope) for h in hits)
                out.append([(str(h.record.id), h.score, h.signal) for h in hits])
    return out


@pytest.mark.parametrize("embedder", [False, True], ids=["keyword", "hybrid"])
def test_searches_equal_the_sql_path_through_writes(
    db_path: str, driver: str, embedder: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end, warm timelines and none give the same hits; erased and expired records never show."""
    bow = CallableEmbedder(lambda texts: bow_vectors(texts, DIM), dim=DIM, name="bow") if embedder else None
    memory = SQLiteMemory(db_path, embedder=bow, driver=driver, previous_mode="all", previous_weight=0.3)
    memory.add_sync(_records(4, 200))
    ann = MemoryScope(user_id="ann")
    queries = ["tea river", "green storm lamp piano"]
    real, real_current = Timelines.of, Timelines.current
    since = utcnow() - timedelta(minutes=30)  # fixed: a moving bound would change the hits between runs
    answered = [0]

    def current(self: Timelines, conn: Any, user: str | None) -> Any:
        line = real_current(self, conn, user)
        answered[0] += line is not None
        return line

    def both() -> list[list[tuple[str, float, str]]]:
        monkeypatch.setattr(Timelines, "of", real)
        monkeypatch.setattr(Timelines, "current", current)
        _searches(memory, queries, since)  # warms every timeline
        answered[0] = 0
        warm = _searches(memory, queries, since)
        assert answered[0] > 0  # the warm run did search on the caller's thread from kept timelines
        # The SQL path: no timeline, neither built by a worker (of) nor kept for the caller's thread (current).
        monkeypatch.setattr(Timelines, "of", lambda self, conn, user: None)
        monkeypatch.setattr(Timelines, "current", lambda self, conn, user: None)
        assert _searches(memory, queries, since) == warm
        monkeypatch.setattr(Timelines, "of", real)
        monkeypatch.setattr(Timelines, "current", current)
        return warm

    both()
    found = memory.search_sync("tea", scope=ann, k=5)
    gone = str(found[0].record.id)
    memory.delete_sync([gone], scope=ann)
    assert all(gone not in [hit[0] for hit in hits] for hits in both())
    expiring = str(memory.search_sync("piano", scope=ann, k=1)[0].record.id)
    until = utcnow() + timedelta(seconds=0.5)
    memory.update_sync([MemoryUpdate(id=expiring, expires_at=until)], scope=ann)
    memory.search_sync("piano", scope=ann, k=5)
    assert memory.store.db.read(lambda c: memory.store.timelines.of(c, "ann")) is not None  # warm, then it expires
    time.sleep(max(0.0, (until - utcnow()).total_seconds()) + 0.05)
    assert all(expiring not in [hit[0] for hit in hits] for hits in both())
    memory.update_sync([MemoryUpdate(id=str(found[1].record.id), text="zebra zebra")], scope=ann)
    both()
    assert memory.search_sync("zebra", scope=ann, k=1)[0].record.id == found[1].record.id
    other = SQLiteMemory(db_path, embedder=bow, driver=driver)
    other.add_sync([MemoryRecord(scope=ann, text="tea river " + w, created_at=utcnow()) for w in WORDS])
    other.close()
    both()
    # This store's own new turns join the warm timelines (no rebuild): still the SQL path's hits.
    memory.add_sync([MemoryRecord(scope=ann, text="green tea river piano", created_at=utcnow())])
    assert memory.store.db.read(lambda c: memory.store.timelines.of(c, "ann")) is not None
    both()
    memory.close()


def test_keyword_ranking_with_the_timeline_equals_the_statements(db_path: str, driver: str) -> None:
    """Scope and expiry checked in RAM, words per record kept: the same ranking and IDF as SQL gives."""
    from memoryport.adapters.sqlite._keyword import keyword_ranking

    memory = SQLiteMemory(db_path, driver=driver)
    memory.add_sync(_records(5, 400))
    # Another user holding most of the file: ann's keyword ranking is BM25 over ann's records alone.
    memory.add_sync([MemoryRecord(scope=MemoryScope(user_id="zed"), text=f"tea lamp {i}") for i in range(900)])
    store, conn = memory.store, memory.store.db.conn()
    scopes = [
        MemoryScope(user_id="ann"),
        MemoryScope(user_id="ann", session_id="s1"),
        MemoryScope(user_id="ann", agent_id="bot"),
        MemoryScope(user_id="ben", session_id="s2", agent_id="bot"),
        MemoryScope(user_id="zed"),
    ]
    for scope in scopes:
        line = _line(store, conn, scope.user_id)
        for query in ["tea river", "green storm lamp piano", "walk", "zebra"]:
            for now in (us(utcnow()), us(utcnow() + timedelta(days=2))):
                for filters in (None, Where.of({"n": 1}, None, None)):
                    for limit in (3, 50):
                        idf: dict[str, float] = {}
                        expected = keyword_ranking(conn, "fts5", query, scope, limit, filters, now, idf)
                        for _ in range(2):  # the second time with the words per record kept
                            got_idf: dict[str, float] = {}
                            got = keyword_ranking(conn, "fts5", query, scope, limit, filters, now, got_idf, line)
                            assert got == expected
                            assert got_idf == idf
    memory.close()


def test_word_holders_from_the_timeline_equal_the_texts(
    db_path: str, driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Which records hold each query word, found once per word in the user's texts: what the texts give."""
    from memoryport import ranking
    from memoryport.adapters.sqlite import _timeline

    texts = [
        "Ann: I paint sunsets.",
        "ANN: painting, mostly",
        "Bo: paint_brush and paint-pots",
        "ΟΔΟΣ and Σ: greek",
        "İstanbul trip",
        "naïve café",
        "x2 and 2x, 10:30",
        "-",
        "ann's tea",
        "the river; the lamp",
        "Annie: lamp",
    ]
    rng = random.Random(7)
    memory = SQLiteMemory(db_path, driver=driver, write_behind=False)
    ann, ben = MemoryScope(user_id="ann"), MemoryScope(user_id="ben")
    now = utcnow()
    memory.add_sync(
        [MemoryRecord(scope=ann, text=rng.choice(texts), created_at=now - timedelta(seconds=i)) for i in range(120)]
    )
    memory.add_sync([MemoryRecord(scope=ben, text="ann paint") for _ in range(3)])
    store, conn = memory.store, memory.store.db.conn()
    line = _line(store, conn, "ann")
    by_rid = dict(zip(line.rids, line.texts, strict=True))
    ben_rid = int(conn.execute("SELECT rid FROM records WHERE user_id = 'ben'").fetchone()[0])
    words = ["ann", "paint", "Ann", "οδος", "σ", "café", "x2", "2x", "10", "lamp", "annie", "zebra", "paint_brush", ""]
    # No room to keep a word's holders: they are forgotten and found again (then with room, kept).
    monkeypatch.setattr(_timeline, "_HOLDERS_PER_RECORD", 0)
    monkeypatch.setattr(_timeline, "_HOLDERS_BASE", 0)
    answered = 0
    for i in range(60):
        if i == 20:
            monkeypatch.setattr(_timeline, "_HOLDERS_BASE", 1024)
        rids = rng.sample(line.rids, rng.randint(1, 60))
        asked = rng.sample(words, rng.randint(1, 6))
        expected = ranking._holders(rids, by_rid, asked)
        for _ in range(2):
            got = line.holders(rids, asked)  # None: nothing kept yet (the caller searches the texts)
            assert got is None or got == expected
            answered += got is not None
        if i < 20:
            assert got is None  # no room: nothing is ever kept
    assert answered > 20  # words searched for in as many texts as the user has are kept, then answer
    everything = line.holders(line.rids, words)
    assert everything == ranking._holders(line.rids, by_rid, words)
    assert line.holders([*line.rids[:3], ben_rid], ["ann"]) is None  # another user's record: the caller searches
    assert line.holders(line.rids[:3], ["İstanbul"]) is None  # lower-cased, not letters and digits alone
    memory.close()


def _columns(line: Any) -> tuple[Any, ...]:
    return (
        *(line.gen, line.rids, line.ats, line.sessions, line.agents, line.expires, line.texts, line.at),
        *(line.mortal, line.uniform),
    )


@pytest.mark.parametrize("batch", [1, 12], ids=["inline", "writer"])
def test_own_adds_extend_the_timeline(db_path: str, driver: str, batch: int) -> None:
    """A new turn added by this store joins its user's timeline: the same columns as reading it again."""
    from memoryport.adapters.sqlite._timeline import _read

    memory = SQLiteMemory(db_path, driver=driver, write_behind=False)
    memory.add_sync(_records(8, 120))
    store = memory.store

    def of(user: str | None) -> Any:
        return store.db.read(lambda c: store.timelines.of(c, user))

    def gen(user: str | None) -> int:
        return int(store.db.read(lambda c: c.execute(
            "SELECT gen FROM generations WHERE tenant = ?", (tenant_token(user),)).fetchone()[0]))  # fmt: skip

    def fresh() -> Any:
        at = gen("ann")
        return store.db.read(lambda c: _read(c, "ann", at))

    for user in ("ann", "ben"):
        of(user)
        assert of(user) is not None
    rng = random.Random(batch)
    prefixes = (3, 20, 80)
    for step in range(4):
        now = utcnow()
        before = of("ann")
        assert before is not None
        for prefix in prefixes:
            before.shape(prefix)  # known before the add: carried into the appended timeline
        new = [
            MemoryRecord(
                scope=MemoryScope(user_id=user, session_id="s1" if user is None else rng.choice([None, "s1"])),
                # a longer text and a colon further in at each step: the carried shapes must change
                text=f"new turn {step} {i}" + ("" if i % 2 else f" {'w' * 9 * step}: {'x' * 60 * step}"),
                created_at=now + timedelta(microseconds=i % 3),  # ties on created_at: rid decides
                expires_at=None if i % 2 else now + timedelta(days=1),
            )
            for i, user in enumerate(rng.choice(["ann", "ann", None]) for _ in range(batch))
        ]
        memory.add_sync(new)
        line = of("ann")
        assert line is not None  # no statement, no rebuild: extended in place of the old one
        assert _columns(line) == _columns(fresh())
        if line is not before:
            assert set(line.shapes) == set(prefixes)  # carried, not made again
        assert [line.shape(p) for p in prefixes] == [fresh().shape(p) for p in prefixes]
        assert of("ben") is not None  # untouched
    # A turn written before the last one: read again at the second search, as after any write.
    memory.add_sync(
        [MemoryRecord(scope=MemoryScope(user_id="ann"), text="late", created_at=utcnow() - timedelta(days=3))]
    )
    assert of("ann") is None and of("ann") is not None
    # Another store's add in between: this store's next add must not extend a timeline that missed it.
    other = SQLiteMemory(db_path, driver=driver, write_behind=False)
    other.add_sync([MemoryRecord(scope=MemoryScope(user_id="ann"), text="theirs")])
    memory.add_sync([MemoryRecord(scope=MemoryScope(user_id="ann"), text="mine", created_at=utcnow())])
    assert of("ann") is None
    line = of("ann")
    assert line is not None and "theirs" in line.texts and "mine" in line.texts
    assert _columns(line) == _columns(fresh())
    other.close()
    # Another store's add still in the write-behind log: this store's add drains it first (and so knows it),
    # or the other store's drain thread did (a new generation: read again). Either way the same columns.
    other = SQLiteMemory(db_path, driver=driver, write_behind=True)
    other.add_sync([MemoryRecord(scope=MemoryScope(user_id="ann"), text="logged")])
    memory.add_sync([MemoryRecord(scope=MemoryScope(user_id="ann"), text="mine again", created_at=utcnow())])
    line = of("ann") or of("ann")
    assert line is not None and "logged" in line.texts and "mine again" in line.texts
    assert _columns(line) == _columns(fresh())
    other.close()
    memory.close()


def test_own_adds_wait_for_the_next_search(db_path: str, driver: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An add copies nothing; the user's next search appends what this store added since, whatever the
    timeline's size, unless more than EXTEND_MAX records wait (then it is read again, as after any write)."""
    from memoryport.adapters.sqlite import _timeline
    from memoryport.adapters.sqlite._timeline import _read

    monkeypatch.setattr(_timeline, "EXTEND_MAX", 5)
    memory = SQLiteMemory(db_path, driver=driver)
    ann = MemoryScope(user_id="ann")
    memory.add_sync(
        [MemoryRecord(scope=ann, text=f"tea {i}", created_at=utcnow() - timedelta(hours=1)) for i in range(6)]
    )
    store = memory.store

    def of() -> Any:
        return store.db.read(lambda c: store.timelines.of(c, "ann"))

    def fresh() -> Any:
        at = store.db.read(lambda c: c.execute(
            "SELECT gen FROM generations WHERE tenant = ?", (tenant_token("ann"),)).fetchone()[0])  # fmt: skip
        return store.db.read(lambda c: _read(c, "ann", int(at)))

    of()
    assert of() is not None
    appended = []
    real = _timeline.Timeline.appended

    def spy(self: Any, *args: Any) -> Any:
        appended.append(len(args[1]))
        return real(self, *args)

    monkeypatch.setattr(_timeline.Timeline, "appended", spy)
    for step in range(3):  # three adds, then one search: one append of the three's records
        memory.add_sync([MemoryRecord(scope=ann, text=f"new turn {step}", created_at=utcnow())])
    assert appended == []  # the adds copied nothing
    line = of()
    assert appended == [3]
    assert line is not None and _columns(line) == _columns(fresh())
    assert of() is line  # current: nothing more to append
    # More than EXTEND_MAX records waiting: dropped, read again at the second search.
    memory.add_sync([MemoryRecord(scope=ann, text=f"burst {i}", created_at=utcnow()) for i in range(6)])
    assert of() is None
    line = of()
    assert line is not None and _columns(line) == _columns(fresh())
    # A record waiting for a search that another store's write overtook: read again, never appended.
    memory.add_sync([MemoryRecord(scope=ann, text="mine", created_at=utcnow())])
    SQLiteMemory(db_path, driver=driver).add_sync([MemoryRecord(scope=ann, text="theirs")])
    assert of() is None
    line = of()
    assert line is not None and "theirs" in line.texts and "mine" in line.texts
    assert _columns(line) == _columns(fresh())
    memory.close()


def test_an_erasure_drops_the_records_waiting_for_a_timeline(db_path: str, driver: str) -> None:
    """The texts of this store's adds waiting for the next search leave RAM with an erasure."""
    memory = SQLiteMemory(db_path, driver=driver, write_behind=False)
    ann = MemoryScope(user_id="ann")
    memory.add_sync([MemoryRecord(scope=ann, text=f"tea {i}") for i in range(4)])
    store = memory.store

    def of() -> Any:
        return store.db.read(lambda c: store.timelines.of(c, "ann"))

    of()
    assert of() is not None
    memory.add_sync([MemoryRecord(scope=ann, text="a secret walnut", created_at=utcnow())])
    assert "a secret walnut" in repr(store.timelines._tails)
    memory.delete_sync(scope=ann)
    assert store.timelines._tails == {} and of() is None
    memory.close()


@pytest.mark.parametrize("uniform", [True, False])
def test_sessions_from_the_timeline_group_as_sessions_of(uniform: bool) -> None:
    """Timeline.sessions_of groups any subset of its rids exactly as ranking.sessions_of groups their
    ``((session, agent), created_at / 1e6)``: ties on created_at, steps of exactly the gap and a hair
    either side of it, scopes interleaved (a step counts from the scope's previous rid), rids not held."""
    from memoryport import ranking
    from memoryport.adapters.sqlite._timeline import Timeline

    rng = random.Random(11 + uniform)
    gap = ranking.SESSION_GAP
    for _ in range(200):
        n = rng.randint(1, 60)
        at, ats = 1_700_000_000_000_000, []
        for _ in range(n):
            at += rng.choice([0, 1, 60_000_000, 1_800_000_000, 1_799_999_999, 1_800_000_001, 7_200_000_000])
            ats.append(at)
        rids = rng.sample(range(1, 10_000), n)
        rows = sorted(zip(ats, rids, strict=True))  # (created_at, rid) order, as read
        scopes = (
            [("s", None)] * n
            if uniform
            else [(rng.choice(["s1", "s2", None]), rng.choice([None, "bot"])) for _ in range(n)]
        )
        line = Timeline(
            gen=1,
            rids=[rid for _, rid in rows],
            ats=[t for t, _ in rows],
            sessions=[s for s, _ in scopes],
            agents=[a for _, a in scopes],
            expires=[2**62] * n,
            texts=[""] * n,
            at={rid: i for i, (_, rid) in enumerate(rows)},
            nbytes=0,
            mortal=False,
            uniform=uniform,
        )
        picked = rng.sample(line.rids, rng.randint(0, n))
        rng.shuffle(picked)
        got = line.sessions_of(picked, gap.total_seconds())
        assert got is not None
        when = {
            rid: ((line.sessions[line.at[rid]], line.agents[line.at[rid]]), line.ats[line.at[rid]] / 1e6)
            for rid in picked
        }
        want = ranking.sessions_of(when, gap=gap)

        def groups(numbers: dict[int, int]) -> set[frozenset[int]]:
            out: dict[int, set[int]] = {}
            for rid, number in numbers.items():
                out.setdefault(number, set()).add(rid)
            return {frozenset(members) for members in out.values()}

        assert set(got) == set(picked) and groups(got) == groups(want)
        assert line.sessions_of([*picked, 10_001], gap.total_seconds()) is None
