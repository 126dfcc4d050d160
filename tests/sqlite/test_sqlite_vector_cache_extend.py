"""Adds append to the vector blocks in RAM (``VectorCache.extend``): each block gets its own scope's rows, with
their expiries, on both add paths (direct, and logged then drained).

The guard re-checks every hit's scope and expiry above the store, so through ``GuardedMemory.search`` a block
holding another scope's row or an expiry of "never" only costs a hit (and, for a scope, a count in
``dropped_out_of_scope``). These tests look below the guard, where nothing re-checks: ``memory.store.search``
(the vector search on the caller's thread in one statement, ``_search.vector_at_once``, and the hybrid search on
a worker), the transaction's path (``search_hits``), and the block's rows themselves. Each test first checks that
the block was extended, not reloaded from the file (the same object), since a reload reads the right rows.
The drain thread is held back: the test drains the log itself, so nothing depends on timing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memoryport import MemoryRecord, MemoryScope, SQLiteMemory
from memoryport import _guard as guard_module
from memoryport._records import utcnow
from memoryport.adapters.sqlite import _search, _store
from memoryport.adapters.sqlite._rows import scope_key, scope_sql
from memoryport.adapters.sqlite._search import search_hits, vector_at_once
from memoryport.adapters.sqlite._vectors import embed

from .support import bow_embedder

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann")
ANN_S1 = MemoryScope(user_id="ann", session_id="s1")
ANN_S2 = MemoryScope(user_id="ann", session_id="s2")
ANN_A1 = MemoryScope(user_id="ann", agent_id="a1")
BEN = MemoryScope(user_id="ben")
SCOPES = [ANN, ANN_S1, ANN_S2, ANN_A1, BEN]
WRITE_BEHIND = pytest.mark.parametrize("write_behind", [False, True], ids=["direct", "logged"])


@pytest.fixture(autouse=True)
def held(monkeypatch: pytest.MonkeyPatch) -> None:
    """The drain thread waits an hour: the test drains the log itself."""
    monkeypatch.setattr(_store, "DRAIN_DELAY", 3600.0)
    monkeypatch.setattr(_store, "DRAIN_ROWS", 10**9)


def block(memory: SQLiteMemory, scope: MemoryScope) -> Any:
    return memory.store.vectors._blocks[scope_key(scope)]


async def added(memory: SQLiteMemory, records: list[MemoryRecord], write_behind: bool) -> list[str]:
    ids = await memory.add(records)
    if write_behind:
        assert memory.store.db.at_once(lambda conn: conn.execute("SELECT count(*) FROM inbox").fetchone()[0]) > 0
        memory.store.db.drain_now()  # the drain's batch extends the blocks
    return ids


def at_once(memory: SQLiteMemory, qvec: Any, scope: MemoryScope, k: int) -> Any:
    store = memory.store
    return store.db.at_once(lambda conn: vector_at_once(store, conn, qvec, scope, k, None))


def in_transaction(memory: SQLiteMemory, qvec: Any, scope: MemoryScope, k: int, mode: str = "vector") -> Any:
    store = memory.store
    return store.db.read_nowait(lambda conn: search_hits(store, conn, "walnut", qvec, mode, scope, k, None))


async def store_ids(memory: SQLiteMemory, scope: MemoryScope, mode: str) -> set[str]:
    memory.store.search_mode = mode  # type: ignore[assignment]
    return {h.record.id for h in await memory.store.search("walnut", scope=scope, k=50, filters=None)}


@WRITE_BEHIND
async def test_a_batch_of_many_scopes_extends_each_block_with_its_own_rows(
    tmp_path: Path, driver: str, write_behind: bool
) -> None:
    memory = SQLiteMemory(
        tmp_path / "m.db", embedder=bow_embedder(), search_mode="vector", driver=driver, write_behind=write_behind
    )
    for scope in SCOPES:
        await added(memory, [MemoryRecord(scope=scope, text=f"walnut first {scope.user_id}")], write_behind)
    for scope in SCOPES:  # every scope's vectors into RAM
        await memory.store.search("walnut", scope=scope, k=5, filters=None)
    blocks = {scope_key(s): block(memory, s) for s in SCOPES}
    # One batch of two users and three sessions/agents: each block must take only the rows its scope covers.
    await added(memory, [MemoryRecord(scope=s, text=f"walnut again {i}") for i, s in enumerate(SCOPES)], write_behind)
    qvec = (await embed(memory.store.embedder, ["walnut"]))[0]  # type: ignore[arg-type]
    for scope in SCOPES:
        assert block(memory, scope) is blocks[scope_key(scope)], scope  # extended in RAM, not reloaded
        where, params = scope_sql(scope)
        expected = memory.store.db.at_once(
            lambda conn, w=where, p=params: {r[0] for r in conn.execute(f"SELECT r.rid FROM records r WHERE {w}", p)}
        )
        assert set(block(memory, scope).view()[0].tolist()) == expected, scope
        ids = {r.id for r in await memory.export(scope)}
        fast = at_once(memory, qvec, scope, 50)
        assert fast is not None and {h.record.id for h in fast} == ids, scope  # the one-statement path was taken
        assert {h.record.id for h in in_transaction(memory, qvec, scope, 50)} == ids, scope
        for mode in ("vector", "hybrid"):
            assert await store_ids(memory, scope, mode) == ids, (scope, mode)
        memory.store.search_mode = "vector"
        assert {h.record.id for h in await memory.search("walnut", scope=scope, k=50)} == ids, scope
    assert memory.dropped_out_of_scope == 0  # the guard never had to drop another scope's hit
    await memory.aclose()


@WRITE_BEHIND
@pytest.mark.parametrize("expiring_before", [False, True], ids=["none-expiring", "one-expiring-later"])
async def test_an_appended_record_past_its_expiry_is_never_a_hit_below_the_guard(
    tmp_path: Path, driver: str, monkeypatch: pytest.MonkeyPatch, write_behind: bool, expiring_before: bool
) -> None:
    memory = SQLiteMemory(
        tmp_path / "m.db", embedder=bow_embedder(), search_mode="vector", driver=driver, write_behind=write_behind
    )
    soon = utcnow() + timedelta(hours=1)
    first = [MemoryRecord(scope=ANN, text=f"walnut tree {i}") for i in range(5)]
    if expiring_before:  # the block's soonest expiry is set already, later than the appended one's
        first.append(MemoryRecord(scope=ANN, text="walnut shell", expires_at=soon + timedelta(days=1)))
    await added(memory, first, write_behind)
    await memory.store.search("walnut", scope=ANN, k=5, filters=None)
    cached = block(memory, ANN)
    [gone] = await added(memory, [MemoryRecord(scope=ANN, text="walnut walnut walnut", expires_at=soon)], write_behind)
    assert block(memory, ANN) is cached  # extended in RAM, not reloaded
    qvec = (await embed(memory.store.embedder, ["walnut walnut walnut"]))[0]  # type: ignore[arg-type]
    assert [h.record.id for h in at_once(memory, qvec, ANN, 1)] == [gone]

    later: datetime = soon + timedelta(minutes=1)
    monkeypatch.setattr(_search, "utcnow", lambda: later)
    monkeypatch.setattr(guard_module, "utcnow", lambda: later)
    live = {r.id for r in await memory.export(ANN)}
    assert gone not in live and len(live) == len(first)
    fast = at_once(memory, qvec, ANN, 50)
    assert fast is not None and {h.record.id for h in fast} == live  # the one-statement path was taken
    assert {h.record.id for h in in_transaction(memory, qvec, ANN, 50)} == live
    for mode in ("vector", "hybrid"):
        assert await store_ids(memory, ANN, mode) == live, mode
    assert block(memory, ANN) is cached
    await memory.aclose()
