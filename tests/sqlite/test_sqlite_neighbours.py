"""SQLite neighbour step: the keyword shortcut (links among the candidates only) finds every such link.

``neighbours(..., among=True)`` skips the candidates with no other candidate
among their user's nearest ``NEIGHBOUR_SCAN`` records. Whatever the layout
(created_at ties, out-of-order timestamps, sessions and agents interleaved,
expired records, filters, other users), the links between candidates must be
exactly those of the full lookup, and keyword search must rank as it did.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from memoryport import GuardedMemory, MemoryRecord, MemoryScope, SQLiteMemory, ranking
from memoryport._records import utcnow
from memoryport.adapters.sqlite import SQLiteStore, _search
from memoryport.adapters.sqlite._rows import us
from memoryport.adapters.sqlite._search import NEIGHBOUR_SCAN, neighbours
from memoryport.adapters.sqlite._where import Where

WORDS = ["tea", "green", "coffee", "walk", "river", "book", "piano", "garden", "storm", "lamp"]


def _fill(db_path: str, driver: str, seed: int) -> GuardedMemory[SQLiteStore]:
    rng = random.Random(seed)
    memory = SQLiteMemory(db_path, driver=driver)
    now = utcnow()
    records = []
    for i in range(600):
        # Clustered timestamps with ties, not in insertion order.
        age = rng.choice([rng.randrange(50), rng.randrange(5_000), 777])
        records.append(
            MemoryRecord(
                scope=MemoryScope(
                    user_id=rng.choice(["ann", "ann", "ann", "ben"]),
                    session_id=rng.choice([None, "s1", "s2"]),
                    agent_id=rng.choice([None, None, "bot"]),
                ),
                text=" ".join(rng.choices(WORDS, k=rng.randint(2, 6))),
                created_at=now - timedelta(seconds=age),
                expires_at=None if i % 11 else now + timedelta(days=1),  # expired two days on
                metadata={"n": i % 5},
            )
        )
    memory.add_sync(records)
    return memory


def _links(near: dict[int, list[tuple[int, int]]], among: set[int]) -> dict[int, list[tuple[int, int]]]:
    out = {rid: [(o, d) for o, d in pairs if o in among] for rid, pairs in near.items() if rid in among}
    return {rid: pairs for rid, pairs in out.items() if pairs}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_links_among_candidates_match_the_full_lookup(db_path: str, driver: str, seed: int) -> None:
    memory = _fill(db_path, driver, seed)
    conn = memory.store.db.conn()
    rng = random.Random(seed)
    all_rids = [int(r[0]) for r in conn.execute("SELECT rid FROM records")]
    now = us(utcnow() + timedelta(days=2))  # some records have expired by then
    for filters in (None, Where.of({"n": 1}, None, None), Where.of({"n": {"$gte": 2}}, None, None)):
        for size in (2, 5, 30, 120, 400):
            rids = rng.sample(all_rids, size)
            full = neighbours(conn, rids, filters, now, weight=0.4, window=2)
            short = neighbours(conn, rids, filters, now, weight=0.4, window=2, among=True)
            # Every rid the shortcut keeps has its full list; the links among candidates are the same.
            assert all(short[rid] == full[rid] for rid in short)
            assert _links(short, set(rids)) == _links(full, set(rids))
            # At most one candidate: no link possible.
            assert neighbours(conn, rids[:1], filters, now, weight=0.4, window=2, among=True) == {}


def test_dense_candidates_all_linked(db_path: str, driver: str) -> None:
    """Consecutive records of one scope: every candidate has another within the scan."""
    memory = SQLiteMemory(db_path, driver=driver)
    now = utcnow()
    ann = MemoryScope(user_id="ann")
    memory.add_sync(
        [MemoryRecord(scope=ann, text=f"tea {i}", created_at=now - timedelta(seconds=100 - i)) for i in range(40)]
    )
    conn = memory.store.db.conn()
    rids = [int(r[0]) for r in conn.execute("SELECT rid FROM records ORDER BY rid")][:: NEIGHBOUR_SCAN - 1]
    short = neighbours(conn, rids, None, us(utcnow()), weight=0.4, window=2, among=True)
    assert set(short) == set(rids)


@pytest.mark.parametrize("seed", [4, 5])
def test_keyword_search_ranks_as_with_every_neighbour(
    db_path: str, driver: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end: the same hits, scores and order as the full neighbour lookup gives."""
    memory = _fill(db_path, driver, seed)
    ann = MemoryScope(user_id="ann")
    queries = ["tea river", "green storm lamp", "piano", "walk book garden coffee"]
    scopes = [ann, MemoryScope(user_id="ann", session_id="s1"), MemoryScope(user_id="ben")]

    def run() -> list[list[tuple[str, float]]]:
        out = []
        for scope in scopes:
            for q in queries:
                for filters in (None, {"n": 2}):
                    hits = memory.search_sync(q, scope=scope, k=10, filters=filters)
                    out.append([(h.record.id, round(h.score, 12)) for h in hits])
        return out

    fast = run()

    full = _search.neighbours

    def every(*args: object, **kwargs: object) -> object:
        kwargs["among"] = False
        return full(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_search, "neighbours", every)
    assert run() == fast
    assert ranking.NEIGHBOUR_WEIGHT > 0  # the lift is on by default, so the comparison means something


