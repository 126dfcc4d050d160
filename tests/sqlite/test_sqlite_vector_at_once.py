"""A small vector search in one statement (``_search.vector_at_once``): the same hits, or None and the old path.

The search ranks the scope's vectors in RAM first, then reads the k rows with
the tenant's generation, whether the user has an index and whether the
write-behind log holds rows, in one statement; anything not current drops it.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memoryport import MemoryRecord, MemoryScope, MemoryUpdate, SQLiteMemory
from memoryport._records import utcnow
from memoryport.adapters.sqlite import _search
from memoryport.adapters.sqlite._rows import tenant_token
from memoryport.adapters.sqlite._search import search_hits, vector_at_once
from memoryport.adapters.sqlite._vectors import NotCached, embed

from .support import bow_embedder

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann")
WORDS = ["tea", "coffee", "garden", "piano", "river", "train", "letter", "winter", "apple", "market"]


def texts(n: int) -> list[str]:
    return [f"{WORDS[i % 10]} {WORDS[(i * 3) % 10]} {WORDS[(i * 7 + 1) % 10]} note {i}" for i in range(n)]


async def filled(path: Path, driver: str, n: int = 120, **options: Any) -> SQLiteMemory:
    memory = SQLiteMemory(path, embedder=bow_embedder(), search_mode="vector", driver=driver, **options)
    await memory.add([MemoryRecord(scope=ANN, text=t) for t in texts(n)])
    await memory.search("tea", scope=ANN, k=3)  # the scope's vectors into RAM
    return memory


def at_once(memory: SQLiteMemory, query: str, qvec: Any, k: int, scope: MemoryScope = ANN) -> Any:
    store = memory.store
    return store.db.at_once(lambda conn: vector_at_once(store, conn, qvec, scope, k, None))


def in_transaction(memory: SQLiteMemory, query: str, qvec: Any, k: int, scope: MemoryScope = ANN) -> Any:
    store = memory.store
    return store.db.read_nowait(
        lambda conn: search_hits(store, conn, query, qvec, "vector", scope, k, None, load=False)
    )


def key(hits: Any) -> list[tuple[str, float, str, str, Any]]:
    return [(h.record.id, h.score, h.signal, h.record.text, h.record.created_at) for h in hits]


async def test_the_same_hits_as_a_transaction(tmp_path: Path, driver: str) -> None:
    memory = await filled(tmp_path / "m.db", driver)
    for k in (1, 3, 10, 50, 200):
        for query in ["tea garden", "piano river letter", "note 7", "winter market apple"]:
            qvec = (await embed(memory.store.embedder, [query]))[0]  # type: ignore[arg-type]
            fast = at_once(memory, query, qvec, k)
            assert fast is not None  # taken: current vectors in RAM, no index, no log
            assert key(fast) == key(in_transaction(memory, query, qvec, k))
            assert key(fast) == key(await memory.store.search(query, scope=ANN, k=k, filters=None))
    await memory.aclose()


async def test_another_writer_makes_it_step_aside(tmp_path: Path, driver: str) -> None:
    memory = await filled(tmp_path / "m.db", driver)
    qvec = (await embed(memory.store.embedder, ["tea"]))[0]  # type: ignore[arg-type]
    assert at_once(memory, "tea", qvec, 5) is not None
    # Another process's write moves the tenant's generation: the vectors in RAM are no longer current.
    raw = memory.store.driver.connect(tmp_path / "m.db")  # the store's own SQLite library (docs/sqlite.md)
    raw.execute("UPDATE generations SET gen = gen + 1 WHERE tenant = ?", (tenant_token("ann"),))
    raw.commit()
    raw.close()
    assert at_once(memory, "tea", qvec, 5) is None
    hits = await memory.search("tea", scope=ANN, k=5)  # reloads through the transaction's path
    assert len(hits) == 5
    assert at_once(memory, "tea", qvec, 5) is not None
    await memory.aclose()


async def test_an_index_of_the_user_makes_it_step_aside(tmp_path: Path, driver: str) -> None:
    memory = await filled(tmp_path / "m.db", driver, ann_threshold=100_000)  # indexes on, none built yet
    qvec = (await embed(memory.store.embedder, ["tea"]))[0]  # type: ignore[arg-type]
    assert at_once(memory, "tea", qvec, 5) is not None
    raw = memory.store.driver.connect(tmp_path / "m.db")  # the store's own SQLite library (docs/sqlite.md)
    raw.execute(
        "INSERT INTO ann_index(tenant, nlist, dim, centroids, built, version) VALUES (?, 1, 64, ?, 0, 1)",
        (tenant_token("ann"), bytes(256)),
    )
    raw.commit()
    raw.close()
    assert at_once(memory, "tea", qvec, 5) is None
    with pytest.raises(NotCached):  # as the transaction's path says: the index is not in RAM
        in_transaction(memory, "tea", qvec, 5)
    # A session's scope is never searched through the user's index: still taken there.
    session = MemoryScope(user_id="ann", session_id="s1")
    await memory.add([MemoryRecord(scope=session, text="tea in the garden")])
    await memory.store.search("tea", scope=session, k=1, filters=None)
    assert at_once(memory, "tea", qvec, 1, session) is not None
    await memory.aclose()


async def test_the_write_behind_log_makes_it_step_aside(tmp_path: Path, driver: str) -> None:
    memory = await filled(tmp_path / "m.db", driver, write_behind=True)
    qvec = (await embed(memory.store.embedder, ["tea"]))[0]  # type: ignore[arg-type]
    assert at_once(memory, "tea", qvec, 5) is not None
    await memory.add([MemoryRecord(scope=ANN, text="tea by the river, logged")])
    logged = memory.store.db.at_once(lambda conn: conn.execute("SELECT count(*) FROM inbox").fetchone()[0])
    assert logged == 1
    assert at_once(memory, "tea", qvec, 5) is None
    hits = await memory.search("tea river logged", scope=ANN, k=1)
    assert hits[0].record.text == "tea by the river, logged"
    await memory.aclose()


def block_of(memory: SQLiteMemory) -> Any:
    return memory.store.vectors._blocks[("ann", None, None)]


@pytest.mark.parametrize("write_behind", [False, True], ids=["direct", "logged"])
async def test_an_expiry_appended_is_seen(
    tmp_path: Path, driver: str, monkeypatch: pytest.MonkeyPatch, write_behind: bool
) -> None:
    memory = await filled(tmp_path / "m.db", driver, write_behind=write_behind)
    block = block_of(memory)
    soon = utcnow() + timedelta(hours=1)
    [added] = await memory.add([MemoryRecord(scope=ANN, text="tea tea tea garden", expires_at=soon)])
    if write_behind:  # in the log: its drain appends it (the drain thread may have done it already)
        memory.store.db.drain_now()
    assert block_of(memory) is block  # appended in RAM, not reloaded from the file
    qvec = (await embed(memory.store.embedder, ["tea tea tea garden"]))[0]  # type: ignore[arg-type]
    assert [h.record.id for h in at_once(memory, "", qvec, 1)] == [added]
    monkeypatch.setattr(_search, "utcnow", lambda: soon + timedelta(hours=1))
    fast = at_once(memory, "", qvec, 10)
    assert fast is not None and added not in [h.record.id for h in fast]
    assert key(fast) == key(in_transaction(memory, "", qvec, 10))
    await memory.aclose()


async def test_an_expiry_changed_is_seen(tmp_path: Path, driver: str, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = await filled(tmp_path / "m.db", driver)
    pvec = (await embed(memory.store.embedder, ["piano river letter"]))[0]  # type: ignore[arg-type]
    first = at_once(memory, "", pvec, 1)[0].record.id
    block = block_of(memory)
    soon = utcnow() + timedelta(hours=1)
    await memory.update([MemoryUpdate(id=first, expires_at=soon)], scope=ANN)
    assert block_of(memory) is block  # patched in RAM, not reloaded from the file
    assert [h.record.id for h in at_once(memory, "", pvec, 1)] == [first]
    monkeypatch.setattr(_search, "utcnow", lambda: soon + timedelta(hours=1))
    fast = at_once(memory, "", pvec, 10)
    assert fast is not None and first not in [h.record.id for h in fast]
    assert key(fast) == key(in_transaction(memory, "", pvec, 10))
    await memory.aclose()


async def test_the_public_search_takes_it(tmp_path: Path, driver: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from memoryport.adapters.sqlite import _store

    memory = await filled(tmp_path / "m.db", driver)
    taken: list[int] = []

    def counted(*args: Any) -> Any:
        found = vector_at_once(*args)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(_store, "vector_at_once", counted)
    hits = await memory.search("tea garden", scope=ANN, k=4)
    assert taken == [True] and len(hits) == 4
    await memory.aclose()
