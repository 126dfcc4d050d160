"""The keyword ranking of a large scope (``_keyword_large.py``): FTS5's own scores without ranking every match.

The size threshold is lowered so that small files take the large path; every
result is compared with FTS5's ``bm25()`` over the same file.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from memoryport import MemoryRecord, MemoryScope, MemoryUpdate, SQLiteMemory, ranking
from memoryport.adapters.sqlite import _keyword_large, _schema
from memoryport.adapters.sqlite._rows import slot_span, tenant_token

ANN = MemoryScope(user_id="ann")
WORDS = [
    "tea",
    "walk",
    "walking",
    "walked",
    "garden",
    "book",
    "books",
    "read",
    "reading",
    "river",
    "stone",
    "lamp",
    "quiet",
    "bright",
]


@pytest.fixture
def large(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(_keyword_large, "LARGE", 1)
    monkeypatch.setattr(_keyword_large, "SHORTLIST", 8)
    yield


def texts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(2, 12))]
        if i % 9 == 0:
            words += [words[0]] * rng.randint(1, 3)  # repeated words: term frequencies above one
        if i % 13 == 0:
            words.append("how's")  # one query word, two FTS5 tokens
        out.append(" ".join(words))
    return out


def fts5_top(memory: Any, query: str, k: int) -> list[tuple[int, float]]:
    """FTS5's bm25() top-k of ANN's records, (rid, -bm25): what the exact path ranks."""
    store = memory.store

    def run(conn: Any) -> list[tuple[int, float]]:
        (slot,) = conn.execute("SELECT slot FROM generations WHERE tenant = ?", (tenant_token("ann"),)).fetchone()
        lo, hi = slot_span(int(slot))
        expression = " OR ".join('"' + t + '"' for t in ranking.query_terms(query))
        rows = conn.execute(
            "SELECT rowid - ?, bm25(records_fts, 1.0, 0.0) AS s FROM records_fts WHERE records_fts MATCH ? "
            f"AND rowid BETWEEN ? AND ? ORDER BY s, rowid LIMIT {k}",
            (lo, f"body : ({expression})", lo, hi),
        ).fetchall()
        return [(int(rid), -float(score)) for rid, score in rows]

    return list(store.db.read(run))


def large_top(memory: Any, query: str, k: int) -> list[tuple[int, float]] | None:
    store = memory.store

    def run(conn: Any) -> list[tuple[int, float]] | None:
        (slot,) = conn.execute("SELECT slot FROM generations WHERE tenant = ?", (tenant_token("ann"),)).fetchone()
        lo, hi = slot_span(int(slot))
        return _keyword_large.large_bm25(
            conn, store.ann.words, ranking.query_terms(query), lo, hi, lo, k, lambda rids: set(rids)
        )

    return store.db.read(run)  # type: ignore[no-any-return]


QUERIES = ["tea", "walking garden", "how's the river", "books reading lamp", "quiet", "stone bright tea walk"]


def test_the_tokenizer_is_the_stores() -> None:
    assert f"tokenize='{_keyword_large.TOKENIZE}'" in _schema.FTS_DDL


def test_scores_are_fts5s_own(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in texts(300)])
    # Lengths of 128 words and more take two bytes in FTS5's docsize records.
    memory.add_sync([MemoryRecord(scope=ANN, text=" ".join(["tea lamp"] * 70 + ["river"] * n)) for n in (1, 200)])
    for query in QUERIES:
        want = fts5_top(memory, query, 300)
        got = large_top(memory, query, 300)
        assert got is not None
        assert [rid for rid, _ in got] == [rid for rid, _ in sorted(want, key=lambda x: (-x[1], x[0]))]
        assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-12)
        # A short list: its head is FTS5's head (the rest of the matches are not scored exactly).
        short = large_top(memory, query, 5)
        assert short is not None
        assert [s for _, s in short] == pytest.approx([s for _, s in want[:5]], rel=1e-12)
    memory.close()


def test_the_store_ranks_large_scopes_as_fts5_does(db_path: str, driver: str, large: None) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in texts(200)])
    exact = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    for query in QUERIES:
        got = memory.search_sync(query, scope=ANN, k=8)
        assert got
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_keyword_large, "LARGE", 10**9)
            want = exact.search_sync(query, scope=ANN, k=8)
        assert [h.score for h in got] == pytest.approx([h.score for h in want], rel=1e-9)
    assert memory.store.ann.words.lists  # the large path ran and kept the word lists
    memory.close()
    exact.close()


def test_writes_from_another_store_deletes_and_updates_are_seen(db_path: str, driver: str, large: None) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    other = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in texts(120)])
    assert not memory.search_sync("zebra", scope=ANN, k=5)
    [zid] = other.add_sync([MemoryRecord(scope=ANN, text="a zebra zebra by the river")])
    hits = memory.search_sync("zebra river", scope=ANN, k=5)
    assert hits and hits[0].record.id == zid
    other.update_sync([MemoryUpdate(id=zid, text="a giraffe by the lamp")], scope=ANN)
    assert not memory.search_sync("zebra", scope=ANN, k=5)
    assert memory.search_sync("giraffe", scope=ANN, k=5)[0].record.id == zid
    other.delete_sync([zid], scope=ANN)
    assert not memory.search_sync("giraffe", scope=ANN, k=5)
    held = [m for (phrase, _), m in memory.store.ann.words.lists.items() if phrase == '"giraffe"']
    assert held and len(held[0].rowids) == 0  # the deleted record's lists were read again
    memory.close()
    other.close()


def test_erased_records_leave_the_word_lists(db_path: str, driver: str, large: None) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    memory.add_sync([MemoryRecord(scope=ANN, text=t) for t in texts(60)])
    memory.add_sync([MemoryRecord(scope=ANN, text="the okapi crossed the river")])
    assert memory.search_sync("okapi river", scope=ANN, k=3)[0].record.text.startswith("the okapi")
    words = memory.store.ann.words
    held = [m for (phrase, _), m in words.lists.items() if phrase == '"okapi"']
    assert held and len(held[0].rowids) == 1
    memory.delete_sync(scope=ANN)  # the whole user
    assert not memory.search_sync("okapi river", scope=ANN, k=3)
    # The erasure emptied this process's word lists (another process's go at its next search: the generation).
    assert not words.lists and not words.lengths
    memory.close()


def test_filters_and_narrow_scopes_take_the_exact_path(db_path: str, driver: str, large: None) -> None:
    memory = SQLiteMemory(db_path, search_mode="keyword", driver=driver)
    session = MemoryScope(user_id="ann", session_id="s1")
    memory.add_sync([MemoryRecord(scope=ANN, text=t, metadata={"n": i % 3}) for i, t in enumerate(texts(80))])
    memory.add_sync([MemoryRecord(scope=session, text="tea by the quiet river")])
    hits = memory.search_sync("tea river", scope=session, k=5)
    assert [h.record.scope.session_id for h in hits] == ["s1"]
    filtered = memory.search_sync("tea", scope=ANN, k=5, filters={"n": 2})
    assert filtered and all(h.record.metadata["n"] == 2 for h in filtered)
    memory.close()
