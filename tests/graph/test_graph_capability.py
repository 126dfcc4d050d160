"""The graph as a capability: declared, refused, guarded on the way out, and offered as tools only where it exists."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from memoryport import (
    CallableMemory,
    Capability,
    Fact,
    GuardedMemory,
    KnowledgeGraph,
    MemoryScope,
    NewFact,
    Related,
    SQLiteMemory,
    SupportsGraph,
    ToolContext,
    UnsupportedCapability,
    UsageError,
    memory_tools,
)
from memoryport.testing import InMemoryGraph, InMemoryStore

pytestmark = pytest.mark.anyio

ANN = MemoryScope(user_id="ann")
T0 = datetime(2023, 1, 1, tzinfo=timezone.utc)


def test_stores_declare_the_capability(tmp_path: Path) -> None:
    sqlite = SQLiteMemory(tmp_path / "m.db")
    assert Capability.GRAPH in sqlite.capabilities and isinstance(sqlite.store, SupportsGraph)
    sqlite.close()
    assert Capability.GRAPH in GuardedMemory(InMemoryStore()).capabilities
    bare = CallableMemory(add=lambda records: None, search=lambda **kw: [])
    assert Capability.GRAPH not in bare.capabilities


def test_a_memory_without_the_capability_is_refused() -> None:
    smaller = GuardedMemory(InMemoryStore(capabilities={Capability.DELETE, Capability.KEYWORD_SEARCH}, name="small"))
    with pytest.raises(UnsupportedCapability, match=r"'graph' capability.*'small'") as refused:
        KnowledgeGraph(smaller)
    assert refused.value.capability == "graph" and refused.value.backend == "small"
    bare = CallableMemory(add=lambda records: None, search=lambda **kw: [])
    with pytest.raises(UnsupportedCapability):
        KnowledgeGraph(bare)
    with pytest.raises(UsageError, match="cannot keep an entity graph"):
        CallableMemory(add=lambda records: None, search=lambda **kw: [], capabilities=[Capability.GRAPH])
    with pytest.raises(UsageError, match="not str"):
        KnowledgeGraph("memory.db")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="set of relation names"):
        KnowledgeGraph(GuardedMemory(InMemoryStore()), single_valued="lives_in")


def test_the_guard_checks_a_declared_graph() -> None:
    class NoPort(InMemoryStore):
        graph_port = None  # type: ignore[assignment]

    with pytest.raises(UsageError, match="declares 'graph' but has no graph_port"):
        GuardedMemory(NoPort())
    with pytest.raises(UsageError, match="without 'delete'"):
        GuardedMemory(InMemoryStore(capabilities={Capability.GRAPH}))


async def test_facts_not_true_at_the_time_asked_are_dropped_on_the_way_out(caplog: pytest.LogCaptureFixture) -> None:
    class Stale(InMemoryGraph):
        """Broken: answers "current" with the whole history, and related beyond the depth asked."""

        async def facts_about(self, entity: str, *, user_id: str, as_of: Any, history: bool, limit: int) -> list[Fact]:
            return await super().facts_about(entity, user_id=user_id, as_of=None, history=True, limit=limit)

        async def related(self, entity: str, *, user_id: str, depth: int, **kw: Any) -> list[Related]:
            return await super().related(entity, user_id=user_id, depth=4, **kw)

    graph = KnowledgeGraph(Stale(), single_valued={"lives_in"})
    await graph.add_facts(
        [
            NewFact(subject="Ann", relation="lives_in", object="Lisbon", valid_from=T0),
            NewFact(subject="Ann", relation="lives_in", object="Porto", valid_from=T0.replace(year=2024)),
            NewFact(subject="Porto", relation="in", object="Portugal", valid_from=T0),
            NewFact(subject="Portugal", relation="in", object="Europe", valid_from=T0),
        ],
        scope=ANN,
    )
    assert [f.object for f in await graph.facts_about("Ann", scope=ANN)] == ["Porto"]
    assert graph.dropped == 1 and "not true at the time asked" in caplog.text
    assert {r.entity for r in await graph.related("Ann", scope=ANN, depth=2)} == {"Porto", "Portugal"}
    assert graph.dropped == 2


def test_sync_twins() -> None:
    graph = KnowledgeGraph(GuardedMemory(InMemoryStore()))
    assert graph.add_entity_sync("Ann Lee", aliases=["Ann"], scope=ANN) == "Ann Lee"
    graph.add_facts_sync([NewFact(subject="ann", relation="knows", object="Ben", valid_from=T0)], scope=ANN)
    assert [f.subject for f in graph.facts_about_sync("Ben", scope=ANN)] == ["Ann Lee"]
    assert [r.entity for r in graph.related_sync("Ben", scope=ANN)] == ["Ann Lee"]
    assert len(graph.paths_sync("Ann", "Ben", scope=ANN)) == 1


async def test_sync_twin_inside_a_loop_names_await() -> None:
    graph = KnowledgeGraph(GuardedMemory(InMemoryStore()))
    with pytest.raises(UsageError, match=r"await graph\.facts_about"):
        graph.facts_about_sync("Ann", scope=ANN)


async def test_graph_tools_are_offered_on_request_where_the_graph_exists(tmp_path: Path) -> None:
    memory = SQLiteMemory(tmp_path / "m.db")
    assert "facts_about" not in memory_tools(memory).names, "not offered unless the host asks"
    tools = memory_tools(memory, graph=True)
    assert tools.names[-2:] == ["facts_about", "related"]
    assert tools["facts_about"].effect == tools["related"].effect == "read_only"
    assert "user" not in str(tools["facts_about"].parameters["properties"]), "the model never names a user"
    graph = KnowledgeGraph(memory)
    await graph.add_facts([NewFact(subject="Ann", relation="likes", object="Tea", valid_from=T0)], scope=ANN)
    await graph.add_facts([NewFact(subject="Tea", relation="grows_in", object="Assam", valid_from=T0)], scope=ANN)
    ctx = ToolContext(user_id="ann", session_id="chat-1", agent_id="helper")
    out = await tools.dispatch("facts_about", '{"entity": "ann"}', ctx)
    assert [(f["relation"], f["object"]) for f in out["facts"]] == [("likes", "Tea")]
    near = await tools.dispatch("related", {"entity": "Ann", "depth": 2}, ctx)
    assert [(r["entity"], r["depth"]) for r in near["related"]] == [("Tea", 1), ("Assam", 2)]
    assert (await tools.dispatch("facts_about", {"entity": "Ann"}, ToolContext(user_id="ben")))["facts"] == []
    sneaky = await tools.dispatch("facts_about", {"entity": "Ann", "user_id": "ben"}, ctx)
    assert sneaky["error"]["code"] == "invalid_arguments"
    deep = await tools.dispatch("related", {"entity": "Ann", "depth": 9}, ctx)
    assert deep["error"]["code"] == "invalid_arguments"
    long = await tools.dispatch("facts_about", {"entity": "x" * 500}, ctx)
    assert long["error"]["code"] == "invalid_input"
    anonymous = await tools.dispatch("facts_about", {"entity": "Ann"}, ToolContext(session_id="kiosk"))
    assert anonymous["error"]["code"] == "anonymous"
    await memory.aclose()


def test_graph_tools_need_the_capability() -> None:
    small = GuardedMemory(InMemoryStore(capabilities={Capability.DELETE, Capability.KEYWORD_SEARCH}))
    with pytest.raises(UsageError, match="keeps no entity graph"):
        memory_tools(small, graph=True)
    with pytest.raises(UsageError, match="True or False"):
        memory_tools(GuardedMemory(InMemoryStore()), graph="yes")  # type: ignore[arg-type]
