"""Bulk add writes rows by shape (NULLs in the SQL, not bound) and ids in time order: same records back.

A batch mixing every shape of row (scopes with and without session, agent or
user; metadata, expiry, an update time; given and fresh ids) must read back
field by field, be found by keyword and vector search in its own scope only,
and a bad batch must leave nothing behind.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from memoryport import InvalidInput, MemoryRecord, MemoryScope, SQLiteMemory
from memoryport._records import new_id, new_ids, utcnow, with_id

from .support import bow_embedder

pytestmark = pytest.mark.anyio

SCOPES = [
    MemoryScope(user_id="ann"),
    MemoryScope(user_id="ann", session_id="s1"),
    MemoryScope(user_id="ann", agent_id="a1"),
    MemoryScope(user_id="ann", session_id="s1", agent_id="a1"),
    MemoryScope(session_id="s2"),
    MemoryScope(user_id="ben"),
]


def mixed_batch(n: int) -> list[MemoryRecord]:
    now = utcnow()
    out = []
    for i in range(n):
        kw: dict[str, object] = {"scope": SCOPES[i % len(SCOPES)], "text": f"note {i} word{i} about kiwi"}
        if i % 3 == 0:
            kw["metadata"] = {"i": i, "kind": "odd" if i % 2 else "even", "none": None, "flag": i % 2 == 0}
        if i % 4 == 1:
            kw["expires_at"] = now + timedelta(days=1 + i)
        if i % 5 == 2:
            kw["id"] = f"given-{i}"
        if i % 7 == 3:
            kw["created_at"] = now - timedelta(days=i)
        out.append(MemoryRecord(**kw))  # type: ignore[arg-type]
    return out


@pytest.mark.parametrize("vectors", [False, True], ids=["keyword", "embedder"])
async def test_a_mixed_batch_reads_back_field_by_field(db_path: str, driver: str, vectors: bool) -> None:
    memory = SQLiteMemory(db_path, driver=driver, embedder=bow_embedder() if vectors else None)
    batch = mixed_batch(60)
    ids = await memory.add(batch)
    assert len(set(ids)) == 60
    for record, rid in zip(batch, ids, strict=True):
        if record.id is not None:
            assert rid == record.id
        got = await memory.get(rid, scope=record.scope)
        assert got is not None
        assert (got.text, got.metadata, got.created_at, got.expires_at, got.updated_at) == (
            record.text,
            record.metadata,
            record.created_at,
            record.expires_at,
            None,
        )
        assert got.scope == record.scope
    # Each record is found by its own word, in its scope, and nowhere else.
    for i in (0, 1, 4, 5, 13, 59):
        record = batch[i]
        hits = await memory.search(f"word{i}", scope=record.scope, k=3)
        assert hits and hits[0].record.text == record.text
        other = MemoryScope(user_id="carl")
        assert not [h for h in await memory.search(f"word{i}", scope=other, k=3) if h.record.text == record.text]
    assert await memory.count(MemoryScope(user_id="ben")) == 10
    assert await memory.count(MemoryScope(user_id="ann", session_id="s1")) == 20
    assert memory.store.stats()["records"] == 60
    await memory.aclose()


async def test_a_repeated_id_in_a_later_batch_writes_nothing(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver, embedder=bow_embedder())
    await memory.add(mixed_batch(30))
    batch = [MemoryRecord(scope=SCOPES[i % 2], text=f"later {i}") for i in range(20)]
    batch[17] = MemoryRecord(id="given-2", scope=SCOPES[0], text="a copy of an existing id")
    with pytest.raises(InvalidInput, match=r"records\[17\]\.id is already stored"):
        await memory.add(batch)
    assert memory.store.stats()["records"] == 30
    assert memory.store.stats()["vectors"] == 30
    assert not [h for h in await memory.search("later", scope=SCOPES[0], k=50) if h.record.text.startswith("later")]
    # Then the same batch without the repeat goes in whole, after the first one's rids.
    batch[17] = MemoryRecord(scope=SCOPES[0], text="later 17")
    assert len(await memory.add(batch)) == 20
    assert memory.store.stats()["records"] == 50
    await memory.aclose()


async def test_bad_input_in_a_big_batch_raises_before_anything_is_written(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver)
    batch = [MemoryRecord(scope=SCOPES[0], text=f"fine {i}") for i in range(1_500)]
    batch[1_234] = MemoryRecord(scope=SCOPES[0], text="fine", created_at=utcnow() + timedelta(days=3))
    with pytest.raises(InvalidInput, match=r"records\[1234\]\.created_at"):
        await memory.add(batch)
    assert memory.store.stats()["records"] == 0
    await memory.aclose()


def test_new_ids_are_uuid7_unique_and_time_ordered() -> None:
    ids = new_ids(5_000)
    assert len(set(ids)) == 5_000
    for value in [*ids[:500], new_id()]:
        parsed = uuid.UUID(value)
        assert (len(value), parsed.version, parsed.variant) == (32, 7, uuid.RFC_4122)
        assert parsed.hex == value
    assert len({i[:12] for i in ids}) == 1  # one millisecond stamp per batch
    later = new_ids(3)
    assert min(later)[:12] >= max(ids)[:12]
    assert new_ids(0) == []


def test_with_id_is_model_copy() -> None:
    record = MemoryRecord(scope=SCOPES[1], text="tea", metadata={"a": 1}, expires_at=utcnow() + timedelta(days=1))
    copy, reference = with_id(record, "r1"), record.model_copy(update={"id": "r1"})
    assert copy == reference and type(copy) is MemoryRecord
    assert copy.model_fields_set == reference.model_fields_set
    assert copy.model_dump() == reference.model_dump()
    assert record.id is None  # the original is untouched

    class Tagged(MemoryRecord):
        pass

    sub = Tagged(scope=SCOPES[0], text="tea")
    assert type(with_id(sub, "r2")) is Tagged
