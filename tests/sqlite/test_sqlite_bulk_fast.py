"""The bulk add's fast paths: ids beside the records, columns built at once, FTS5 and vector rows from SQL.

The guard hands the SQLite store its records as given and their ids beside
them (``add_with_ids``: no copy per record); the store builds a one-scope
batch column by column, writes its FTS5 rows by ``INSERT ... SELECT`` from
the rows just written (per user, for a batch of a few users) and its vectors
from one BLOB. Each must store exactly what the slow paths stored, and every
check of the guard must still refuse bad input with nothing written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pytest

import memoryport._guard as guard_module
from memoryport import (
    GuardedMemory,
    InvalidInput,
    Limits,
    MemoryRecord,
    MemoryScope,
    SQLiteMemory,
    UnsupportedCapability,
    UsageError,
)
from memoryport._port import adds_with_ids
from memoryport._records import new_ids, utcnow
from memoryport.adapters.sqlite import SQLiteStore

from .support import bow_embedder, bow_vectors

pytestmark = pytest.mark.anyio


def words(user: str, i: int) -> str:
    return f"{user} note {i} zq{user}{i} about plums"


@pytest.mark.parametrize("n", [20, 300], ids=["rows-bound", "rows-from-sql"])
async def test_a_one_scope_batch_reads_back_and_keeps_the_callers_records(db_path: str, driver: str, n: int) -> None:
    memory = SQLiteMemory(db_path, driver=driver, embedder=bow_embedder())
    ann = MemoryScope(user_id="ann")
    # Equal scopes that are distinct objects count as one scope too.
    batch = [MemoryRecord(scope=ann if i % 2 else MemoryScope(user_id="ann"), text=words("ann", i)) for i in range(n)]
    ids = await memory.add(batch)
    assert len(set(ids)) == n
    assert all(r.id is None for r in batch)  # the caller's records are untouched
    for i in (0, 1, n // 2, n - 1):
        got = await memory.get(ids[i], scope=ann)
        assert got is not None and got.id == ids[i]
        assert (got.text, got.created_at, got.scope) == (batch[i].text, batch[i].created_at, ann)
        hits = await memory.search(f"zqann{i}", scope=ann, k=1)
        assert hits and hits[0].record.id == ids[i]
    # The vectors written from one BLOB are each record's own, byte for byte, in rid order.
    stored = memory.store.db.read(lambda conn: conn.execute("SELECT vec FROM vectors ORDER BY rid").fetchall())
    expected = bow_vectors([r.text for r in batch])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    got_vectors = np.frombuffer(b"".join(row[0] for row in stored), dtype=np.float32).reshape(n, -1)
    np.testing.assert_allclose(got_vectors, expected, rtol=1e-6, atol=1e-7)
    assert memory.store.stats()["vectors"] == n
    await memory.aclose()


@pytest.mark.parametrize(
    ("users", "n"), [(3, 200), (7, 200), (3, 24)], ids=["few-users-by-select", "many-users-bound", "small-bound"]
)
async def test_a_batch_of_several_users_keeps_each_users_words_apart(
    db_path: str, driver: str, users: int, n: int
) -> None:
    memory = SQLiteMemory(db_path, driver=driver)
    names = [f"u{k}" for k in range(users)]
    scopes = [MemoryScope(user_id=name) for name in names] + [MemoryScope(session_id="only-a-session")]
    batch = [MemoryRecord(scope=scopes[i % len(scopes)], text=words(str(i % len(scopes)), i)) for i in range(n)]
    await memory.add(batch)
    for i in (0, 1, 2, len(scopes) - 1, n - 1):
        scope = scopes[i % len(scopes)]
        hits = await memory.search(f"zq{i % len(scopes)}{i}", scope=scope, k=3)
        assert [h.record.text for h in hits][:1] == [batch[i].text]
        other = scopes[(i + 1) % len(scopes)]
        assert not await memory.search(f"zq{i % len(scopes)}{i}", scope=other, k=3)
    # Erasing one user takes their FTS5 rows too (a contentless delete needs the very values written).
    assert await memory.delete(None, scope=scopes[0]) == len(range(0, n, len(scopes)))
    assert not await memory.search("plums", scope=scopes[0], k=5)
    assert len(await memory.search("plums", scope=scopes[1], k=500)) == len(range(1, n, len(scopes)))
    await memory.aclose()


@dataclass(frozen=True)
class Bad:
    what: str
    make: Any  # (index) -> the bad item
    error: type[Exception]
    match: str


NOW = utcnow()
BAD = [
    Bad("long text", lambda i: MemoryRecord(scope=MemoryScope(user_id="ann"), text="x" * 33_000), InvalidInput, "text"),
    Bad(
        "future",
        lambda i: MemoryRecord(scope=MemoryScope(user_id="ann"), text="t", created_at=NOW + timedelta(days=1)),
        InvalidInput,
        "created_at",
    ),
    Bad(
        "long id", lambda i: MemoryRecord(id="i" * 300, scope=MemoryScope(user_id="ann"), text="t"), InvalidInput, "id"
    ),
    Bad(
        "metadata keys",
        lambda i: MemoryRecord(scope=MemoryScope(user_id="ann"), text="t", metadata={f"k{j}": j for j in range(40)}),
        InvalidInput,
        "metadata",
    ),
    Bad("not a record", lambda i: {"text": "t"}, UsageError, "is a dict"),
    Bad("long scope id", lambda i: MemoryRecord(scope=MemoryScope(user_id="a" * 300), text="t"), InvalidInput, "scope"),
    Bad(
        "repeated id",
        lambda i: MemoryRecord(id="given-1", scope=MemoryScope(user_id="ann"), text="t"),
        InvalidInput,
        "id",
    ),
]


@pytest.mark.parametrize("given", [False, True], ids=["fresh-ids", "a-given-id"])
@pytest.mark.parametrize("bad", BAD, ids=[b.what for b in BAD])
async def test_one_bad_record_in_a_big_batch_raises_its_error_and_writes_nothing(
    db_path: str, driver: str, bad: Bad, given: bool
) -> None:
    """The guard's quick look at a whole batch (one scope, no ids, ...) must send any bad batch record by record."""
    memory = SQLiteMemory(db_path, driver=driver, embedder=bow_embedder())
    scope = MemoryScope(user_id="ann")
    batch: list[Any] = [MemoryRecord(scope=scope, text=f"fine {i}") for i in range(1_000)]
    if given or bad.what == "repeated id":
        batch[3] = MemoryRecord(id="given-1", scope=scope, text="a given id")
    batch[777] = bad.make(777)
    with pytest.raises(bad.error, match=rf"records\[777\].*{bad.match}"):
        await memory.add(batch)
    assert memory.store.stats()["records"] == 0
    assert memory.store.stats()["vectors"] == 0
    await memory.aclose()


