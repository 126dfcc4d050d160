"""Keyword search reads its candidates' and neighbours' times from the timeline only when something asks.

When the user's timeline answers the neighbour lookup (no filters, every
candidate held), keyword search leaves ``times`` unread: contextual keys answer
from the timeline's positions, and ``placed`` reads its candidates' from the
timeline. Contextual keys' fallback (``ranking.context_keys``) reads them
through ``_search._Unread``, which must fill exactly what the lookup would have
filled, in the same order. End to end, on stores with several sessions and
agents, expiring records, filters and rids the timeline does not hold, the hits
must equal those of the statements' path (no timeline), with the positions'
answer and with its fallback.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
from memoryport.adapters.sqlite import _keyword_user, _search
from memoryport.adapters.sqlite._rows import NEVER
from memoryport.adapters.sqlite._timeline import Timeline, Timelines, sides_in

from .support import hits_of, statements_hits, timeline_records

WORDS = ["tea", "green", "coffee", "walk", "river", "book", "piano", "garden", "storm", "lamp", "Ann:", "when"]
START = datetime(2023, 5, 1, tzinfo=timezone.utc)


def _line(rng: random.Random, n: int, *, sessions: int, agents: int, mortal: bool) -> Timeline:
    rids = sorted(rng.sample(range(1, 10 * n), n))
    ats, t = [], 10**15
    for _ in range(n):
        t += rng.choice([0, 1, 10**6, 3 * 10**9])  # ties, close turns, new sessions
        ats.append(t)
    session_of = [rng.choice([None, "s1", "s2", "s3"][:sessions]) for _ in range(n)] if sessions > 1 else [None] * n
    agent_of = [rng.choice([None, "bot"]) for _ in range(n)] if agents > 1 else ["bot"] * n
    expires = [rng.choice([NEVER, 5, 10**18]) if mortal else NEVER for _ in range(n)]
    return Timeline(
        gen=1,
        rids=rids,
        ats=ats,
        sessions=session_of,
        agents=agent_of,
        expires=expires,
        texts=[" ".join(rng.choices(WORDS, k=rng.randint(1, 5))) for _ in range(n)],
        at={rid: i for i, rid in enumerate(rids)},
        nbytes=0,
        mortal=mortal,
        uniform=len(set(session_of)) == 1 and len(set(agent_of)) == 1,
    )


@pytest.mark.parametrize("seed", range(8))
def test_unread_times_equal_what_the_lookup_fills(seed: int) -> None:
    rng = random.Random(seed)
    line = _line(
        rng, rng.choice([5, 60, 300]), sessions=rng.choice([1, 3]), agents=rng.choice([1, 2]), mortal=seed % 3 == 0
    )
    for _ in range(40):
        rids = rng.sample(line.rids, rng.randint(1, min(50, len(line.rids))))
        window = rng.choice([1, 2, 3])
        filled: dict[int, Any] = {}
        found = sides_in(line, rids, 7, window=window, scan=16, after=True, times=filled)
        assert found is not None
        near = {rid: [*before, *after] for rid, (before, after) in found.items()}
        assert sides_in(line, rids, 7, window=window, scan=16, after=True, times=None) == found
        times: dict[int, Any] = {}
        unread = _search._Unread(line, near, times)
        assert times == {}  # nothing read until asked
        assert list(unread.items()) == list(filled.items())  # the same entries, in the same order
        assert times is not filled and list(times.items()) == list(filled.items())
        assert len(unread) == len(filled) and list(unread) == list(filled)
        some = rng.choice(list(filled))
        assert unread[some] == filled[some] and some in unread and -1 not in unread


def _records(rng: random.Random, n: int, *, sessions: int, agents: int, mortal: bool) -> list[MemoryRecord]:
    return timeline_records(rng, n, WORDS, START, sessions=sessions, agents=agents, mortal=mortal)


QUERIES = ["tea river", "when did Ann walk", "green storm lamp piano", "Ann: book garden", "coffee"]


def _hits(memory: Any, scope: MemoryScope) -> list[list[tuple[str, float, str]]]:
    return hits_of(memory, scope, QUERIES)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("keys", [True, False], ids=["keys", "no-keys"])
def test_keyword_hits_equal_the_statements_path(
    db_path: str, seed: int, keys: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    shape = {"sessions": [1, 1, 3][seed % 3], "agents": [1, 2][seed % 2], "mortal": seed in (2, 5)}
    memory = SQLiteMemory(db_path, context_key_weight=0.4 if keys else 0.0)
    memory.add_sync(_records(rng, rng.choice([80, 400]), **shape))
    real_of, real_current, real_ranking = Timelines.of, Timelines.current, _search.keyword_ranking
    monkeypatch.setattr(_keyword_user, "BUY", 0.0)  # the word index (and its whole words) bought at once
    scopes = [MemoryScope(user_id="ann"), MemoryScope(user_id="ann", session_id="s1")]
    for scope in scopes:
        _hits(memory, scope)  # builds the timeline and the word index
        warm = _hits(memory, scope)
        expected = statements_hits(monkeypatch, memory, scope, QUERIES)  # the statements' path: times read too
        assert warm == expected
        # Contextual keys' fallback (context_keys on the unread times) gives the same hits.
        monkeypatch.setattr(_search, "context_in", lambda *a, **k: None)
        assert _hits(memory, scope) == expected
        monkeypatch.undo()
        monkeypatch.setattr(_keyword_user, "BUY", 0.0)

        # A timeline missing some of the candidates: the statement answers, and reads their times.
        def holey(real: Any) -> Any:
            def of(self: Timelines, conn: Any, user: str | None) -> Timeline | None:
                line = real(self, conn, user)
                if line is None:
                    return None
                at = {rid: p for rid, p in line.at.items() if rid % 4}
                return dataclasses.replace(line, at=at, words=line.words)

            return of

        monkeypatch.setattr(Timelines, "of", holey(real_of))
        monkeypatch.setattr(Timelines, "current", holey(real_current))
        # (candidates checked by the statements: with the timeline, keyword_ranking keeps only rids it holds)
        monkeypatch.setattr(_search, "keyword_ranking", lambda *a: real_ranking(*a[:8], None, *a[9:]))
        assert _hits(memory, scope) == expected
        monkeypatch.setattr(_search, "keyword_ranking", real_ranking)
        monkeypatch.setattr(Timelines, "of", real_of)
        monkeypatch.setattr(Timelines, "current", real_current)
    memory.close()


@pytest.mark.parametrize("seed", range(8))
def test_neighbours_joined_at_once_equal_the_sides(seed: int) -> None:
    from memoryport.adapters.sqlite._timeline import near_in

    rng = random.Random(seed)
    line = _line(rng, rng.choice([3, 40, 300]), sessions=1, agents=1, mortal=False)
    answered = 0
    for _ in range(60):
        rids = rng.choices(line.rids, k=rng.randint(1, min(50, len(line.rids))))  # repeats too
        if rng.random() < 0.3:
            rids.append(rng.choice(line.rids[:3] + line.rids[-3:]))  # an end: fewer on one side
        window, scan = rng.choice([(1, 16), (2, 16), (3, 16), (2, 1), (20, 16)])
        got = near_in(line, rids, window=window, scan=scan)
        found = sides_in(line, rids, 0, window=window, scan=scan, after=True, times=None)
        assert found is not None
        expected = {rid: [*before, *after] for rid, (before, after) in found.items()}
        if got is None:
            ps = [line.at[rid] for rid in rids]
            reach = min(window, scan)
            assert min(ps) < reach or max(ps) + reach >= len(line.rids)
        else:
            answered += 1
            assert got == expected and list(got) == list(expected)
    assert answered > 10 or len(line.rids) < 10
    assert near_in(line, [*line.rids[5:8], -1], window=2, scan=16) is None  # a rid not held
    for other in (
        _line(rng, 40, sessions=3, agents=1, mortal=False),
        _line(rng, 40, sessions=1, agents=1, mortal=True),
    ):
        assert near_in(other, other.rids[5:8], window=2, scan=16) is None


@pytest.mark.parametrize("seed", range(4))
def test_close_rids_from_positions_equal_the_statement(db_path: str, seed: int) -> None:
    from memoryport.adapters.sqlite._timeline import close_in

    rng = random.Random(seed)
    memory = SQLiteMemory(db_path)
    at = START
    batch = []
    for i in range(rng.choice([30, 300])):
        at += timedelta(seconds=rng.choice([0, 0, 1, 60]))  # ties on created_at, across the scan's end too
        user = rng.choice(["ann", "ann", "ben"])
        batch.append(
            MemoryRecord(
                scope=MemoryScope(user_id=user, session_id=rng.choice([None, "s1"])),
                text=rng.choice(WORDS),
                created_at=at,
                expires_at=at + timedelta(seconds=1) if i % 6 == 0 else None,  # expired: still walked
            )
        )
    memory.add_sync(batch)
    store = memory.store
    conn = store.db.conn()
    store.timelines.of(conn, "ann")
    line = store.timelines.of(conn, "ann")
    assert line is not None
    answered = 0
    for _ in range(80):
        rids = rng.choices(line.rids, k=rng.randint(0, min(60, len(line.rids))))  # repeats too
        if rng.random() < 0.3 and rids:
            p = line.at[rids[0]]  # a neighbour just inside or outside the scan
            rids.append(line.rids[min(p + rng.choice([1, 15, 16, 17]), len(line.rids) - 1)])
        scan = rng.choice([1, 2, 16])
        got = close_in(line, rids, scan=scan)
        assert got is not None
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_search, "NEIGHBOUR_SCAN", scan)
            expected = _search._close(conn, rids)
        assert got == expected, (rids, scan)
        answered += bool(expected)
    assert answered > 20
    ben = next(rid for rid in range(1, 10 * len(batch)) if rid not in line.at and rid <= max(line.rids))
    assert close_in(line, [line.rids[0], ben], scan=16) is None  # another user's rid: the statement's
    memory.close()


@pytest.mark.parametrize("seed", range(3))
def test_keyword_hits_without_contextual_keys_equal_the_statements_path(
    db_path: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    memory = SQLiteMemory(db_path, context_key_weight=0.0)
    memory.add_sync(_records(rng, 300, sessions=[1, 3, 1][seed], agents=1, mortal=seed == 2))
    scope = MemoryScope(user_id="ann")
    calls: list[int] = []
    real_close = _search._close
    monkeypatch.setattr(_search, "_close", lambda *a: calls.append(1) or real_close(*a))
    _hits(memory, scope)
    calls.clear()
    for q in QUERIES:
        memory.search_sync(q, scope=scope, k=8)
    assert not calls  # without filters the positions answered
    warm = _hits(memory, scope)
    assert calls  # filtered searches asked the statement
    monkeypatch.setattr(Timelines, "of", lambda self, conn, user: None)
    monkeypatch.setattr(Timelines, "current", lambda self, conn, user: None)
    assert _hits(memory, scope) == warm
    memory.close()