def _reference_sides(
    conn: object, rids: list[int], filters: Where | None, now: int, window: int
) -> tuple[dict[int, tuple[list[tuple[int, int]], list[tuple[int, int]]]], dict[int, tuple[object, ...]]]:
    """The neighbour lookup by brute force in Python: every row read, the user's records sorted by time."""
    rows = {
        int(r[0]): r
        for r in conn.execute(  # type: ignore[attr-defined]
            "SELECT rid, user_id, session_id, agent_id, created_at, expires_at, text, "
            "(SELECT json_extract(metadata, '$.n') FROM records x WHERE x.rid = records.rid) FROM records"
        )
    }
    by_user: dict[object, list[int]] = {}
    for rid, row in sorted(rows.items(), key=lambda kv: (kv[1][4], kv[0])):
        by_user.setdefault(row[1], []).append(rid)

    def passes(c: tuple[object, ...], o: tuple[object, ...]) -> bool:
        if (o[2], o[3]) != (c[2], c[3]) or not (o[5] is None or o[5] > now):  # type: ignore[operator]
            return False
        wanted = (filters.filters or {}).get("n") if filters is not None else None
        if wanted is None:
            return True
        return o[7] == wanted if not isinstance(wanted, dict) else o[7] >= wanted["$gte"]  # type: ignore[operator]

    out: dict[int, tuple[list[tuple[int, int]], list[tuple[int, int]]]] = {}
    times: dict[int, tuple[object, ...]] = {}
    for rid in rids:
        c = rows[rid]
        line = by_user[c[1]]
        at = line.index(rid)
        earlier = line[max(0, at - NEIGHBOUR_SCAN) : at][::-1]
        later = line[at + 1 : at + 1 + NEIGHBOUR_SCAN]
        b = [o for o in earlier if passes(c, rows[o])][:window]
        a = [o for o in later if passes(c, rows[o])][:window]
        out[rid] = ([(o, d) for d, o in enumerate(b, 1)], [(o, d) for d, o in enumerate(a, 1)])
        for o in [rid, *b, *a]:
            times[o] = (rows[o][4], rows[o][2], rows[o][3], rows[o][6])
    return out, times


@pytest.mark.parametrize("seed", [6, 7])
def test_sides_match_a_brute_force_reference(db_path: str, driver: str, seed: int) -> None:
    """The index walk (rows read by rid until the window is filled) and the one-parse reading of the sides give
    what reading every row gives: ties, interleaved sessions and agents, expired records, filters, two users."""
    memory = _fill(db_path, driver, seed)
    conn = memory.store.db.conn()
    rng = random.Random(seed)
    all_rids = [int(r[0]) for r in conn.execute("SELECT rid FROM records")]
    now = us(utcnow() + timedelta(days=2))
    for filters in (None, Where.of({"n": 1}, None, None), Where.of({"n": {"$gte": 2}}, None, None)):
        for size, window in ((1, 1), (7, 2), (60, 3), (300, 2)):
            rids = rng.sample(all_rids, size)
            times: _search.Times = {}
            found = _search.sides(conn, rids, filters, now, window=window, times=times)
            expected, expected_times = _reference_sides(conn, rids, filters, now, window)
            assert found == expected
            assert times == expected_times
            before_only = _search.sides(conn, rids, filters, now, window=window, after=False)
            assert before_only == {rid: (b, []) for rid, (b, _) in expected.items()}
    memory.close()