async def test_a_store_without_expiry_refuses_an_expiring_record_in_a_batch(tmp_path: Any) -> None:
    store = Recording()
    memory = GuardedMemory(store)
    batch = [MemoryRecord(scope=MemoryScope(user_id="ann"), text=f"t{i}") for i in range(10)]
    batch[4] = MemoryRecord(scope=MemoryScope(user_id="ann"), text="t", expires_at=NOW + timedelta(days=1))
    with pytest.raises(UnsupportedCapability, match=r"records\[4\]\.expires_at"):
        await memory.add(batch)
    assert store.calls == []


async def test_unvalidated_records_are_checked_one_by_one(db_path: str, driver: str) -> None:
    memory = SQLiteMemory(db_path, driver=driver)
    scope = MemoryScope(user_id="ann")
    batch = [MemoryRecord(scope=scope, text=f"fine {i}") for i in range(100)]
    # Built without validation, as a careless host might: a naive created_at cannot be compared with now.
    batch[60] = MemoryRecord.model_construct(scope=scope, text="naive", created_at=datetime(2020, 1, 1))
    with pytest.raises(TypeError):
        await memory.add(batch)
    batch[60] = MemoryRecord.model_construct(scope=scope, text="x" * 40_000, created_at=utcnow())
    with pytest.raises(InvalidInput, match=r"records\[60\]\.text is 40,000 characters"):
        await memory.add(batch)
    assert memory.store.stats()["records"] == 0
    await memory.aclose()


async def test_a_custom_limits_subclass_is_asked_about_every_record(db_path: str, driver: str) -> None:
    class NoPlums(Limits):
        def check_record(self, record: MemoryRecord, field: str, now: datetime, *, scope: bool = True) -> None:
            super().check_record(record, field, now, scope=scope)
            if "plum" in record.text:
                raise InvalidInput(f"{field}.text mentions plums", field=f"{field}.text")

    memory = SQLiteMemory(db_path, driver=driver, limits=NoPlums())
    batch = [MemoryRecord(scope=MemoryScope(user_id="ann"), text=f"fine {i}") for i in range(50)]
    batch[41] = MemoryRecord(scope=MemoryScope(user_id="ann"), text="a plum")
    with pytest.raises(InvalidInput, match=r"records\[41\]\.text mentions plums"):
        await memory.add(batch)
    assert memory.store.stats()["records"] == 0
    await memory.aclose()


