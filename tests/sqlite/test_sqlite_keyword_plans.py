"""SQLite keyword plans: whichever way a search is planned, it returns what ranking every match would.

The reference ranks every FTS5 match by ``bm25()`` and filters afterwards in
Python; each plan (best rows first then checked, one checked pass, a time
range bounding the rowids, BM25 within one user's postings) must give the
same rows in the same order, ties aside.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import timedelta

import pytest

from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
from memoryport._records import utcnow
from memoryport.adapters.sqlite import _keyword
from memoryport.adapters.sqlite._fts import match_expression
from memoryport.adapters.sqlite._keyword import keyword_ranking
from memoryport.adapters.sqlite._rows import RID_BITS, tenant_token, us
from memoryport.adapters.sqlite._where import Where

WORDS = ["tea", "green", "coffee", "walk", "river", "book", "piano", "garden", "storm", "lamp"]


def _same_ranking(got: Sequence[tuple[int, float]], want: Sequence[tuple[int, float]]) -> None:
    """Equal scores in the same order; rows equal except where tied scores cross the cut."""
    assert [round(s, 9) for _, s in got] == [round(s, 9) for _, s in want]
    cut = round(want[-1][1], 9) if want else None
    assert {r for r, s in got if round(s, 9) != cut} == {r for r, s in want if round(s, 9) != cut}


def _reference(conn: object, query: str, rows: dict[int, tuple[str | None, str | None, int, int]], keep: object,
               limit: int) -> list[tuple[int, float]]:  # fmt: skip
    match = f"body : ({match_expression(query)})"
    ranked = conn.execute(  # type: ignore[attr-defined]
        "SELECT rowid & ?, bm25(records_fts, 1.0, 0.0) AS s FROM records_fts WHERE records_fts MATCH ? ORDER BY s",
        ((1 << RID_BITS) - 1, match),
    ).fetchall()
    return [(int(rid), -float(s)) for rid, s in ranked if keep(rows[int(rid)])][:limit]  # type: ignore[operator]


@pytest.mark.parametrize("bounds_max", [4096, 3])
def test_restricted_keyword_plans_rank_as_ranking_everything(
    db_path: str, driver: str, bounds_max: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions, time ranges and metadata filters that few records pass, on a file one user holds."""
    monkeypatch.setattr(_keyword, "TIME_BOUNDS_MAX", bounds_max)
    rng = random.Random(5)
    memory = SQLiteMemory(db_path, driver=driver)
    now = utcnow()
    records = []
    for i in range(400):
        text = " ".join(rng.choices(WORDS, k=rng.randint(2, 9)))
        # created_at not in insertion order: the time range's rows are spread through the rowids
        age = rng.randrange(10_000)
        session = "s1" if i % 37 == 0 else "s2"
        records.append(
            MemoryRecord(
                scope=MemoryScope(user_id="ann", session_id=session),
                text=text,
                created_at=now - timedelta(seconds=age),
                metadata={"n": i},
            )
        )
    records.append(MemoryRecord(scope=MemoryScope(user_id="ben"), text="tea green tea", metadata={"n": 1}))
    memory.add_sync(records)
    store = memory.store
    conn = store.db.conn()
    rows = {
        int(r[0]): (r[1], r[2], int(r[3]), int(r[4]))
        for r in conn.execute("SELECT rid, user_id, session_id, created_at, rid FROM records")
    }
    meta_n = {int(r[0]): int(r[1]) for r in conn.execute("SELECT rid, value FROM record_meta WHERE key = 'n'")}
    t = us(now)
    cases = [
        (MemoryScope(user_id="ann"), None, lambda r: r[0] == "ann"),
        (MemoryScope(user_id="ann", session_id="s1"), None, lambda r: r[0] == "ann" and r[1] == "s1"),
        (
            MemoryScope(user_id="ann"),
            Where(since=t - 300_000_000),
            lambda r: r[0] == "ann" and r[2] >= t - 300_000_000,
        ),
        (
            MemoryScope(user_id="ann"),
            Where(since=t - 9_000_000_000, until=t - 8_000_000_000),
            lambda r: r[0] == "ann" and t - 9_000_000_000 <= r[2] < t - 8_000_000_000,
        ),
        (MemoryScope(user_id="ann"), Where(since=t + 1), lambda r: False),
        (
            MemoryScope(user_id="ann"),
            Where({"n": {"$gte": 390}}),
            lambda r: r[0] == "ann" and meta_n.get(r[3], -1) >= 390,
        ),
        (
            MemoryScope(user_id="ann", session_id="s2"),
            Where({"n": {"$lt": 200}}, since=t - 5_000_000_000),
            lambda r: r[0] == "ann" and r[1] == "s2" and meta_n.get(r[3], -1) < 200 and r[2] >= t - 5_000_000_000,
        ),
    ]
    for query in ("tea", "green river", "piano storm lamp book"):
        for scope, where, keep in cases:
            for limit in (1, 10, 50):
                conn.execute("BEGIN")
                try:
                    got = keyword_ranking(conn, "fts5", query, scope, limit, where, t + 1)
                    want = _reference(conn, query, rows, keep, limit)
                finally:
                    conn.execute("COMMIT")
                _same_ranking(got, want)
    memory.close()


