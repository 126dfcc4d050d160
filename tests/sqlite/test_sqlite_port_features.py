"""SQLite runs update, time ranges, filter operators and count itself: SQL agrees with the core's rules."""

from __future__ import annotations

import random
import sqlite3
from datetime import timedelta
from typing import Any

import pytest

from memoryport import MemoryRecord, MemoryScope, MemoryUpdate, SQLiteMemory
from memoryport._filters import check_filters, matches
from memoryport._records import utcnow
from memoryport.adapters.sqlite._schema import FTS_DDL as _FTS_DDL
from memoryport.adapters.sqlite._schema import MIGRATIONS

from .support import bow_embedder
from .test_sqlite_erasure import leaks, marker

ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")

_VALUES: list[Any] = [
    0, 1, 1.0, -1, 2, 2.5, 3, 10, -(2**70), 2**70, 2**63, -(2**63), 2**63 - 1, "1", "a", "b", "ab", "é", "", True,
    False, None,
]  # fmt: skip


def _random_condition(rng: random.Random) -> Any:
    op = rng.choice(["plain", "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "range"])
    scalar = [v for v in _VALUES if not (isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 2**63)]
    comparable = [v for v in scalar if v is not None and not isinstance(v, bool)]
    if op == "plain":
        return rng.choice(_VALUES)
    if op in ("$eq", "$ne"):
        return {op: rng.choice(_VALUES)}
    if op in ("$gt", "$gte", "$lt", "$lte"):
        return {op: rng.choice(comparable)}
    if op in ("$in", "$nin"):
        return {op: rng.sample(_VALUES, rng.randint(0, 4))}
    if op == "$exists":
        return {op: rng.choice([True, False])}
    low, high = sorted(rng.sample([v for v in comparable if not isinstance(v, str)], 2))
    return {"$gte": low, "$lt": high}


def test_sql_operators_agree_with_the_core_on_random_filters(db_path: str, driver: str) -> None:
    """Every operator, on every JSON type (big integers too), gives exactly what the guard's rules give."""
    rng = random.Random(12)
    memory = SQLiteMemory(db_path, driver=driver)
    records = []
    for i in range(120):
        metadata: dict[str, Any] = {}
        for key in ("a", "b"):
            if rng.random() < 0.8:
                metadata[key] = rng.choice(_VALUES)
        records.append(MemoryRecord(scope=ANN, text=f"record {i}", metadata=metadata))
    memory.add_sync(records)
    memory.add_sync([MemoryRecord(scope=BEN, text="ben", metadata={"a": 1, "b": 1})])
    for _ in range(300):
        filters = {key: _random_condition(rng) for key in rng.sample(["a", "b"], rng.randint(1, 2))}
        checked = check_filters(filters)
        expected = {r.text for r in records if matches(r.metadata, checked)}
        hits = memory.search_sync("", scope=ANN, k=500, filters=filters)
        assert {h.record.text for h in hits} == expected, filters
        assert memory.count_sync(ANN, filters=filters) == len(expected), filters
    assert memory.dropped_not_matching == 0
    memory.close()


@pytest.mark.parametrize("with_embedder", [False, True], ids=["keyword", "embedder"])
def test_keyword_vector_and_recent_paths_respect_range_and_operators(
    db_path: str, driver: str, with_embedder: bool
) -> None:
    memory = SQLiteMemory(db_path, embedder=bow_embedder() if with_embedder else None, driver=driver)
    now = utcnow()
    records = [
        MemoryRecord(scope=ANN, text=f"tea note {i}", created_at=now - timedelta(hours=i), metadata={"n": i})
        for i in range(50)
    ]
    memory.add_sync(records)
    for query in ("", "tea note", "tea note 7"):
        hits = memory.search_sync(query, scope=ANN, k=50, since="630m", until="150m")
        assert {h.record.metadata["n"] for h in hits} == set(range(3, 11)), query
        hits = memory.search_sync(query, scope=ANN, k=50, filters={"n": {"$gte": 45}})
        assert {h.record.metadata["n"] for h in hits} == set(range(45, 50)), query
    assert [r.metadata["n"] for r in memory.export_sync(ANN, since="150m")] == [2, 1, 0]
    assert memory.count_sync(ANN, since="150m", filters={"n": {"$ne": 1}}) == 2
    assert memory.dropped_not_matching == 0
    memory.close()


def test_update_reindexes_reembeds_and_patches_the_cache(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver)
    other = SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver)  # another process's cache
    ids = memory.add_sync([MemoryRecord(scope=ANN, text=f"filler {i} about weather") for i in range(30)])
    [rid] = memory.add_sync([MemoryRecord(scope=ANN, text="Ann plays the violin", metadata={"k": 1})])
    assert memory.search_sync("Ann plays the violin", scope=ANN, k=1)[0].record.id == rid  # cache loaded
    assert other.search_sync("Ann plays the violin", scope=ANN, k=1)[0].record.id == rid
    assert memory.update_sync([MemoryUpdate(id=rid, text="Ann rides a tandem bicycle")], scope=ANN) == [rid]
    for m in (memory, other):
        [hit] = m.search_sync("tandem bicycle", scope=ANN, k=1)
        assert hit.record.id == rid and hit.record.text == "Ann rides a tandem bicycle"
        assert all(h.record.id != rid for h in m.search_sync("violin", scope=ANN, k=3) if h.signal == "keyword")
    kw = SQLiteMemory(db_path + "-kw", driver=driver)
    [kid] = kw.add_sync([MemoryRecord(scope=ANN, text="Ann plays the violin")])
    kw.update_sync([MemoryUpdate(id=kid, text="Ann rides a tandem bicycle")], scope=ANN)
    assert kw.search_sync("violin", scope=ANN) == []
    assert [h.record.id for h in kw.search_sync("bicycles", scope=ANN)] == [kid]
    kw.close()
    got = memory.get_sync(rid, scope=ANN)
    assert got is not None and got.updated_at is not None and got.metadata == {"k": 1}
    # A batch: one transaction, ids in input order, other scopes skipped.
    done = memory.update_sync(
        [MemoryUpdate(id=ids[3], metadata={"x": 1}), MemoryUpdate(id=ids[1], text="changed one")], scope=ANN
    )
    assert done == [ids[3], ids[1]]
    assert memory.update_sync([MemoryUpdate(id=ids[2], text="ben's")], scope=BEN) == []
    assert memory.search_sync("", scope=ANN, filters={"x": 1})[0].record.id == ids[3]
    memory.close()
    other.close()


def test_a_failing_embedder_fails_the_update_and_changes_nothing(db_path: str, driver: str) -> None:
    from memoryport import CallableEmbedder, EmbeddingError

    calls = {"n": 0}
    base = bow_embedder()

    async def flaky(texts: list[str]) -> Any:
        calls["n"] += 1
        if calls["n"] > 1:
            raise RuntimeError("down")
        return await base.embed(texts)

    memory = SQLiteMemory(db_path, embedder=CallableEmbedder(flaky, dim=64, name="bow-64"), driver=driver)
    [rid] = memory.add_sync([MemoryRecord(scope=ANN, text="original text")])
    with pytest.raises(EmbeddingError):
        memory.update_sync([MemoryUpdate(id=rid, text="new text")], scope=ANN)
    got = memory.get_sync(rid, scope=ANN)
    assert got is not None and got.text == "original text" and got.updated_at is None
    memory.close()


def test_an_updated_text_leaves_the_files(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, embedder=bow_embedder(), driver=driver)
    memory.add_sync([MemoryRecord(scope=MemoryScope(user_id=f"u{i % 5}"), text=f"filler {i}") for i in range(200)])
    old, new = marker(), marker()
    [rid] = memory.add_sync([MemoryRecord(scope=ANN, text=f"Ann said {old}")])
    assert memory.store.checkpoint()
    assert leaks(db_path, [old]) == [old]
    memory.update_sync([MemoryUpdate(id=rid, text=f"Ann said {new}")], scope=ANN)
    assert leaks(db_path, [old]) == [], "the old text stays in the file after an update"
    assert leaks(db_path, [new]) == [new]
    memory.close()


def test_expired_records_cannot_be_updated_back_to_life(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver, retention_days=1)
    now = utcnow()
    [expired, retained] = memory.add_sync(
        [
            MemoryRecord(
                scope=ANN, text="gone", created_at=now - timedelta(hours=2), expires_at=now - timedelta(hours=1)
            ),
            MemoryRecord(scope=ANN, text="old", created_at=now - timedelta(days=2)),
        ]
    )
    assert memory.update_sync([MemoryUpdate(id=expired, expires_at=None), MemoryUpdate(id=retained, text="x")],
                              scope=ANN) == []  # fmt: skip
    assert memory.search_sync("", scope=ANN) == []
    assert memory.count_sync(ANN) == 0
    memory.close()


def test_a_schema_1_file_gains_updated_at(db_path: str) -> None:
    conn = sqlite3.connect(db_path)
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute(_FTS_DDL)
    conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', 1), ('keyword_index', 'fts5')")
    conn.commit()
    conn.close()
    memory = SQLiteMemory(db_path, driver="sqlite3")
    assert memory.store.stats()["schema_version"] == len(MIGRATIONS)  # every later migration applied too
    [rid] = memory.add_sync([MemoryRecord(scope=ANN, text="tea")])
    memory.update_sync([MemoryUpdate(id=rid, text="coffee")], scope=ANN)
    got = memory.get_sync(rid, scope=ANN)
    assert got is not None and got.text == "coffee" and got.updated_at is not None
    memory.close()


def test_copy_keeps_updated_at(db_path: str) -> None:
    memory = SQLiteMemory(db_path, driver="sqlite3")
    record = MemoryRecord(scope=ANN, text="tea", updated_at=utcnow())
    [rid] = memory.add_sync([record])
    got = memory.get_sync(rid, scope=ANN)
    assert got is not None and got.updated_at == record.updated_at
    memory.close()