async def test_a_fresh_id_equal_to_a_given_one_is_refused(
    db_path: str, driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = SQLiteMemory(db_path, driver=driver)
    scope = MemoryScope(user_id="ann")
    monkeypatch.setattr(guard_module, "new_ids", lambda n: ["clash", *new_ids(n - 1)])
    batch = [MemoryRecord(scope=scope, text="fresh"), MemoryRecord(id="clash", scope=scope, text="given")]
    with pytest.raises(InvalidInput, match=r"records\[1\]\.id repeats an id earlier in the batch"):
        await memory.add(batch)
    assert memory.store.stats()["records"] == 0
    await memory.aclose()


class Recording:
    """A store that records what reached it, through ``add`` or ``add_with_ids``."""

    name = "recording"
    capabilities = frozenset({"metadata"})

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str | None]]] = []

    async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
        self.calls.append(("add", [r.id for r in records]))
        return [str(r.id) for r in records]

    async def add_with_ids(self, records: Sequence[MemoryRecord], ids: Sequence[str]) -> list[str]:
        self.calls.append(("add_with_ids", [r.id for r in records]))
        return list(ids)

    async def search(self, *args: Any, **kwargs: Any) -> list[Any]:
        return []

    async def get(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def delete(self, *args: Any, **kwargs: Any) -> int:
        return 0

    async def export(self, *args: Any, **kwargs: Any) -> list[Any]:
        return []

    async def purge(self, *args: Any, **kwargs: Any) -> int:
        return 0


async def test_the_guard_uses_add_with_ids_only_where_add_is_the_same_class() -> None:
    scope = MemoryScope(user_id="ann")
    batch = [MemoryRecord(scope=scope, text="a"), MemoryRecord(id="b1", scope=scope, text="b")]

    store = Recording()
    ids = await GuardedMemory(store).add(batch)
    assert store.calls == [("add_with_ids", [None, "b1"])] and ids[1] == "b1" and len(set(ids)) == 2

    class OwnAdd(Recording):  # overrides add alone: its add is what must run
        async def add(self, records: Sequence[MemoryRecord]) -> list[str]:
            self.calls.append(("own add", [r.id for r in records]))
            return [str(r.id) for r in records]

    own = OwnAdd()
    assert adds_with_ids(own) is None
    ids = await GuardedMemory(own).add(batch)
    assert own.calls == [("own add", ids)] and ids[1] == "b1"

    patched = Recording()
    guarded = GuardedMemory(patched)

    async def replaced(records: Sequence[MemoryRecord]) -> list[str]:
        patched.calls.append(("replaced", [r.id for r in records]))
        return [str(r.id) for r in records]

    patched.add = replaced  # type: ignore[method-assign]
    ids = await guarded.add(batch)
    assert patched.calls == [("replaced", ids)]


async def test_the_sqlite_store_called_without_the_guard_still_wants_ids(db_path: str, driver: str) -> None:
    store = SQLiteStore(db_path, driver=driver)
    with pytest.raises(UsageError, match="without an id"):
        await store.add([MemoryRecord(scope=MemoryScope(user_id="ann"), text="t")])
    with pytest.raises(UsageError, match="2 ids for 1 records"):
        await store.add_with_ids([MemoryRecord(scope=MemoryScope(user_id="ann"), text="t")], ["a", "b"])
    assert await store.add_with_ids([MemoryRecord(scope=MemoryScope(user_id="ann"), text="t")], ["a"]) == ["a"]
    assert store.stats()["records"] == 1
    await store.aclose()


async def test_an_export_shares_one_scope_object_per_scope(db_path: str, driver: str) -> None:
    """Records of one scope come back holding one (frozen) scope object: adding them elsewhere (``copy``) then
    compares scopes by identity, not a model comparison per record; different scopes stay apart."""
    memory = SQLiteMemory(db_path, driver=driver)
    ann, session = MemoryScope(user_id="ann"), MemoryScope(user_id="ann", session_id="s1")
    await memory.add([MemoryRecord(scope=ann if i % 2 else session, text=words("ann", i)) for i in range(10)])
    records = await memory.export(ann)
    by_scope: dict[MemoryScope, set[int]] = {}
    for record in records:
        by_scope.setdefault(record.scope, set()).add(id(record.scope))
    assert set(by_scope) == {ann, session}
    assert all(len(objects) == 1 for objects in by_scope.values())  # one object per scope
    assert len({id(r.scope) for r in records}) == 2
    await memory.aclose()