def _per_user_reference(conn: object, query: str, tenant: str, limit: int) -> list[tuple[int, float]]:
    """BM25 over one user's records as bm25_per_user defines it (the user's IDF, one occurrence per word)."""
    from memoryport import ranking

    mine = {
        int(rid) & ((1 << RID_BITS) - 1): int(sz)
        for rid, sz in conn.execute(  # type: ignore[attr-defined]
            "SELECT d.id, 0 FROM records_fts_docsize d WHERE d.id IN "
            "(SELECT rowid FROM records_fts WHERE records_fts MATCH ?)",
            (f'tenant : "{tenant}"',),
        )
    }
    words: dict[int, float] = {}
    for term in ranking.query_terms(query):
        found = [
            int(r[0]) & ((1 << RID_BITS) - 1)
            for r in conn.execute(  # type: ignore[attr-defined]
                "SELECT rowid FROM records_fts WHERE records_fts MATCH ?", (f'tenant : "{tenant}" AND body : "{term}"',)
            )
        ]
        for rid in found:
            words[rid] = words.get(rid, 0.0) + ranking.bm25_idf(len(found), len(mine))
    return sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))


def test_a_user_among_many_reads_only_its_own_postings(db_path: str, driver: str) -> None:
    """Each user's records get their own slot of FTS5 rowids; per-user BM25 finds exactly its own matches."""
    rng = random.Random(9)
    memory = SQLiteMemory(db_path, driver=driver, context_weight=0.0)
    users = [f"u{i}" for i in range(7)]
    batch = [
        MemoryRecord(scope=MemoryScope(user_id=rng.choice(users)), text=" ".join(rng.choices(WORDS, k=3)))
        for _ in range(700)
    ]
    memory.add_sync(batch)
    conn = memory.store.db.conn()
    slots = dict(conn.execute("SELECT tenant, slot FROM generations").fetchall())
    assert sorted(slots[tenant_token(u)] for u in users) == list(range(1, 8))
    assert {int(r[0]) >> RID_BITS for r in conn.execute("SELECT rowid FROM records_fts")} == set(range(1, 8))
    for user in users:
        scope = MemoryScope(user_id=user)
        owned = {r.text for r in batch if r.scope.user_id == user}
        for query in ("tea", "green river lamp"):
            hits = memory.search_sync(query, scope=scope, k=300)
            words = set(query.split())
            assert {h.record.text for h in hits} == {t for t in owned if words & set(t.split())}
            conn.execute("BEGIN")
            try:
                got = keyword_ranking(conn, "fts5", query, scope, 300, None, us(utcnow()))
                want = _per_user_reference(conn, query, tenant_token(user), 300)
            finally:
                conn.execute("COMMIT")
            # Same rows; order by summed IDF up to the length factor, which the reference leaves out.
            assert {r for r, _ in got} == {r for r, _ in want}
    conn.execute("INSERT INTO records_fts(records_fts, rank) VALUES ('integrity-check', 1)")
    memory.close()


