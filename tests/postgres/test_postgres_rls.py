"""Row-level security: a second wall that holds when a query forgets the scope."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator

import psycopg
import pytest

from memoryport import GuardedMemory, MemoryRecord, MemoryScope
from memoryport.adapters.postgres import PostgresMemory, PostgresStore, _where

from .support import Server, bow_embedder, fresh_schema

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")
NOBODY = MemoryScope(session_id="kiosk")  # no user: its own tenant, never an empty setting


def forget_the_scope(monkeypatch: pytest.MonkeyPatch) -> None:
    """Break query building: every module of the adapter gets a ``scope_sql`` with no conditions."""
    package = "memoryport.adapters.postgres."
    patched = 0
    for name, module in list(sys.modules.items()):
        if name.startswith(package) and hasattr(module, "scope_sql"):
            monkeypatch.setattr(module, "scope_sql", lambda scope, a="r": _where.Sql())
            patched += 1
    assert patched >= 5  # the store, search, keyword, vector, update and erasure modules all build scopes


@pytest.fixture
async def memory(pg: Server) -> AsyncIterator[GuardedMemory[PostgresStore]]:
    m = PostgresMemory(pg.app_dsn, embedder=bow_embedder(), schema=fresh_schema(), pool_size=2)
    await m.add([MemoryRecord(scope=ANN, text=f"ann likes green tea {i}", metadata={"i": i}) for i in range(3)])
    await m.add([MemoryRecord(scope=BEN, text=f"ben likes green tea {i}", metadata={"i": i}) for i in range(4)])
    await m.add([MemoryRecord(scope=NOBODY, text="kiosk likes green tea")])
    yield m
    await m.aclose()


async def test_policies_bind_the_tables_owner(pg: Server, memory: GuardedMemory[PostgresStore]) -> None:
    """The app role owns the tables; FORCE ROW LEVEL SECURITY still binds it."""
    assert memory.store.rls_enforced is True
    table = f"{memory.store.schema}.records"
    async with await psycopg.AsyncConnection.connect(pg.app_dsn) as conn:
        cur = await conn.execute(
            "SELECT relowner::regrole::text, relforcerowsecurity FROM pg_class WHERE oid = %s::regclass", (table,)
        )
        assert await cur.fetchone() == ("memoryport_app", True)
        # No setting at all: an unscoped query sees nothing.
        cur = await conn.execute(f"SELECT count(*) FROM {table}")
        assert await cur.fetchone() == (0,)
        await conn.rollback()
        # Ann's setting: an unscoped query sees Ann's rows only.
        async with conn.transaction():
            await conn.execute("SELECT set_config('memoryport.tenant', 'u:ann', true)")
            cur = await conn.execute(f"SELECT DISTINCT user_id FROM {table}")
            assert await cur.fetchall() == [("ann",)]
        # After that transaction the setting reads '' and matches nobody (not the no-user tenant).
        cur = await conn.execute(f"SELECT count(*) FROM {table}")
        assert await cur.fetchone() == (0,)
        await conn.rollback()
        # Writing another user's row under Ann's setting is refused.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            async with conn.transaction():
                await conn.execute("SELECT set_config('memoryport.tenant', 'u:ann', true)")
                await conn.execute(
                    f"INSERT INTO {table}(id, user_id, text, created_at, doclen) VALUES ('x', 'ben', 'hi', now(), 1)"
                )


async def test_an_unscoped_query_returns_nothing_of_other_users(
    memory: GuardedMemory[PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Break the store's query building (scope conditions gone): RLS still keeps Ben out of Ann's answers."""
    forget_the_scope(monkeypatch)
    store = memory.store
    for query in ("", "green tea", "ben likes green tea 1"):
        hits = await store.search(query, scope=ANN, k=50, filters=None)
        assert hits and {h.record.scope.user_id for h in hits} == {"ann"}, query
    exported = await store.export(ANN)
    assert sorted(r.text for r in exported) == [f"ann likes green tea {i}" for i in range(3)]
    ben_ids = [r.id for r in await memory.export(BEN)]  # (the guard's call is scoped by the broken code too)
    assert ben_ids == [] or all(r is None for r in [await store.get(i, scope=ANN) for i in ben_ids if i])
    # The no-user tenant is a tenant of its own.
    assert {r.text for r in await store.export(NOBODY)} == {"kiosk likes green tea"}
    # Even a delete with the scope gone removes only the caller's rows.
    assert await store.delete(None, scope=ANN) == 3
    monkeypatch.undo()
    assert len(await memory.export(BEN)) == 4
    assert len(await memory.export(NOBODY)) == 1
    assert memory.dropped_out_of_scope == 0


async def test_get_of_another_users_id_is_none_even_unscoped(
    memory: GuardedMemory[PostgresStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    ben_ids = [r.id for r in await memory.export(BEN)]
    forget_the_scope(monkeypatch)
    for record_id in ben_ids:
        assert record_id is not None
        assert await memory.store.get(record_id, scope=ANN) is None


async def test_a_superuser_bypasses_rls_and_is_warned(pg: Server, caplog: pytest.LogCaptureFixture) -> None:
    m = PostgresMemory(pg.admin_dsn, schema=fresh_schema(), pool_size=1)
    try:
        with caplog.at_level(logging.WARNING, logger="memoryport"):
            await m.add([MemoryRecord(scope=ANN, text="hello")])
        assert m.store.rls_enforced is False
        assert any("row-level security does not apply" in r.getMessage() for r in caplog.records)
    finally:
        await m.aclose()
