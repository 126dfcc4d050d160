"""The entity graph on PostgreSQL: row-level security on its tables, erasure, migration, tools, the CLI import.

The graph's behaviour (validity, as-of, depth, cycles, paths, isolation, erasure)
is checked by the contract suite's graph section (test_postgres_contract.py).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path

import psycopg
import pytest

from memoryport import GuardedMemory, KnowledgeGraph, MemoryRecord, MemoryScope, NewFact, ToolContext, memory_tools
from memoryport.adapters.postgres import SCHEMA_VERSION, PostgresMemory, PostgresStore
from memoryport.adapters.postgres._schema import MIGRATIONS

from .support import Server, fresh_schema

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")
T0 = datetime(2022, 1, 1, tzinfo=timezone.utc)
TABLES = ("graph_entities", "graph_aliases", "graph_facts")


@pytest.fixture
async def memory(pg: Server) -> AsyncIterator[GuardedMemory[PostgresStore]]:
    m = PostgresMemory(pg.app_dsn, schema=fresh_schema(), pool_size=2)
    yield m
    await m.aclose()


async def _fill(graph: KnowledgeGraph) -> None:
    for who, city in ((ANN, "Lisbon"), (BEN, "Oslo")):
        await graph.add_entity(str(who.user_id).title(), aliases=["me"], scope=who)
        await graph.add_facts([NewFact(subject="me", relation="lives_in", object=city, valid_from=T0)], scope=who)


async def _count(dsn: str, schema: str, table: str, *, tenant: str | None, all_tenants: bool = False) -> int:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        if tenant is not None:
            await conn.execute("SELECT set_config('memoryport.tenant', %s, false)", (tenant,))
        if all_tenants:
            await conn.execute("SELECT set_config('memoryport.all_tenants', 'on', false)")
        cur = await conn.execute(f"SELECT count(*) FROM {schema}.{table}")
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


async def test_row_level_security_binds_the_graph_tables(pg: Server, memory: GuardedMemory[PostgresStore]) -> None:
    """A query that forgot its WHERE clause still sees only the tenant's rows (the app role owns the tables)."""
    await _fill(KnowledgeGraph(memory))
    schema = memory.store.schema
    for table in TABLES:
        assert await _count(pg.app_dsn, schema, table, tenant=None) == 0, f"{table}: no tenant, no rows"
        assert await _count(pg.app_dsn, schema, table, tenant="u:ann") > 0
        both = await _count(pg.app_dsn, schema, table, tenant=None, all_tenants=True)
        assert await _count(pg.app_dsn, schema, table, tenant="u:ann") < both, f"{table}: ann sees only hers"
    async with await psycopg.AsyncConnection.connect(pg.app_dsn) as conn:
        await conn.execute("SELECT set_config('memoryport.tenant', 'u:ann', false)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # WITH CHECK: no row for another tenant
            await conn.execute(f"INSERT INTO {schema}.graph_entities(user_id, key, name) VALUES ('ben', 'x', 'X')")


async def test_erasing_a_user_leaves_no_graph_row(pg: Server, memory: GuardedMemory[PostgresStore]) -> None:
    graph = KnowledgeGraph(memory)
    await _fill(graph)
    await memory.add([MemoryRecord(scope=ANN, text="Ann lives in Lisbon")])
    assert await memory.delete(scope=ANN) == 1
    schema = memory.store.schema
    for table in TABLES:
        assert await _count(pg.admin_dsn, schema, table + " WHERE user_id = 'ann'", tenant=None) == 0, table
        assert await _count(pg.admin_dsn, schema, table + " WHERE user_id = 'ben'", tenant=None) > 0, table
    assert [f.object for f in await graph.facts_about("me", scope=BEN)] == ["Oslo"]


async def test_a_version_1_schema_gains_the_graph(pg: Server) -> None:
    """A schema made before the graph (version 1) is migrated on first use; its records stay."""
    from memoryport.adapters.postgres._schema import quote_ident

    schema = fresh_schema()
    s = quote_ident(schema)
    async with await psycopg.AsyncConnection.connect(pg.app_dsn) as conn, conn.transaction():
        await conn.execute(f"CREATE SCHEMA {s}")
        await conn.execute(f"CREATE TABLE {s}.meta(key text PRIMARY KEY, value text NOT NULL)")
        await conn.execute(
            f"INSERT INTO {s}.meta VALUES ('schema_version', '1'), ('text_search_config', 'english')"
        )
        for statement in MIGRATIONS[0]:
            await conn.execute(statement.format(s=s, cfg="'english'"))
    memory = PostgresMemory(pg.app_dsn, schema=schema, pool_size=1)
    try:
        await memory.add([MemoryRecord(scope=ANN, text="kept")])
        graph = KnowledgeGraph(memory)
        await graph.add_facts([NewFact(subject="Ann", relation="likes", object="Tea", valid_from=T0)], scope=ANN)
        assert [f.object for f in await graph.facts_about("Ann", scope=ANN)] == ["Tea"]
        assert (await memory.store.stats())["schema_version"] == SCHEMA_VERSION == len(MIGRATIONS)
    finally:
        await memory.aclose()


async def test_graph_tools_over_postgres(memory: GuardedMemory[PostgresStore]) -> None:
    await _fill(KnowledgeGraph(memory))
    tools = memory_tools(memory, graph=True)
    out = await tools.dispatch("facts_about", {"entity": "me"}, ToolContext(user_id="ann", session_id="c1"))
    assert [f["object"] for f in out["facts"]] == ["Lisbon"]
    near = await tools.dispatch("related", {"entity": "Lisbon"}, ToolContext(user_id="ben"))
    assert near["related"] == [], "ben's context reads ben's graph, where Lisbon is unknown"


def test_cli_imports_knowledge_into_postgres(pg: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memoryport.cli import main

    folder = tmp_path / "handbook"
    folder.mkdir()
    (folder / "tea.md").write_text("# Tea\n\nGreen tea is brewed at 80 degrees.\n")
    (folder / "coffee.txt").write_text("Coffee is brewed at 94 degrees.\n")
    schema = fresh_schema()
    argv = ["import", str(folder), "--dsn", pg.app_dsn, "--schema", schema, "--user", "ann", "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert sorted(first["added"]) == ["coffee.txt", "tea.md"] and first["chunks_added"] >= 2
    (folder / "coffee.txt").unlink()
    assert main(argv) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["removed"] == ["coffee.txt"] and second["unchanged"] == ["tea.md"]
    memory = PostgresMemory(pg.app_dsn, schema=schema, pool_size=1)
    try:
        hits = memory.search_sync("green tea", scope=ANN, filters={"kind": "knowledge"})
        assert hits and "80 degrees" in hits[0].record.text
    finally:
        memory.close()
    assert main(["import", str(folder), "--dsn", pg.app_dsn, "--db", "x.db", "--user", "ann"]) == 2
    assert "not both" in capsys.readouterr().err
