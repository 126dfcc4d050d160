"""The entity graph on SQLite: validity closing, as-of queries, depth bounds, cycles, isolation, erasure, tools."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memoryport import (
    InvalidInput,
    MemoryRecord,
    MemoryScope,
    MemoryTools,
    NewFact,
    SQLiteGraph,
    SQLiteMemory,
    ToolContext,
    UsageError,
    graph_tools,
    memory_tools,
)

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann")
BEN = MemoryScope(user_id="ben")
T0 = datetime(2020, 1, 1, tzinfo=timezone.utc)


def day(n: int) -> datetime:
    return T0 + timedelta(days=n)


@pytest.fixture
def memory(tmp_path: Path) -> SQLiteMemory:
    return SQLiteMemory(tmp_path / "m.db")


async def test_contradiction_closes_the_old_fact_and_as_of_reads_history(memory: SQLiteMemory) -> None:
    graph = SQLiteGraph(memory, single_valued={"lives_in"})
    [ids] = [await memory.add([MemoryRecord(scope=ANN, text="Ann moved to Lisbon")])]
    await graph.add_facts(
        [NewFact(subject="Ann", relation="lives_in", object="Lisbon", valid_from=day(0), memory_id=ids[0])], scope=ANN
    )
    await graph.add_facts([NewFact(subject="Ann", relation="likes", object="Tea", valid_from=day(1))], scope=ANN)
    await graph.add_facts([NewFact(subject="ann", relation="lives_in", object="Porto", valid_from=day(100))], scope=ANN)
    await graph.add_facts([NewFact(subject="Ann", relation="likes", object="Coffee", valid_from=day(200))], scope=ANN)

    now = {(f.relation, f.object) for f in await graph.facts_about("ANN", scope=ANN)}
    assert now == {("lives_in", "Porto"), ("likes", "Tea"), ("likes", "Coffee")}  # likes is multi-valued
    history = await graph.facts_about("Ann", scope=ANN, history=True)
    lisbon = next(f for f in history if f.object == "Lisbon")
    assert lisbon.valid_to == day(100) and lisbon.memory_id == ids[0]  # closed, not deleted
    assert {f.object for f in await graph.facts_about("Ann", scope=ANN, as_of=day(50))} == {"Lisbon", "Tea"}
    assert {f.object for f in await graph.facts_about("Ann", scope=ANN, as_of=day(100))} == {"Porto", "Tea"}
    assert await graph.facts_about("Ann", scope=ANN, as_of=day(-1)) == []
    # The same fact again is not a contradiction and not a duplicate.
    again = await graph.add_facts([NewFact(subject="Ann", relation="lives_in", object="Porto")], scope=ANN)
    assert again[0].valid_from == day(100)
    assert len(await graph.facts_about("Ann", scope=ANN, history=True)) == 4
    # A fact from the past, older than the current one, becomes history ending where the current one starts.
    [old] = await graph.add_facts(
        [NewFact(subject="Ann", relation="lives_in", object="Faro", valid_from=day(-30))], scope=ANN
    )
    assert old.valid_to == day(100)
    assert {f.object for f in await graph.facts_about("Ann", scope=ANN)} >= {"Porto"}
    await memory.aclose()


async def test_aliases_name_one_entity(memory: SQLiteMemory) -> None:
    graph = SQLiteGraph(memory)
    assert await graph.add_entity("Ann Lee", aliases=["Ann", "A. Lee"], scope=ANN) == "Ann Lee"
    await graph.add_facts([NewFact(subject="a. lee", relation="works_at", object="Acme")], scope=ANN)
    [fact] = await graph.facts_about("ann", scope=ANN)
    assert fact.subject == "Ann Lee"
    await graph.add_entity("Acme", aliases=["ACME Corp"], scope=ANN)
    with pytest.raises(InvalidInput):
        await graph.add_entity("Acme", aliases=["Ann"], scope=ANN)  # "Ann" already names Ann Lee
    await memory.aclose()


async def test_depth_is_bounded_and_cycles_end(memory: SQLiteMemory) -> None:
    graph = SQLiteGraph(memory)
    chain = [NewFact(subject=f"n{i}", relation="next", object=f"n{i + 1}") for i in range(8)]
    cycle = [NewFact(subject="n8", relation="next", object="n0")]  # a ring of nine
    await graph.add_facts(chain + cycle, scope=ANN)
    two = await graph.related("n0", scope=ANN)
    assert sorted((r.entity, r.depth) for r in two) == [("n1", 1), ("n2", 2), ("n7", 2), ("n8", 1)]
    four = await graph.related("n0", scope=ANN, depth=4)
    assert {r.entity for r in four} == {f"n{i}" for i in range(1, 9)}
    assert max(r.depth for r in four) == 4 and all(r.entity != "n0" for r in four)
    hop = next(r for r in two if r.entity == "n2")
    assert (hop.fact.subject, hop.fact.object) == ("n1", "n2")
    with pytest.raises(InvalidInput):
        await graph.related("n0", scope=ANN, depth=5)
    with pytest.raises(InvalidInput):
        await graph.related("n0", scope=ANN, depth=0)
    # Paths both ways round the ring, shortest first, no entity twice.
    paths = await graph.paths("n0", "n3", scope=ANN, max_depth=4)
    assert [[f.object for f in p] for p in paths] == [["n1", "n2", "n3"]]
    paths = await graph.paths("n0", "n5", scope=ANN, max_depth=4)
    assert [len(p) for p in paths] == [4]  # n0-n8-n7-n6-n5 backwards round the ring
    assert await graph.paths("n0", "n5", scope=ANN, max_depth=3) == []
    assert await graph.related("nobody", scope=ANN) == []
    await memory.aclose()


async def test_as_of_traversal_uses_facts_true_then(memory: SQLiteMemory) -> None:
    graph = SQLiteGraph(memory, single_valued={"works_at"})
    await graph.add_facts([NewFact(subject="Ann", relation="works_at", object="Acme", valid_from=day(0))], scope=ANN)
    await graph.add_facts([NewFact(subject="Acme", relation="based_in", object="Oslo", valid_from=day(0))], scope=ANN)
    await graph.add_facts(
        [NewFact(subject="Ann", relation="works_at", object="Initech", valid_from=day(10))], scope=ANN
    )
    assert {r.entity for r in await graph.related("Ann", scope=ANN)} == {"Initech"}
    assert {r.entity for r in await graph.related("Ann", scope=ANN, as_of=day(5))} == {"Acme", "Oslo"}
    assert await graph.paths("Ann", "Oslo", scope=ANN) == []
    assert len(await graph.paths("Ann", "Oslo", scope=ANN, as_of=day(5))) == 1
    await memory.aclose()


async def test_isolation_between_users_and_erasure(memory: SQLiteMemory) -> None:
    graph = SQLiteGraph(memory)
    await graph.add_facts([NewFact(subject="Ann", relation="knows", object="Cleo")], scope=ANN)
    await graph.add_facts([NewFact(subject="Ben", relation="knows", object="Cleo")], scope=BEN)
    await graph.add_facts([NewFact(subject="Cleo", relation="knows", object="Dan")], scope=BEN)
    assert {r.entity for r in await graph.related("Ann", scope=ANN, depth=4)} == {"Cleo"}  # not Ben's Dan
    assert await graph.facts_about("Ben", scope=ANN) == []
    assert await graph.paths("Cleo", "Dan", scope=ANN) == []
    assert [f.subject for f in await graph.facts_about("Cleo", scope=BEN, history=True)] == ["Ben", "Cleo"]
    # A narrower scope would be widened to the user: refused.
    with pytest.raises(InvalidInput):
        await graph.facts_about("Ann", scope=MemoryScope(user_id="ann", session_id="s1"))
    with pytest.raises(UsageError):
        await graph.facts_about("Ann", scope=None)  # type: ignore[arg-type]
    # Erasing Ann erases her graph (and only hers); a session's erasure leaves the user's graph.
    await memory.delete(scope=MemoryScope(user_id="ann", session_id="s1"))
    assert len(await graph.facts_about("Ann", scope=ANN)) == 1
    await memory.delete(scope=ANN)
    assert await graph.facts_about("Ann", scope=ANN, history=True) == []
    assert await graph.facts_about("Cleo", scope=ANN, history=True) == []
    assert len(await graph.facts_about("Cleo", scope=BEN, history=True)) == 2
    await memory.aclose()
    raw = b"".join(p.read_bytes() for p in Path(memory.store.db.path).parent.iterdir() if p.name.startswith("m.db"))
    assert b"Ann" not in raw and b"Ben" in raw


async def test_tools_take_the_user_from_the_context(memory: SQLiteMemory) -> None:
    graph = SQLiteGraph(memory, single_valued={"lives_in"})
    await graph.add_facts([NewFact(subject="Ann", relation="lives_in", object="Porto")], scope=ANN)
    await graph.add_facts([NewFact(subject="Porto", relation="in", object="Portugal")], scope=ANN)
    tools = MemoryTools.from_tools([*memory_tools(memory), *graph_tools(graph)], memory)
    assert {"facts_about", "related"} <= set(tools.names)
    ann = ToolContext(user_id="ann", session_id="t1")
    out = await tools.dispatch("facts_about", {"entity": "Ann"}, ann)
    assert [(f["relation"], f["object"]) for f in out["facts"]] == [("lives_in", "Porto")]
    out = await tools.dispatch("related", '{"entity": "Ann"}', ann)
    assert [(r["entity"], r["depth"]) for r in out["related"]] == [("Porto", 1), ("Portugal", 2)]
    # The model cannot name another user: an extra argument is refused; Ben's context sees nothing.
    out = await tools.dispatch("facts_about", {"entity": "Ann", "user_id": "ann"}, ToolContext(user_id="ben"))
    assert out["error"]["code"] == "invalid_arguments"
    out = await tools.dispatch("facts_about", {"entity": "Ann"}, ToolContext(user_id="ben"))
    assert out == {"entity": "Ann", "facts": [], "count": 0}
    out = await tools.dispatch("related", {"entity": "Ann", "depth": 9}, ann)
    assert out["error"]["code"] == "invalid_arguments"
    out = await tools.dispatch("facts_about", {"entity": "Ann"}, ToolContext(session_id="anon"))
    assert out["error"]["code"] == "anonymous"
    assert tools["related"].openai()["function"]["parameters"]["properties"].keys() == {"entity", "depth"}
    await memory.aclose()


def test_graph_needs_a_sqlite_memory(tmp_path: Path) -> None:
    from memoryport import CallableMemory

    with pytest.raises(UsageError):
        SQLiteGraph(CallableMemory(add=lambda records: [], search=lambda **_: []))
    with pytest.raises(UsageError):
        SQLiteGraph(SQLiteMemory(tmp_path / "x.db"), single_valued="lives_in")  # type: ignore[arg-type]


def test_a_file_made_before_the_graph_gains_its_tables(tmp_path: Path) -> None:
    import sqlite3

    from memoryport.adapters.sqlite._schema import FTS_DDL, MIGRATIONS

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for statements in MIGRATIONS[:2]:
        for statement in statements:
            conn.execute(statement)
    conn.execute(FTS_DDL)
    conn.execute("INSERT INTO meta(key, value) VALUES ('schema_version', 2), ('keyword_index', 'fts5')")
    conn.commit()
    conn.close()
    memory = SQLiteMemory(path, driver="sqlite3")
    graph = SQLiteGraph(memory)
    import asyncio

    async def go() -> list[str]:
        await graph.add_facts([NewFact(subject="a", relation="r", object="b")], scope=ANN)
        return [r.entity for r in await graph.related("a", scope=ANN)]

    assert asyncio.run(go()) == ["b"]
    assert memory.store.stats()["schema_version"] == len(MIGRATIONS)
    memory.close()