def test_a_file_from_before_slots_is_reindexed_by_user(db_path: str, driver: str) -> None:
    """An older file (FTS5 rowid = rid) is re-keyed once when opened; searches and erasure work after."""
    import sqlite3

    from memoryport.adapters.sqlite._schema import FTS_DDL, MIGRATIONS, SLOTS_VERSION

    from .test_sqlite_erasure import leaks, marker

    old = sqlite3.connect(db_path)
    for statements in MIGRATIONS[: SLOTS_VERSION - 1]:
        for statement in statements:
            old.execute(statement)
    old.execute(FTS_DDL)
    old.execute(
        "INSERT INTO meta(key, value) VALUES ('schema_version', ?), ('keyword_index', 'fts5')", (SLOTS_VERSION - 1,)
    )
    secret = marker()
    texts = [("ann", "green tea in the garden"), ("ben", "coffee by the river"), ("ann", f"piano {secret}")]
    texts += [("ben", f"walk number {i}") for i in range(20)]
    counts: dict[str, int] = {}
    for rid, (user, text) in enumerate(texts, start=1):
        old.execute(
            "INSERT INTO records(rid, id, user_id, text, created_at) VALUES (?, ?, ?, ?, ?)",
            (rid, f"id{rid}", user, text, rid),
        )
        old.execute("INSERT INTO records_fts(rowid, body, tenant) VALUES (?, ?, ?)", (rid, text, tenant_token(user)))
        counts[user] = counts.get(user, 0) + 1
    for gen, (user, n) in enumerate(counts.items(), start=1):
        old.execute("INSERT INTO generations(tenant, gen, n) VALUES (?, ?, ?)", (tenant_token(user), gen, n))
    old.execute("UPDATE meta SET value = ? WHERE key = 'records'", (len(texts),))
    old.execute("UPDATE meta SET value = 2 WHERE key = 'generation'")
    old.commit()
    old.close()

    memory = SQLiteMemory(db_path, driver=driver)
    assert memory.store.stats()["schema_version"] == len(MIGRATIONS)
    ann, ben = MemoryScope(user_id="ann"), MemoryScope(user_id="ben")
    assert [h.record.text for h in memory.search_sync("tea", scope=ann)] == ["green tea in the garden"]
    assert [h.record.text for h in memory.search_sync("river", scope=ben)] == ["coffee by the river"]
    assert memory.search_sync("river", scope=ann) == []
    assert len(memory.search_sync("walk", scope=ben, k=50)) == 20
    conn = memory.store.db.conn()
    conn.execute("INSERT INTO records_fts(records_fts, rank) VALUES ('integrity-check', 1)")
    assert {int(r[0]) >> RID_BITS for r in conn.execute("SELECT rowid FROM records_fts")} == {1, 2}
    # New records join their user's slot; a new user gets the next one.
    cy = MemoryScope(user_id="cy")
    memory.add_sync([MemoryRecord(scope=ann, text="more tea"), MemoryRecord(scope=cy, text="tea")])
    assert len(memory.search_sync("tea", scope=ann)) == 2
    assert {int(r[0]) >> RID_BITS for r in conn.execute("SELECT rowid FROM records_fts")} == {1, 2, 3}
    # Erasure still finds the re-keyed rows: the deleted text leaves the files.
    [piano] = memory.search_sync("piano", scope=ann)
    assert memory.delete_sync([piano.record.id or ""], scope=ann) == 1
    assert memory.search_sync("piano", scope=ann) == []
    conn = memory.store.db.conn()
    conn.execute("INSERT INTO records_fts(records_fts, rank) VALUES ('integrity-check', 1)")
    memory.close()
    assert leaks(db_path, [secret]) == []
